"""A mutant catalogue: a folder of `NN-name.diff` files and the `catalogue.toml` that says how
to judge them.

Each catalogue file is a unified diff against the project's source with a header of `# `
comment lines naming what it breaks:

    # mutant: the one-pass round commits `take` rows instead of `take + 1`
    # breaks: I2 I3 I5
    # why: t1 rides in the batch as row 0 but is not a draft, so ...
    #   (a line starting with `#` and more indentation continues the field above)
    --- a/onebit/loop.py
    +++ b/onebit/loop.py
    @@ ...

`# breaks:` names check ids (a capital prefix and a number: I7, B3, S1). A failing test belongs
to the check its function name starts with (`test_I7_pass_law` -> I7), which is how a project
that is not onebit names its own checks for its own catalogue.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CONFIG_FILE = "catalogue.toml"
REQUIRED_FIELDS = ("mutant", "breaks", "why")
CHECK_ID = re.compile(r"^[A-Z]+[0-9]+$")
#: Top-level entries never copied by default (version control, environments, build output).
NOT_COPIED = (".git", ".hg", ".venv", "venv", "build", "dist", "node_modules", "__pycache__")

_NAME = re.compile(r"^(\d{2,})-[a-z0-9][a-z0-9-]*$")
_FIELD = re.compile(r"^# ([a-z]+):\s*(.*)$")
_CONTINUATION = re.compile(r"^#\s{2,}(\S.*)$")


class CatalogueError(ValueError):
    """A catalogue is malformed: a bad name, header, diff or catalogue.toml."""


@dataclass(frozen=True)
class CatalogueConfig:
    """How a catalogue's mutants are judged (its `catalogue.toml`, `[catalogue]` table)."""

    name: str  # the folder's name: "loop", "forward"
    description: str = ""
    tests: tuple[str, ...] = ("tests",)  # pytest arguments run in the scratch copy
    copy: tuple[str, ...] | None = None  # top-level entries to copy; None: all but NOT_COPIED
    packages: tuple[str, ...] | None = None  # must import from the copy; None: its packages

    def copied(self, root: Path, catalogue_folder: Path | None = None) -> tuple[str, ...]:
        """The top-level entries of `root` a scratch copy holds."""
        if self.copy is not None:
            return self.copy
        skip = set(NOT_COPIED)
        if catalogue_folder is not None and root in catalogue_folder.resolve().parents:
            skip.add(catalogue_folder.resolve().relative_to(root).parts[0])
        return tuple(sorted(p.name for p in root.iterdir() if p.name not in skip
                            and not p.name.startswith(".") and not p.name.endswith(".egg-info")))


