"""`onebit pull llama.cpp-corpus`: only the named files leave the archive, every one checked.

The archive is a download and so untrusted: these tests build small archives in code, with the
tricks a hostile one could play, and a fake corpus pinned to them (the real one is 37 MB)."""

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from onebit import corpus
from onebit.hub import HubError, NotCachedError

ROOT = "pkg-1.0/llama.cpp/"


def _archive(path: Path, members: dict[str, bytes], links: tuple[str, ...] = ()) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name in links:
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
    return path


def _fake(files: dict[str, bytes], **override) -> corpus.KnownCorpus:
    digests = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    fields = dict(name="fake", package="pkg", version="1.0", archive_sha256="", root=ROOT,
                  members=("models/ggml-vocab-*.gguf", "models/templates/*.jinja"),
                  manifest_sha256=hashlib.sha256(corpus._manifest_bytes(digests)).hexdigest(),
                  folder="fake")
    return corpus.KnownCorpus(**{**fields, **override})


def test_only_the_named_files_are_taken(tmp_path):
    """Files outside the patterns (sources, a file one folder deeper, another root) stay in
    the archive; the named ones come out with their sha256."""
    wanted = {"models/ggml-vocab-a.gguf": b"vocab", "models/templates/x.jinja": b"{{ 1 }}"}
    archive = _archive(tmp_path / "a.tar.gz", {
        **{ROOT + k: v for k, v in wanted.items()},
        ROOT + "src/llama-vocab.cpp": b"code",
        ROOT + "models/templates/deeper/y.jinja": b"no",
        "other/llama.cpp/models/ggml-vocab-b.gguf": b"no",
    })
    files = corpus._extract(_fake(wanted), archive, tmp_path / "out")
    assert files == {k: hashlib.sha256(v).hexdigest() for k, v in wanted.items()}
    assert sorted(p.relative_to(tmp_path / "out").as_posix()
                  for p in (tmp_path / "out").rglob("*") if p.is_file()) == sorted(wanted)


def test_a_link_named_like_a_corpus_file_is_refused(tmp_path):
    """A symlink (or any non-regular member) under a corpus name is a HubError, not a link
    written into the cache."""
    archive = _archive(tmp_path / "a.tar.gz", {}, links=(ROOT + "models/ggml-vocab-a.gguf",))
    with pytest.raises(HubError, match="not a regular file"):
        corpus._extract(_fake({}), archive, tmp_path / "out")


def test_an_oversized_member_is_refused_before_it_is_written(tmp_path, monkeypatch):
    """A member larger than the bound is refused from its header, before a byte is written."""
    monkeypatch.setattr(corpus, "MAX_MEMBER_BYTES", 4)
    archive = _archive(tmp_path / "a.tar.gz", {ROOT + "models/ggml-vocab-a.gguf": b"12345"})
    with pytest.raises(HubError, match="5 bytes"):
        corpus._extract(_fake({}), archive, tmp_path / "out")
    assert not (tmp_path / "out" / "models" / "ggml-vocab-a.gguf").exists()


def test_a_damaged_archive_is_one_hub_error(tmp_path):
    """Bytes that are not a gzip tar give a HubError naming the file."""
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(HubError, match="bad.tar.gz"):
        corpus._extract(_fake({}), bad, tmp_path / "out")


def _install(monkeypatch, tmp_path, files: dict[str, bytes]) -> Path:
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path / "home"))
    fake = _fake(files)
    monkeypatch.setitem(corpus.CORPORA, "fake", fake)
    folder = corpus.corpus_dir("fake")
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    digests = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    (folder / corpus.MANIFEST).write_bytes(corpus._manifest_bytes(digests))
    return folder


def test_a_cached_corpus_is_checked_file_by_file(monkeypatch, tmp_path):
    """A cached corpus whose files match the pinned manifest is handed out; one changed byte
    in one file and the whole folder is removed and reported missing, never used."""
    files = {"models/ggml-vocab-a.gguf": b"vocab", "models/templates/x.jinja": b"{{ 1 }}"}
    folder = _install(monkeypatch, tmp_path, files)
    assert corpus.cached("fake") == folder / "models"
    (folder / "models" / "templates" / "x.jinja").write_bytes(b"{{ 2 }}")
    assert corpus.cached("fake") is None
    assert not folder.exists()
    with pytest.raises(NotCachedError, match="onebit pull fake"):
        corpus.models_dir("fake")


def test_a_manifest_not_pinned_is_not_trusted(monkeypatch, tmp_path):
    """A manifest rewritten to match changed files fails its own pinned sha256."""
    files = {"models/ggml-vocab-a.gguf": b"vocab"}
    folder = _install(monkeypatch, tmp_path, files)
    (folder / "models" / "ggml-vocab-a.gguf").write_bytes(b"evil")
    (folder / corpus.MANIFEST).write_text(json.dumps(
        {"models/ggml-vocab-a.gguf": hashlib.sha256(b"evil").hexdigest()}))
    assert corpus.cached("fake") is None


def test_the_real_corpus_holds_what_the_tests_read(llama_cpp_models):
    """The pinned llama.cpp corpus has the nineteen vocabularies and the real templates."""
    vocabs = sorted(p.name for p in llama_cpp_models.glob("ggml-vocab-*.gguf"))
    assert len(vocabs) == 19 and "ggml-vocab-llama-spm.gguf" in vocabs
    assert len(list((llama_cpp_models / "templates").glob("*.jinja"))) == 71
