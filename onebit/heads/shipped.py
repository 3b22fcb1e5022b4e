"""The draft heads shipped inside the package, each pinned to the one base file it was trained
for.

A shipped head is a head directory (`onebit.heads.eagle`: config.json and model.safetensors,
float16) under `onebit/heads/shipped/`, made once by the command its entry names. Each is
pinned twice: to its base, by the sha256 of the base's file (a base that differs by one byte
never finds it, and loading it for one is refused by name: `DraftMismatchError`), and to
itself, by the sha256 of both of its files, checked before anything in them is read (a damaged
or replaced install is a `DraftFileError`, never a head that drafts something else).

`onebit generate` / `chat` / `serve` and `onebit.generate` find it through
`onebit.heads.registry.trained_head`: a head the user trained for the same file
(`onebit train-head`, under $ONEBIT_HOME/heads) comes first, the shipped one after.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from onebit.heads.eagle import CONFIG_FILE, WEIGHTS_FILE, file_sha256
from onebit.heads.errors import DraftFileError

#: where the shipped heads' directories are
ROOT = Path(__file__).resolve().parent / "shipped"


@dataclass(frozen=True)
class Shipped:
    """One shipped head: its directory under ROOT and its pins."""

    name: str
    base_file: str
    base_sha256: str
    config_sha256: str
    weights_sha256: str
    made_by: str  # the command that made it

    @property
    def path(self) -> Path:
        return ROOT / self.name

    def verified(self) -> Path:
        """Its directory, once both files' sha256 are the pinned ones (DraftFileError
        otherwise, naming the file)."""
        for file, want in ((CONFIG_FILE, self.config_sha256),
                           (WEIGHTS_FILE, self.weights_sha256)):
            path = self.path / file
            if not path.is_file():
                raise DraftFileError(f"{path}: missing: the shipped head {self.name} is not "
                                     f"installed whole (reinstall onebit)")
            got = _sha256_kept(path)
            if got != want:
                raise DraftFileError(f"{path}: sha256 {got[:16]}.. is not the pinned "
                                     f"{want[:16]}..: the shipped head {self.name} was changed "
                                     f"or damaged (reinstall onebit)")
        return self.path


SHIPPED: tuple[Shipped, ...] = (
    Shipped(
        name="smollm2-135m-instruct-q4_1",
        base_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        base_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        config_sha256="1ae208435dfb310048b72d8e01039d2b245d0098fecccc3dd1c9cac6cadd6529",
        weights_sha256="55097da805e0ec444c0b747607cc17d7f854ca9ad72ff17361a7f05c0fbf75f8",
        made_by="onebit train-head --prompts 912 --word-prompts 24000 --max-shards 91 "
                "--epochs 2 --float16 (docs/heads.md, \"The shipped head\")"),
)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


_KEPT: dict[tuple, str] = {}


def _sha256_kept(path: Path) -> str:
    """The file's sha256, remembered by (path, size, mtime): `auto` looks for the shipped
    head on every call, and hashing its 7 MB each time would cost milliseconds."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    got = _KEPT.get(key)
    if got is None:
        got = _KEPT[key] = _sha256(path)
    return got


def shipped_for(base_path: str | Path) -> Path | None:
    """The verified directory of the shipped head made for the base file at `base_path`, or
    None when no shipped head was made for a file with its sha256."""
    sha = file_sha256(base_path)
    for entry in SHIPPED:
        if entry.base_sha256 == sha:
            return entry.verified()
    return None