def read_config(folder: Path) -> CatalogueConfig:
    """The folder's catalogue.toml; defaults when there is none."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        return CatalogueConfig(folder.name)
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("catalogue", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise CatalogueError(f"{path}: {error}") from error

    def strings(key: str) -> tuple[str, ...] | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise CatalogueError(f"{path}: `{key}` must be a list of strings, got {value!r}")
        return tuple(value)

    unknown = sorted(set(table) - {"description", "tests", "copy", "packages"})
    if unknown:
        raise CatalogueError(f"{path}: unknown key(s) {unknown} in [catalogue]")
    return CatalogueConfig(folder.name, str(table.get("description", "")),
                           strings("tests") or ("tests",), strings("copy"), strings("packages"))


@dataclass(frozen=True)
class Mutant:
    """One catalogue entry: a diff and what it claims to break."""

    name: str  # the file name without .diff: "01-commit-take-rows"
    path: Path
    description: str
    breaks: tuple[str, ...]  # check ids: ("I2", "I3", "I5")
    why: str
    diff: str  # the unified diff, header stripped
    files: tuple[str, ...]  # the paths the diff changes, relative to the project root

    @property
    def number(self) -> str:
        return self.name.split("-", 1)[0]


def _read_header(lines: list[str], bad: Callable[[str], CatalogueError]) -> tuple[dict, int]:
    """The `# key: value` fields at the top, and the index of the first diff line."""
    fields: dict[str, str] = {}
    last: str | None = None
    for i, raw in enumerate(lines):
        line = raw.rstrip("\n")
        if not line.startswith("#"):
            return fields, i
        if m := _FIELD.match(line):
            key, value = m.group(1), m.group(2).strip()
            if key in fields:
                raise bad(f"header field {key!r} appears twice")
            fields[key] = value
            last = key
        elif (m := _CONTINUATION.match(line)) and last is not None:
            fields[last] = f"{fields[last]} {m.group(1).strip()}"
        elif line.strip() != "#":
            raise bad(f"line {i + 1} is not a `# key: value` header line: {line!r}")
    raise bad("there is no diff after the header")


def parse_mutant(path: Path, copied: Sequence[str] | None = None) -> Mutant:
    """Read one catalogue file; raise `CatalogueError` naming the file and the problem.
    `copied`: the top-level entries a diff may change (None: any)."""
    path = Path(path)

    def bad(message: str) -> CatalogueError:
        return CatalogueError(f"{path.name}: {message}")

    if path.suffix != ".diff":
        raise bad("a catalogue file must end in .diff")
    if not _NAME.match(path.stem):
        raise bad("the name must look like NN-short-name (digits, a dash, lowercase words)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    except UnicodeDecodeError as error:
        raise bad(f"not UTF-8 text: {error}") from error
    fields, body_start = _read_header(lines, bad)
    missing = [f for f in REQUIRED_FIELDS if not fields.get(f)]
    if missing:
        raise bad(f"the header lacks {', '.join(f'`# {m}:`' for m in missing)}")
    unknown = sorted(set(fields) - set(REQUIRED_FIELDS))
    if unknown:
        raise bad(f"unknown header field(s) {unknown}; known: {list(REQUIRED_FIELDS)}")
    breaks = tuple(fields["breaks"].replace(",", " ").split())
    wrong = [b for b in breaks if not CHECK_ID.match(b)]
    if wrong:
        raise bad(f"`# breaks:` names {wrong}; a check id is a capital prefix and a number "
                  "(I7, B3)")
    if len(set(breaks)) != len(breaks):
        raise bad("`# breaks:` names a check twice")
    diff = "".join(lines[body_start:])
    files = diff_files(diff, bad, copied)
    return Mutant(path.stem, path, fields["mutant"], breaks, fields["why"], diff, files)


def diff_files(diff: str, bad: Callable[[str], CatalogueError],
               copied: Sequence[str] | None = None) -> tuple[str, ...]:
    """The paths a unified diff changes; checks it is one (a/ b/ paths, hunks)."""
    files: list[str] = []
    lines = diff.splitlines()
    hunks = 0
    for i, line in enumerate(lines):
        if line.startswith("--- "):
            if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
                raise bad(f"diff line {i + 1}: `---` is not followed by `+++`")
            old = line[4:].split("\t", 1)[0].strip()
            new = lines[i + 1][4:].split("\t", 1)[0].strip()
            if not old.startswith("a/") or not new.startswith("b/") or old[2:] != new[2:]:
                raise bad(f"diff line {i + 1}: paths must be a/PATH and b/PATH, got {old} {new}")
            rel = old[2:]
            parts = Path(rel).parts
            outside = Path(rel).is_absolute() or ".." in parts or not parts
            if outside or (copied is not None and parts[0] not in copied):
                raise bad(f"the diff changes {rel!r}; a mutant may change only what the "
                          f"scratch copy holds: {list(copied or [])}")
            files.append(rel)
        elif line.startswith("@@ "):
            hunks += 1
    if not files or not hunks:
        raise bad("the body is not a unified diff (no ---/+++ file header or no @@ hunk)")
    return tuple(files)


@dataclass
class Catalogue:
    """A folder of mutants with its config."""

    folder: Path
    config: CatalogueConfig
    mutants: list[Mutant] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.config.name


def load_catalogue(folder: str | os.PathLike[str], root: Path | None = None) -> Catalogue:
    """Every `*.diff` of `folder` in name order, with its config. A malformed file raises
    `CatalogueError`; so does an empty catalogue, or two mutants with the same number."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CatalogueError(f"no catalogue folder at {folder}")
    config = read_config(folder)
    copied = config.copied(root, folder) if root is not None else config.copy
    mutants = [parse_mutant(p, copied) for p in sorted(folder.glob("*.diff"))]
    if not mutants:
        raise CatalogueError(f"{folder} holds no *.diff mutants")
    numbers = [m.number for m in mutants]
    dupes = sorted({n for n in numbers if numbers.count(n) > 1})
    if dupes:
        raise CatalogueError(f"mutant numbers used twice in {folder}: {dupes}")
    return Catalogue(folder, config, mutants)


def find_catalogues(folder: Path) -> list[Path]:
    """The catalogues under `folder`: the folder itself if it holds *.diff files, else each
    sub-folder with a catalogue.toml, in name order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CatalogueError(f"no catalogue folder at {folder}")
    if any(folder.glob("*.diff")):
        return [folder]
    found = sorted(p.parent for p in folder.glob(f"*/{CONFIG_FILE}"))
    if not found:
        raise CatalogueError(f"{folder} holds no *.diff mutants and no sub-folder with a "
                             f"{CONFIG_FILE}")
    return found


def select(mutants: Sequence[Mutant], only: Iterable[str]) -> list[Mutant]:
    """The mutants a list of `--only` names picks: a full name, a number (`03`), or a part of a
    name. A name that picks nothing raises `ValueError`."""
    chosen: list[Mutant] = []
    for want in only:
        hits = [m for m in mutants if want in (m.name, m.number)] or [
            m for m in mutants if want in m.name
        ]
        if not hits:
            raise ValueError(f"no mutant matches {want!r}; known: {[m.name for m in mutants]}")
        chosen.extend(m for m in hits if m not in chosen)
    return sorted(chosen, key=lambda m: m.name)
