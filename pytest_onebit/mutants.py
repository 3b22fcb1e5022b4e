"""The hand-written mutant catalogue (`mutants/NN-name.diff`) and its runner.

Each catalogue file is a unified diff against the project's source with a header of `# `
comment lines naming what it breaks:

    # mutant: the one-pass round commits `take` rows instead of `take + 1`
    # breaks: I2 I3 I5
    # why: t1 rides in the batch as row 0 but is not a draft, so ...
    #   (a line starting with `#` and more indentation continues the field above)
    --- a/onebit/loop.py
    +++ b/onebit/loop.py
    @@ ...

`run_catalogue()` applies each mutant to a scratch copy of the project (never the working tree),
runs the conformance suite there with the copy first on the import path, reads the JUnit XML
to count failing tests per named check, and says whether a check of an invariant the header
names caught it. The unmutated copy is run too: if it does not pass, the report is invalid.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pytest_onebit.contract import CHECKS
from pytest_onebit.suite import check_from_test_name

#: What is copied into each scratch directory (missing entries are skipped).
COPIED = ("onebit", "pytest_onebit", "tests", "pyproject.toml")
#: The invariants a header may name.
INVARIANTS = tuple(f"I{i}" for i in range(1, 13))
REQUIRED_FIELDS = ("mutant", "breaks", "why")

KILLED = "killed"
OFF_TARGET = "killed (off-target)"
SURVIVED = "survived"
ERROR = "error"

DEFAULT_TIMEOUT_S = 300.0
_NAME = re.compile(r"^(\d{2,})-[a-z0-9][a-z0-9-]*$")
_FIELD = re.compile(r"^# ([a-z]+):\s*(.*)$")
_CONTINUATION = re.compile(r"^#\s{2,}(\S.*)$")
_IGNORED = ("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache", ".ruff_cache")


class CatalogueError(ValueError):
    """A catalogue file is malformed (bad name, header or diff)."""


class ShadowError(RuntimeError):
    """The scratch copy would not be the code under test (the working tree would be imported)."""


# ---------------------------------------------------------------------------------------------
# The catalogue


@dataclass(frozen=True)
class Mutant:
    """One catalogue entry: a diff and what it claims to break."""

    name: str  # the file name without .diff: "01-commit-take-rows"
    path: Path
    description: str
    breaks: tuple[str, ...]  # invariants: ("I2", "I3", "I5")
    why: str
    diff: str  # the unified diff, header stripped
    files: tuple[str, ...]  # the paths the diff changes, relative to the project root

    @property
    def number(self) -> str:
        return self.name.split("-", 1)[0]


def parse_mutant(path: Path) -> Mutant:
    """Read one catalogue file; raise `CatalogueError` naming the file and the problem."""
    path = Path(path)
    where = path.name

    def bad(message: str) -> CatalogueError:
        return CatalogueError(f"{where}: {message}")

    if path.suffix != ".diff":
        raise bad("a catalogue file must end in .diff")
    name = path.stem
    if not _NAME.match(name):
        raise bad("the name must look like NN-short-name (digits, a dash, lowercase words)")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    fields: dict[str, str] = {}
    last: str | None = None
    body_start = None
    for i, raw in enumerate(lines):
        line = raw.rstrip("\n")
        if not line.startswith("#"):
            body_start = i
            break
        if m := _FIELD.match(line):
            key, value = m.group(1), m.group(2).strip()
            if key in fields:
                raise bad(f"header field {key!r} appears twice")
            fields[key] = value
            last = key
        elif (m := _CONTINUATION.match(line)) and last is not None:
            fields[last] = f"{fields[last]} {m.group(1).strip()}"
        elif line.strip() == "#":
            continue
        else:
            raise bad(f"line {i + 1} is not a `# key: value` header line: {line!r}")
    missing = [f for f in REQUIRED_FIELDS if not fields.get(f)]
    if missing:
        raise bad(f"the header lacks {', '.join(f'`# {m}:`' for m in missing)}")
    unknown = sorted(set(fields) - set(REQUIRED_FIELDS))
    if unknown:
        raise bad(f"unknown header field(s) {unknown}; known: {list(REQUIRED_FIELDS)}")
    breaks = tuple(fields["breaks"].replace(",", " ").split())
    wrong = [b for b in breaks if b not in INVARIANTS]
    if wrong:
        raise bad(f"`# breaks:` names {wrong}; invariants are I1..I12")
    if len(set(breaks)) != len(breaks):
        raise bad("`# breaks:` names an invariant twice")
    if body_start is None:
        raise bad("there is no diff after the header")
    diff = "".join(lines[body_start:])
    files = _diff_files(diff, bad)
    return Mutant(name, path, fields["mutant"], breaks, fields["why"], diff, files)


def _diff_files(diff: str, bad: Callable[[str], CatalogueError]) -> tuple[str, ...]:
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
            if Path(rel).is_absolute() or ".." in parts or not parts or parts[0] not in COPIED:
                raise bad(f"the diff changes {rel!r}; a mutant may change only {COPIED}")
            files.append(rel)
        elif line.startswith("@@ "):
            hunks += 1
    if not files or not hunks:
        raise bad("the body is not a unified diff (no ---/+++ file header or no @@ hunk)")
    return tuple(files)


def load_catalogue(folder: str | os.PathLike[str]) -> list[Mutant]:
    """Every `*.diff` of `folder`, in name order. A malformed file raises `CatalogueError`;
    so does an empty catalogue, or two mutants with the same number."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CatalogueError(f"no catalogue folder at {folder}")
    mutants = [parse_mutant(p) for p in sorted(folder.glob("*.diff"))]
    if not mutants:
        raise CatalogueError(f"{folder} holds no *.diff mutants")
    numbers = [m.number for m in mutants]
    dupes = sorted({n for n in numbers if numbers.count(n) > 1})
    if dupes:
        raise CatalogueError(f"mutant numbers used twice in {folder}: {dupes}")
    return mutants


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


