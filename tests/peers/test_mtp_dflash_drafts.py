"""The drafts the llama-server peer's `draft-mtp`, `draft-dflash` and `draft-dspark` arms load
(`pytest_onebit.peers.mtp_drafts`, `pytest_onebit.peers.dflash_drafts`): the fabricated MTP
target reads back with `gguf` as a glm4moe model with one nextn block and the vocabulary it
was given, byte for byte the same for a seed; the DFlash / DSpark checkpoints have the
target's width and vocabulary and the same weights for a seed; and, where llama.cpp's source
tree and SmolLM2 are here, its converter makes `dflash` GGUFs of them (DSpark with its Markov
head under the names llama.cpp detects) and a second call converts nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gguf
import numpy as np
import pytest

from pytest_onebit.peers import dflash_drafts as dd
from pytest_onebit.peers import mtp_drafts as md
from pytest_onebit.peers.dflash_drafts import draft_config, draft_weights, write_checkpoint
from pytest_onebit.peers.mtp_drafts import MtpDraftError, mtp_targets, write_mtp_target

VOCAB = 300
EOS = 2


def vocab_gguf(path: Path, *, tokens: int = VOCAB) -> Path:
    """A GGUF holding only a tokenizer (gpt2 model, `tokens` byte-level tokens, eos 2, a chat
    template): what the MTP maker copies from SmolLM2's file."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list([f"t{i}" for i in range(tokens)])
    writer.add_token_types([1] * tokens)
    writer.add_token_merges(["t 1"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(EOS)
    writer.add_chat_template("{{ messages[0]['content'] }}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def fields(path: Path) -> tuple[gguf.GGUFReader, dict]:
    reader = gguf.GGUFReader(str(path))
    return reader, {name: f.contents() for name, f in reader.fields.items()}


def test_the_mtp_target_reads_back_as_glm4moe_with_one_nextn_block(tmp_path):
    """The written file is arch glm4moe, 3 blocks of which the last is the MTP block
    (`nextn_predict_layers` 1, `blk.2.nextn.eh_proj` present: what llama.cpp's draft-mtp
    looks for), the source's tokenizer fields copied unchanged, the embeddings the source's
    vocabulary long; the bigram head's eh_proj passes the token half through ([I | 0])."""
    source = vocab_gguf(tmp_path / "vocab.gguf")
    out = write_mtp_target(source, tmp_path / "t.gguf", head="bigram", seed=3)
    reader, kv = fields(out)
    _, src = fields(source)
    assert kv["general.architecture"] == "glm4moe"
    assert kv["glm4moe.block_count"] == 3 and kv["glm4moe.nextn_predict_layers"] == 1
    assert kv["glm4moe.leading_dense_block_count"] == 2
    for name, value in src.items():
        if name.startswith("tokenizer."):
            assert kv[name] == value, name
    tensors = {t.name: t for t in reader.tensors}
    assert tuple(tensors["token_embd.weight"].shape) == (64, VOCAB)
    assert "blk.2.nextn.eh_proj.weight" in tensors and "blk.1.nextn.eh_proj.weight" not in tensors
    assert "blk.2.ffn_gate_inp.weight" in tensors and "blk.1.ffn_gate.weight" in tensors
    eh = np.asarray(tensors["blk.2.nextn.eh_proj.weight"].data)
    assert eh.shape == (64, 128)
    assert np.array_equal(eh, np.concatenate([np.eye(64), np.zeros((64, 64))], axis=1))
    assert not list(tmp_path.glob(".*partial"))


def test_the_mtp_target_is_the_same_bytes_for_a_seed_and_differs_by_seed_and_head(tmp_path):
    """Deterministic by seed: two writes with seed 3 are byte-identical; seed 4, or the random
    head, give other weights (the random head's eh_proj is not the pass-through)."""
    source = vocab_gguf(tmp_path / "vocab.gguf")
    a = write_mtp_target(source, tmp_path / "a.gguf", seed=3).read_bytes()
    assert a == write_mtp_target(source, tmp_path / "b.gguf", seed=3).read_bytes()
    assert a != write_mtp_target(source, tmp_path / "c.gguf", seed=4).read_bytes()
    rnd = write_mtp_target(source, tmp_path / "d.gguf", head="random", seed=3)
    eh = {t.name: t for t in gguf.GGUFReader(str(rnd)).tensors}["blk.2.nextn.eh_proj.weight"]
    assert not np.array_equal(np.asarray(eh.data)[:, :64], np.eye(64))


def test_mtp_targets_are_cached_by_content_and_bad_input_is_named(tmp_path, monkeypatch):
    """`mtp_targets` writes each head once under $ONEBIT_HOME/drafts with its recipe beside it;
    a second call writes nothing (the writer is made to fail); a missing source, a file that
    is not a GGUF and an unknown head are refused naming them."""
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path / "home"))
    source = vocab_gguf(tmp_path / "vocab.gguf")
    made = mtp_targets(source)
    assert set(made) == {"bigram", "random"} and made["bigram"] != made["random"]
    for path in made.values():
        assert path.is_file() and path.parent.parent == tmp_path / "home" / "drafts"
        assert json.loads(path.with_suffix(".json").read_text())["head"] in md.HEADS

    def no_write(*_args, **_kwargs):
        raise AssertionError("written again")

    monkeypatch.setattr(md, "write_mtp_target", no_write)
    assert mtp_targets(source) == made
    with pytest.raises(MtpDraftError, match="nowhere"):
        mtp_targets(tmp_path / "nowhere.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf at all")
    monkeypatch.undo()
    with pytest.raises(MtpDraftError, match="junk.gguf"):
        write_mtp_target(junk, tmp_path / "x.gguf")
    with pytest.raises(ValueError, match="unknown MTP head 'perfect'"):
        write_mtp_target(source, tmp_path / "x.gguf", head="perfect")


TARGET = {"hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2,
          "num_hidden_layers": 30, "vocab_size": VOCAB, "rms_norm_eps": 1e-5,
          "rope_parameters": {"rope_theta": 100000.0}}


def test_the_dflash_checkpoint_has_the_targets_shapes_and_the_same_weights_for_a_seed(tmp_path):
    """The draft's config copies the target's width, heads and vocabulary (it reads the
    target's embeddings and head), names target layers inside the target, and DSpark adds the
    Markov head under the names the converter maps to `markov_w1.weight` / `markov_w2.weight`;
    the weights are the same for a seed and differ by seed; the folder reads back."""
    from safetensors.numpy import load_file

    config = draft_config(TARGET, "dflash", 0)
    assert config["architectures"] == ["DFlashDraftModel"]
    assert config["hidden_size"] == 48 and config["vocab_size"] == VOCAB
    assert config["rope_theta"] == 100000.0 and config["head_dim"] == 12
    assert all(0 <= i < 30 for i in config["dflash_config"]["target_layer_ids"])
    a, b = draft_weights(config, "dflash", 5), draft_weights(config, "dflash", 5)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["fc.weight"], draft_weights(config, "dflash", 6)["fc.weight"])
    assert a["fc.weight"].shape == (48, 48 * len(config["dflash_config"]["target_layer_ids"]))
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps(TARGET))
    folder = write_checkpoint(hf, tmp_path / "dspark", "dspark", 5, 0)
    back = load_file(str(folder / "model.safetensors"))
    assert json.loads((folder / "config.json").read_text())["architectures"] == \
        ["DSparkDraftModel"]
    assert back["markov_head.markov_w1.weight"].shape == (VOCAB, dd.MARKOV_RANK)
    assert np.array_equal(back["fc.weight"], a["fc.weight"])
    with pytest.raises(dd.DFlashDraftError, match="hidden_size"):
        draft_config({"vocab_size": 3}, "dflash", 0)


