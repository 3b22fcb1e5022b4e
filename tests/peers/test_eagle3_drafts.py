"""The EAGLE-3 draft GGUFs the llama-server peer's `draft-eagle3` arms load
(`pytest_onebit.peers.eagle3_drafts`): each missing piece is an error naming it, a failing
converter's own words come back, the source tree is found above a binary built in it, and,
where llama.cpp's source tree and SmolLM2 are here, onebit's two exports become `eagle3`
GGUFs that a second call takes from the cache without converting again."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from pytest_onebit.peers import eagle3_drafts as e3
from pytest_onebit.peers.eagle3_drafts import (
    CONVERTER,
    CONVERTER_FILES,
    SOURCE_ENV,
    Eagle3DraftError,
    convert,
    eagle3_drafts,
    find_llama_cpp_source,
    require_source,
)


def fake_tree(root: Path, converter: str = "") -> Path:
    """A folder with the converter's files, the converter being `converter` (Python)."""
    for name in CONVERTER_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / CONVERTER).write_text(converter)
    return root


def test_no_source_tree_is_an_error_naming_how_to_give_one(tmp_path):
    """No tree at all names --llama-cpp-src and the environment variable; a folder without
    the converter names the converter's files; a path that is no folder says so."""
    with pytest.raises(Eagle3DraftError, match="--llama-cpp-src") as caught:
        require_source(None)
    assert SOURCE_ENV in str(caught.value)
    with pytest.raises(Eagle3DraftError, match=CONVERTER):
        require_source(tmp_path)
    with pytest.raises(Eagle3DraftError, match="not a directory"):
        require_source(tmp_path / "nowhere")


def test_source_tree_found_above_the_binary_else_from_the_environment(tmp_path, monkeypatch):
    """A binary at llama.cpp/build/bin/llama-server (docs/tools.md's build) finds the tree two
    folders up; $ONEBIT_LLAMA_CPP_SRC wins over that, an explicit path over both; a binary
    with no converter above it finds none."""
    monkeypatch.delenv(SOURCE_ENV, raising=False)
    tree = fake_tree(tmp_path / "llama.cpp")
    binary = tree / "build" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    assert find_llama_cpp_source(binary=binary) == tree.resolve()
    assert find_llama_cpp_source(binary=tmp_path / "elsewhere" / "llama-server") is None
    monkeypatch.setenv(SOURCE_ENV, str(tmp_path / "env"))
    assert find_llama_cpp_source(binary=binary) == tmp_path / "env"
    assert find_llama_cpp_source(tmp_path / "given", binary=binary) == tmp_path / "given"


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("torch", "transformers")),
                    reason="the converter's check wants torch and transformers importable")
def test_a_failing_converter_is_an_error_with_its_own_last_words(tmp_path):
    """A converter that exits 1 (here a stand-in printing llama.cpp's kind of complaint) is an
    Eagle3DraftError carrying its exit status and the tail of its stderr; one that exits 0
    without writing the file is refused too, and nothing is left at the output path."""
    tree = fake_tree(tmp_path / "src", "import sys\nprint('Traceback ...', file=sys.stderr)\n"
                     "print('ValueError: EAGLE-3 model requires --target-model-dir',"
                     " file=sys.stderr)\nsys.exit(1)\n")
    out = tmp_path / "drafts" / "d.gguf"
    with pytest.raises(Eagle3DraftError, match="exited 1") as caught:
        convert(tree, tmp_path / "export", tmp_path / "hf", out)
    assert "EAGLE-3 model requires --target-model-dir" in str(caught.value)
    assert not out.exists()
    (tree / CONVERTER).write_text("pass\n")
    with pytest.raises(Eagle3DraftError, match="exited 0"):
        convert(tree, tmp_path / "export", tmp_path / "hf", out)
    assert not out.exists() and not list(out.parent.iterdir())


def test_a_missing_target_or_unknown_head_is_refused(tmp_path):
    """A target that is not a file and a head other than shipped or random are refused before
    anything runs."""
    with pytest.raises(ValueError, match="unknown EAGLE-3 head 'nope'"):
        eagle3_drafts(tmp_path / "m.gguf", tmp_path, heads=("nope",))
    with pytest.raises(Eagle3DraftError, match="not a file"):
        eagle3_drafts(tmp_path / "m.gguf", tmp_path)


def _real_source() -> Path:
    from pytest_onebit.peers.server_process import ServerFailed, find_server

    try:
        binary = find_server()
    except ServerFailed:
        binary = None
    source = find_llama_cpp_source(binary=binary)
    if source is None:
        pytest.skip(f"no llama.cpp source tree (${SOURCE_ENV}, or a llama-server built in one: "
                    f"docs/tools.md)")
    try:
        return require_source(source)
    except Eagle3DraftError as error:
        pytest.skip(str(error))


@pytest.mark.slow
def test_both_exports_become_eagle3_ggufs_and_are_converted_once(tmp_path, monkeypatch):
    """With llama.cpp's source tree and SmolLM2 here: the shipped head and the seeded random
    head become two different `eagle3` GGUFs (llama.cpp's own converter on onebit's exports),
    each with the recipe it was made from beside it; a second call returns the same files
    without running the converter (it is made to fail) or touching them. About 45 s."""
    import gguf

    from onebit.hub import skip_unless_cached

    source = _real_source()
    model = skip_unless_cached("smollm2")
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path))
    made = eagle3_drafts(model, source)
    assert set(made) == {"shipped", "random"} and made["shipped"] != made["random"]
    for path in made.values():
        assert path.is_file() and path.with_suffix(".json").is_file()
        reader = gguf.GGUFReader(str(path))
        assert reader.get_field("general.architecture").contents() == "eagle3"
        assert path.parent.parent == tmp_path / "drafts"
    stamps = {h: os.stat(p).st_mtime_ns for h, p in made.items()}

    def no_conversion(*_args, **_kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(e3, "convert", no_conversion)
    monkeypatch.setattr(e3, "export_head", no_conversion)
    assert eagle3_drafts(model, source) == made
    assert {h: os.stat(p).st_mtime_ns for h, p in made.items()} == stamps


def test_the_peer_runs_eagle3_arms_only_by_name_and_stops_without_the_tree(capsys, tmp_path):
    """`onebit peer llama-server` holds the EAGLE-3 arms only when asked by name (a run of
    every arm keeps to the nine that need only a binary); asked for with a source tree that is
    not there, the peer cannot run: exit 2, naming the tree, before any server starts."""
    import json

    from onebit.cli import main
    from pytest_onebit.peers.llama_server_peer import (
        ARM_NAMES,
        DEFAULT_ARMS,
        EAGLE3_ARMS,
        LlamaServerPeer,
    )

    assert set(EAGLE3_ARMS) <= set(ARM_NAMES) and not set(EAGLE3_ARMS) & set(DEFAULT_ARMS)
    assert LlamaServerPeer().arm_names == DEFAULT_ARMS
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'version: 0 (fake)'\nexit 1\n")
    fake.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    status = main(["peer", "llama-server", "--format", "json", "--server-bin", str(fake),
                   "--model", str(model), "--arm", "draft-eagle3",
                   "--llama-cpp-src", str(tmp_path / "no-llama.cpp")])
    report = json.loads(capsys.readouterr().out)
    assert status == 2
    assert "cannot make the EAGLE-3 drafts" in report["unavailable"]
    assert "no-llama.cpp" in report["unavailable"]