# ---------------------------------------------------------------------------------------------
# One run of the suite in a scratch copy


@dataclass
class SuiteRun:
    """What one pytest run in a scratch copy gave."""

    exit_code: int | None  # None: it did not run (or timed out)
    tests: int = 0
    failed: int = 0
    skipped: int = 0
    failing_checks: dict[str, int] = field(default_factory=dict)  # check (or "other") -> tests
    seconds: float = 0.0
    detail: str = ""  # why it is an error, or a tail of pytest's output


def make_scratch(project_root: Path, into: Path) -> Path:
    """Copy what the suite needs from `project_root` into `into` (which must not exist)."""
    into.mkdir(parents=True)
    for name in COPIED:
        src = project_root / name
        if src.is_dir():
            shutil.copytree(src, into / name, ignore=shutil.ignore_patterns(*_IGNORED))
        elif src.is_file():
            shutil.copy2(src, into / name)
    return into


def scratch_env(scratch: Path) -> dict[str, str]:
    """The environment a suite runs in: the scratch copy first on the import path, and none of
    the outer pytest's (or xdist's) variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "COV_CORE_")) and k != "PYTHONSTARTUP"}
    outer = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(scratch) + (os.pathsep + outer if outer else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # git apply must not find a repository above the scratch directory
    env["GIT_CEILING_DIRECTORIES"] = str(scratch.parent)
    return env


def check_shadowing(scratch: Path, python: str = sys.executable) -> dict[str, str]:
    """Import the packages in the scratch environment and make sure they come from the scratch
    copy, not from the working tree (an editable install). Raises `ShadowError` if not."""
    code = ("import json, onebit, onebit.loop, pytest_onebit, pytest_onebit.plugin; "
            "print(json.dumps({m.__name__: m.__file__ for m in "
            "(onebit, onebit.loop, pytest_onebit, pytest_onebit.plugin)}))")
    proc = subprocess.run([python, "-c", code], cwd=scratch, env=scratch_env(scratch),
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise ShadowError(f"cannot import onebit in the scratch copy {scratch}:\n{proc.stderr}")
    files = json.loads(proc.stdout.strip().splitlines()[-1])
    root = scratch.resolve()
    outside = {m: f for m, f in files.items() if root not in Path(f).resolve().parents}
    if outside:
        raise ShadowError(
            f"the scratch copy does not shadow the installed package: {outside} are imported "
            f"from outside {root}; mutants would run against the working tree"
        )
    return files


def apply_diff(scratch: Path, diff: str) -> str | None:
    """`git apply` the diff in `scratch`; None when it applied, else git's complaint."""
    patch = scratch.parent / "mutant.patch"
    patch.write_text(diff, encoding="utf-8")
    try:
        proc = subprocess.run(["git", "apply", "--whitespace=nowarn", str(patch)], cwd=scratch,
                              env=scratch_env(scratch), capture_output=True, text=True)
    except FileNotFoundError:
        return "git is not installed (the runner applies mutants with `git apply`)"
    if proc.returncode != 0:
        return (proc.stderr or proc.stdout).strip() or f"git apply exited {proc.returncode}"
    return None