@pytest.mark.slow
def test_llama_cpps_converter_makes_dflash_ggufs_once(tmp_path, monkeypatch):
    """With llama.cpp's source tree and SmolLM2 here: both drafts become arch `dflash` GGUFs
    with the target layers and block size in their metadata, only the DSpark one with
    `markov_w1.weight` (what llama.cpp's loader and its type detection look for); a second
    call converts nothing. About 65 s here (the target in HF form made too), beside other work."""
    from onebit.hub import skip_unless_cached
    from pytest_onebit.peers.eagle3_drafts import (
        DraftMakeError,
        find_llama_cpp_source,
        require_source,
    )
    from pytest_onebit.peers.server_process import ServerFailed, find_server

    try:
        binary = find_server()
    except ServerFailed:
        binary = None
    try:
        source = require_source(find_llama_cpp_source(binary=binary))
    except DraftMakeError as error:
        pytest.skip(f"no llama.cpp source tree: {error}")
    model = skip_unless_cached("smollm2")
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path))
    made = dd.dflash_drafts(model, source)
    for kind, path in made.items():
        reader, kv = fields(path)
        names = {t.name for t in reader.tensors}
        assert kv["general.architecture"] == "dflash"
        assert kv["dflash.block_size"] == dd.BLOCK_SIZE and kv["dflash.target_layers"]
        assert ("markov_w1.weight" in names) == (kind == "dspark")
        assert "token_embd.weight" not in names  # it reads the target's
    stamps = {k: os.stat(p).st_mtime_ns for k, p in made.items()}

    def no_conversion(*_args, **_kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(dd, "convert", no_conversion)
    assert dd.dflash_drafts(model, source) == made
    assert {k: os.stat(p).st_mtime_ns for k, p in made.items()} == stamps


def test_the_peer_holds_the_new_arms_only_by_name_and_stops_without_the_tree(capsys, tmp_path):
    """The MTP, DFlash and DSpark arms are in the peer's arm names but not its default run;
    a DFlash arm asked for with a source tree that is not there cannot run: exit 2, naming the
    tree, before any server starts."""
    from onebit.cli import main
    from pytest_onebit.peers.llama_server_peer import (
        ARM_NAMES,
        DEFAULT_ARMS,
        DFLASH_ARMS,
        MTP_ARMS,
    )

    new = {*MTP_ARMS, *DFLASH_ARMS}
    assert new <= set(ARM_NAMES) and not new & set(DEFAULT_ARMS)
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'version: 0 (fake)'\nexit 1\n")
    fake.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    status = main(["peer", "llama-server", "--format", "json", "--server-bin", str(fake),
                   "--model", str(model), "--arm", "draft-dflash",
                   "--llama-cpp-src", str(tmp_path / "no-llama.cpp")])
    report = json.loads(capsys.readouterr().out)
    assert status == 2
    assert "cannot make the dflash drafts" in report["unavailable"]
    assert "no-llama.cpp" in report["unavailable"]


@pytest.mark.slow
def test_the_mtp_arm_runs_on_the_fabricated_target_and_accepts_drafts(capsys):
    """Where a llama-server binary and SmolLM2 (the vocabulary source) are here:
    `--arm draft-mtp` loads the fabricated target with its MTP block, both servers on it,
    and its greedy answers are the plain server's; the server's own counters say drafts were
    made and some accepted (the bigram head proposes the trunk's guess), so the accept and
    the rollback paths both ran. (I11-context is left out: it fails there on the upstream
    context-edge bug, repros/llama_server_context_edge.md.) About 30 s."""
    from onebit.cli import main
    from onebit.hub import skip_unless_cached
    from pytest_onebit.peers.server_process import ServerFailed, find_server

    try:
        binary = find_server()
    except ServerFailed as error:
        pytest.skip(str(error))
    if binary is None:
        pytest.skip("no llama-server binary (--server-bin, $ONEBIT_LLAMA_SERVER or PATH; "
                    "docs/tools.md)")
    skip_unless_cached("smollm2")
    status = main(["peer", "llama-server", "--format", "json", "--arm", "draft-mtp",
                   "--check", "A1-drafted", "--check", "I1-text"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0, report["checks"]
    assert report["checks"]["I1-text"]["status"] == "passed", report["checks"]["I1-text"]
    drafted = report["checks"]["A1-drafted"]["arms"]["draft-mtp"]
    assert drafted["status"] == "passed", drafted
    kept, made = (int(x) for x in drafted["detail"].split(" ")[0].split("/"))
    assert made > 0 and 0 < kept < made, drafted["detail"]
