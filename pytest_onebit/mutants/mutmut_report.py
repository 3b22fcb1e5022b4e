"""mutmut's verdicts in the catalogue's table format, and a gate on the number of survivors.

`mutmut run` exits 0 even when mutants survive, so CI cannot rely on it. After a run,
`mutmut export-cicd-stats` writes `mutants/mutmut-cicd-stats.json` (the totals) and
`mutmut results --all true` lists every mutant's status; this module reads both, groups the
mutants by the function they live in, and fails when more survive than allowed.

Mutants that are equivalent (no test can tell them from the original) are not generated at
all: their line carries `# pragma: no mutate` with the reason after it, and the report lists
those lines so a reviewer sees every exemption.
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from onebit.report import Document, Rendered, Table, cols

STATS_FILE = Path("mutants") / "mutmut-cicd-stats.json"
_LINE = re.compile(r"^\s+(\S+): (\S[^\n]*)$")
_PRAGMA = re.compile(r"#\s*pragma:\s*no mutate\b\s*[-:]?\s*(.*)$")


class MutmutReportError(RuntimeError):
    """mutmut has no results to report (run `mutmut run` first) or its output is unreadable."""


@dataclass(frozen=True)
class Exemption:
    """A line mutmut is told not to mutate, and why."""

    where: str  # path:line
    reason: str


@dataclass
class MutmutReport(Rendered):
    statuses: dict[str, str]  # mutant key -> killed / survived / timeout / ...
    totals: dict[str, int]
    exemptions: list[Exemption] = field(default_factory=list)
    max_survivors: int = 0

    @property
    def survivors(self) -> list[str]:
        return [k for k, v in self.statuses.items() if v == "survived"]

    @property
    def unchecked(self) -> list[str]:
        """Mutants the last run did not get to (it was stopped, or is still going)."""
        return [k for k, v in self.statuses.items() if v == "not checked"]

    @property
    def ok(self) -> bool:
        unexplained = [k for k, v in self.statuses.items()
                       if v in ("survived", "no tests", "suspicious")]
        return not self.unchecked and len(unexplained) <= self.max_survivors

    def rows(self) -> list[tuple[str, str, str]]:
        """(function, counts by verdict, verdict) per function that has mutants."""
        by_function: dict[str, Counter] = {}
        for key, status in self.statuses.items():
            by_function.setdefault(function_of(key), Counter())[status] += 1
        out = []
        for function, counts in sorted(by_function.items()):
            cells = " ".join(f"{status}:{n}" for status, n in sorted(counts.items()))
            verdict = ("survivors" if counts.get("survived") else
                       "unfinished" if counts.get("not checked") else "all caught")
            out.append((function, cells, verdict))
        return out

    def closing_line(self) -> str:
        counts = Counter(self.statuses.values())
        parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        if self.unchecked:
            return (f"{len(self.statuses)} mutmut mutants: {parts}; the run did not finish "
                    f"({len(self.unchecked)} not checked): no verdict")
        gate = "within" if self.ok else "OVER"
        return (f"{len(self.statuses)} mutmut mutants: {parts}; {len(self.exemptions)} lines "
                f"exempt as equivalent; {len(self.survivors)} survivors, {gate} the limit of "
                f"{self.max_survivors}")

    def document(self) -> Document:
        blocks: list = [Table(cols("function", "mutants by verdict", "verdict",
                                   code=("function",)), self.rows())]
        if self.survivors:
            blocks.append("survivors:\n" + "\n".join(f"  {k}" for k in self.survivors))
        if self.exemptions:
            blocks.append(Table(cols("exempt line", "why it is equivalent",
                                     code=("exempt line",)),
                                [(e.where, e.reason) for e in self.exemptions]))
        data = {
            "ok": self.ok, "max_survivors": self.max_survivors, "totals": self.totals,
            "survivors": self.survivors, "statuses": self.statuses,
            "exemptions": [asdict(e) for e in self.exemptions],
        }
        return Document("mutmut", blocks, self.closing_line(), data)


def function_of(key: str) -> str:
    """`onebit.loop.xǁ_Decodeǁpropose__mutmut_17` -> `onebit.loop._Decode.propose`."""
    name = key.split("__mutmut_")[0]
    module, _, mangled = name.rpartition(".")
    mangled = mangled[2:] if mangled.startswith("x_") else mangled.removeprefix("x")
    return f"{module}.{mangled.strip('ǁ').replace('ǁ', '.')}"


def parse_results(text: str) -> dict[str, str]:
    """`mutmut results --all true` output -> {mutant key: status}."""
    statuses = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            statuses[match.group(1)] = match.group(2).strip()
    return statuses


def find_exemptions(root: Path, paths: list[str]) -> list[Exemption]:
    """Every `# pragma: no mutate` line under `paths`, with the reason written after it."""
    found = []
    for rel in paths:
        for path in sorted((root / rel).rglob("*.py")) if (root / rel).is_dir() else [root / rel]:
            for number, line in enumerate(path.read_text().splitlines(), 1):
                match = _PRAGMA.search(line)
                if match:
                    found.append(Exemption(f"{path.relative_to(root)}:{number}",
                                           match.group(1).strip() or "(no reason given)"))
    return found


def _mutmut(root: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=root, text=True,
                          capture_output=True)
    if done.returncode != 0:
        # mutmut answers a missing run with a traceback: its last line is the reason
        lines = [x for x in (done.stderr or done.stdout).strip().splitlines() if x.strip()]
        reason = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise MutmutReportError(f"mutmut {' '.join(args)} failed ({reason}); run `mutmut run` "
                                f"in {root} first")
    return done.stdout


def selected(statuses: dict[str, str], only: Sequence[str]) -> dict[str, str]:
    """The mutants whose key matches one of the `only` globs (the names `mutmut run` takes,
    e.g. `onebit.loop.x__settled*`); all of them when `only` is empty."""
    if not only:
        return statuses
    return {k: v for k, v in statuses.items() if any(fnmatch.fnmatchcase(k, p) for p in only)}


def read_report(root: Path, *, max_survivors: int = 0, sources: tuple[str, ...] = ("onebit",),
                only: Sequence[str] = ()) -> MutmutReport:
    """Read the last `mutmut run` in `root` (export its stats, list its results), keeping the
    mutants `only` selects (a run given the same names leaves the others unchecked)."""
    _mutmut(root, "export-cicd-stats")
    stats_path = root / STATS_FILE
    if not stats_path.exists():
        raise MutmutReportError(f"no {STATS_FILE}: run `mutmut run` in {root} first")
    totals = json.loads(stats_path.read_text())
    statuses = parse_results(_mutmut(root, "results", "--all", "true"))
    if not statuses:
        raise MutmutReportError("mutmut lists no mutants: run `mutmut run` first")
    statuses = selected(statuses, only)
    if not statuses:
        raise MutmutReportError(f"no mutant matches --only {' '.join(only)}")
    return MutmutReport(statuses, totals, find_exemptions(root, list(sources)), max_survivors)