def parse_junit(path: Path) -> tuple[int, int, int, dict[str, int]]:
    """(tests, failed, skipped, failing tests per check) from a JUnit XML report. A failing
    test that is not a conformance check counts under "other"."""
    root = ET.parse(path).getroot()
    tests = failed = skipped = 0
    per_check: dict[str, int] = {}
    for case in root.iter("testcase"):
        tests += 1
        if case.find("skipped") is not None:
            skipped += 1
            continue
        if case.find("failure") is None and case.find("error") is None:
            continue
        failed += 1
        check = check_from_test_name(case.get("name", "")) or "other"
        per_check[check] = per_check.get(check, 0) + 1
    return tests, failed, skipped, per_check


def run_suite(
    scratch: Path,
    test_paths: Sequence[str],
    *,
    python: str = sys.executable,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> SuiteRun:
    """Run pytest on `test_paths` inside `scratch` and read its JUnit XML."""
    xml = scratch.parent / "junit.xml"
    # --tb=line: the JUnit XML keeps each failure's message, and a mutant that fails hundreds
    # of tests spends a second less formatting tracebacks nobody reads. The quick Hypothesis
    # profile: the named checks kill the catalogue; the property only needs to run, not to
    # search 2000 examples per mutant.
    cmd = [python, "-m", "pytest", *test_paths, "-q", "-p", "no:cacheprovider",
           "-m", "not device", "--tb=line", f"--junitxml={xml}",
           "--hypothesis-profile=onebit-quick"]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=scratch, env=scratch_env(scratch), capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return SuiteRun(None, seconds=time.perf_counter() - start,
                        detail=f"the suite did not finish in {timeout_s:.0f} s (a hang?)")
    seconds = time.perf_counter() - start
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    if proc.returncode not in (0, 1) or not xml.is_file():
        return SuiteRun(proc.returncode, seconds=seconds,
                        detail=f"pytest exited {proc.returncode} (not a test failure):\n{tail}")
    tests, failed, skipped, per_check = parse_junit(xml)
    if proc.returncode == 1 and not failed:
        return SuiteRun(proc.returncode, tests, seconds=seconds,
                        detail=f"pytest exited 1 but the JUnit XML shows no failure:\n{tail}")
    return SuiteRun(proc.returncode, tests, failed, skipped, per_check, seconds, tail)


# ---------------------------------------------------------------------------------------------
# Verdicts and the report


def _check_order(name: str) -> tuple[int, str]:
    names = list(CHECKS)
    return (names.index(name), name) if name in names else (len(names), name)


@dataclass
class MutantResult:
    mutant: Mutant
    verdict: str
    run: SuiteRun

    @property
    def failing_checks(self) -> dict[str, int]:
        return dict(sorted(self.run.failing_checks.items(), key=lambda kv: _check_order(kv[0])))

    @property
    def on_target(self) -> list[str]:
        """The failing checks of an invariant the header names."""
        return [c for c in self.failing_checks
                if c in CHECKS and CHECKS[c].invariant in self.mutant.breaks]

    def checks_text(self) -> str:
        if self.verdict == ERROR:
            return self.run.detail.splitlines()[0] if self.run.detail else "error"
        return " ".join(f"{c}:{n}" for c, n in self.failing_checks.items()) or "-"

    def to_dict(self) -> dict:
        return {
            "name": self.mutant.name,
            "file": str(self.mutant.path),
            "description": self.mutant.description,
            "breaks": list(self.mutant.breaks),
            "why": self.mutant.why,
            "verdict": self.verdict,
            "failing_checks": self.failing_checks,
            "failed_tests": self.run.failed,
            "tests": self.run.tests,
            "seconds": round(self.run.seconds, 2),
            "detail": self.run.detail if self.verdict == ERROR else "",
        }


def verdict_of(mutant: Mutant, run: SuiteRun) -> str:
    """killed: a check of a named invariant failed; off-target: only other checks failed;
    survived: the suite passed; error: the suite could not say."""
    if run.exit_code not in (0, 1) or (run.exit_code == 1 and not run.failed):
        return ERROR
    if not run.failed:
        return SURVIVED
    hit = any(c in CHECKS and CHECKS[c].invariant in mutant.breaks for c in run.failing_checks)
    return KILLED if hit else OFF_TARGET


@dataclass
class CatalogueReport:
    """The catalogue's verdicts. `ok` only if the unmutated suite passed and every mutant was
    killed by a check of an invariant its header names."""

    results: list[MutantResult]
    baseline: SuiteRun
    seconds: float
    jobs: int
    test_paths: tuple[str, ...] = ("tests/toy_base",)
    imported_from: dict[str, str] = field(default_factory=dict)

    @property
    def baseline_ok(self) -> bool:
        return self.baseline.exit_code == 0 and self.baseline.tests > 0

    def count(self, verdict: str) -> int:
        return sum(r.verdict == verdict for r in self.results)

    @property
    def ok(self) -> bool:
        return self.baseline_ok and all(r.verdict == KILLED for r in self.results)

    def summary(self) -> str:
        parts = [f"{self.count(KILLED)} killed"]
        if self.count(OFF_TARGET):
            parts.append(f"{self.count(OFF_TARGET)} off-target")
        parts += [f"{self.count(SURVIVED)} survived", f"{self.count(ERROR)} errors"]
        line = f"{len(self.results)} mutants: {', '.join(parts)} in {self.seconds:.1f} s"
        if not self.baseline_ok:
            line += " -- INVALID: the unmutated suite does not pass"
        return line

    def baseline_line(self) -> str:
        b = self.baseline
        if self.baseline_ok:
            return (f"baseline (unmutated copy): {b.tests - b.skipped} passed, {b.skipped} "
                    f"skipped in {b.seconds:.1f} s")
        first = b.detail.splitlines()[0] if b.detail else ""
        return (f"baseline (unmutated copy): FAILED, {b.failed} of {b.tests} tests failed "
                f"(exit {b.exit_code}) {first}").rstrip()

    def _rows(self) -> list[tuple[str, str, str, str, str]]:
        return [(r.mutant.name, " ".join(r.mutant.breaks), r.checks_text(),
                 f"{r.run.failed}/{r.run.tests}" if r.verdict != ERROR else "-", r.verdict)
                for r in self.results]

    HEADER = ("mutant", "breaks", "failing checks", "failed", "verdict")

    def to_text(self) -> str:
        rows = [self.HEADER, *self._rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self.HEADER))]
        lines = []
        for n, row in enumerate(rows):
            cells = (cell.ljust(w) for cell, w in zip(row, widths, strict=True))
            lines.append("  ".join(cells).rstrip())
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join([self.baseline_line(), "", *lines, "", self.summary()])

    __str__ = to_text

    def to_markdown(self) -> str:
        def cell(text: str) -> str:
            return text.replace("|", "\\|")

        lines = ["| " + " | ".join(self.HEADER) + " |",
                 "|" + "|".join("---" for _ in self.HEADER) + "|"]
        for name, breaks, checks, failed, verdict in self._rows():
            lines.append(f"| `{name}` | {breaks} | {cell(checks)} | {failed} | "
                         f"{'**' + verdict + '**' if verdict != KILLED else verdict} |")
        return "\n".join([*lines, "", f"{self.baseline_line()}  ", self.summary()])

    def to_json(self, indent: int | None = 2) -> str:
        b = self.baseline
        return json.dumps({
            "ok": self.ok,
            "summary": self.summary(),
            "seconds": round(self.seconds, 2),
            "jobs": self.jobs,
            "test_paths": list(self.test_paths),
            "baseline": {"ok": self.baseline_ok, "exit_code": b.exit_code, "tests": b.tests,
                         "failed": b.failed, "skipped": b.skipped,
                         "seconds": round(b.seconds, 2),
                         "detail": "" if self.baseline_ok else b.detail},
            "counts": {v: self.count(v) for v in (KILLED, OFF_TARGET, SURVIVED, ERROR)},
            "mutants": [r.to_dict() for r in self.results],
        }, indent=indent)


# ---------------------------------------------------------------------------------------------
# The runner


def run_mutant(
    project_root: str | os.PathLike[str],
    mutant: Mutant | None,
    *,
    test_paths: Sequence[str] = ("tests/toy_base",),
    python: str = sys.executable,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    verify_shadowing: bool = False,
) -> tuple[SuiteRun, dict[str, str]]:
    """Apply `mutant` (None: the unmutated baseline) to a fresh scratch copy of the project and
    run the suite there. The scratch copy is removed afterwards; the working tree is only read.
    Returns the run and, with `verify_shadowing`, where the packages were imported from."""
    root = Path(project_root).resolve()
    label = mutant.number if mutant else "baseline"
    with tempfile.TemporaryDirectory(prefix=f"onebit-mutant-{label}-") as tmp:
        scratch = make_scratch(root, Path(tmp) / "project")
        imported = check_shadowing(scratch, python) if verify_shadowing else {}
        if mutant is not None:
            complaint = apply_diff(scratch, mutant.diff)
            if complaint is not None:
                return SuiteRun(None, detail=f"the diff no longer applies: {complaint}"), imported
        return run_suite(scratch, test_paths, python=python, timeout_s=timeout_s), imported


def run_catalogue(
    project_root: str | os.PathLike[str],
    folder: str | os.PathLike[str] | None = None,
    *,
    jobs: int = 2,
    test_paths: Sequence[str] = ("tests/toy_base",),
    only: Iterable[str] | None = None,
    mutants: Sequence[Mutant] | None = None,
    python: str = sys.executable,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CatalogueReport:
    """Run every mutant of the catalogue (default `<project_root>/mutants`) against the suite
    in `test_paths`, `jobs` at a time, next to one run of the unmutated copy.

    Raises `CatalogueError` for a malformed catalogue and `ShadowError` if a scratch copy would
    not shadow the installed package."""
    root = Path(project_root).resolve()
    if not (root / "onebit").is_dir():
        raise FileNotFoundError(f"{root} is not the onebit project (no onebit/ there)")
    if mutants is None:
        mutants = load_catalogue(folder if folder is not None else root / "mutants")
    if only:
        mutants = select(mutants, only)
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    start = time.perf_counter()
    paths = tuple(test_paths)

    def one(mutant: Mutant | None, verify: bool = False) -> tuple[SuiteRun, dict[str, str]]:
        return run_mutant(root, mutant, test_paths=paths, python=python, timeout_s=timeout_s,
                          verify_shadowing=verify)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        # The baseline also proves (once) that a scratch copy shadows the installed package;
        # a ShadowError from it is raised here, before any verdict is trusted.
        baseline_future = pool.submit(one, None, True)
        futures = [pool.submit(one, m) for m in mutants]
        try:
            baseline, imported = baseline_future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        results = []
        for mutant, future in zip(mutants, futures, strict=True):
            run, _ = future.result()
            results.append(MutantResult(mutant, verdict_of(mutant, run), run))
    return CatalogueReport(results, baseline, time.perf_counter() - start, jobs, paths, imported)
