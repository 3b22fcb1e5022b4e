"""Verdicts on mutants, and the catalogue's report.

killed: a check the header names failed; killed (off-target): only other tests failed (the
header is wrong, or the check is weak); survived: the suite passed; error: the suite could
not say (the diff no longer applies, pytest crashed or hung). Only *killed* is success.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onebit.report import Document, Rendered, Table, cols
from pytest_onebit.mutants.catalogue import Mutant
from pytest_onebit.mutants.suite_run import SuiteRun, check_id

KILLED = "killed"
OFF_TARGET = "killed (off-target)"
SURVIVED = "survived"
ERROR = "error"
VERDICTS = (KILLED, OFF_TARGET, SURVIVED, ERROR)
#: What the table's counts mean when a mutant's run stopped early (a mutant no named check
#: kills always runs the whole suite, so off-target and survived are exact in every mode).
STOP_NOTES = {
    "first-kill": "each mutant's run stopped at the first failing test of a check its header "
                  "names (the named checks ran first): `failing checks` shows that check, "
                  "`failed` counts the tests run; `onebit mutants` credits every check",
    "named": "each mutant's run stopped once every test of the checks its header names had "
             "run (those ran first): `failing checks` credits the named checks in full",
}


def verdict_of(mutant: Mutant, run: SuiteRun) -> str:
    """The verdict on `mutant` from the suite run it got."""
    if not run.judged:
        return ERROR
    if not run.failed:
        return SURVIVED
    hit = any(check_id(c) in mutant.breaks for c in run.failing_checks)
    return KILLED if hit else OFF_TARGET


@dataclass
class MutantResult:
    mutant: Mutant
    verdict: str
    run: SuiteRun

    def checks_text(self) -> str:
        if self.verdict == ERROR:
            return self.run.detail.splitlines()[0] if self.run.detail else "error"
        return " ".join(f"{c}:{n}" for c, n in self.run.failing_checks.items()) or "-"

    def to_dict(self) -> dict:
        return {
            "name": self.mutant.name,
            "file": str(self.mutant.path),
            "description": self.mutant.description,
            "breaks": list(self.mutant.breaks),
            "why": self.mutant.why,
            "verdict": self.verdict,
            "failing_checks": self.run.failing_checks,
            "failed_tests": self.run.failed,
            "tests": self.run.tests,
            "seconds": round(self.run.seconds, 2),
            "detail": self.run.detail if self.verdict == ERROR else "",
        }


@dataclass
class CatalogueReport(Rendered):
    """One catalogue's verdicts. `ok` only if the unmutated suite passed and every mutant was
    killed by a check its header names."""

    results: list[MutantResult]
    baseline: SuiteRun
    seconds: float
    jobs: int
    test_paths: tuple[str, ...] = ("tests",)
    imported_from: dict[str, str] = field(default_factory=dict)
    name: str = "mutants"
    description: str = ""
    stop: str = "never"  # how far each mutant's run went (suite_run.STOP_MODES)

    @property
    def baseline_ok(self) -> bool:
        """The unmutated copy passed at least one test, and, when the baseline was limited to
        the tests that failed under a mutant, every one of them ran (a test that killed a
        mutant but is not there unmutated proves nothing)."""
        b = self.baseline
        return b.exit_code == 0 and b.tests > 0 and (b.only is None or b.tests == len(b.only))

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
        which = ("" if b.only is None else
                 f"the {len(b.only)} tests that failed under a mutant, ")
        if self.baseline_ok:
            return (f"baseline (unmutated copy): {which}{b.tests - b.skipped} passed, "
                    f"{b.skipped} skipped in {b.seconds:.1f} s")
        if b.exit_code == 0 and b.only is not None:
            return (f"baseline (unmutated copy): FAILED, {which}but only {b.tests} of them "
                    "ran unmutated")
        first = b.detail.splitlines()[0] if b.detail else ""
        return (f"baseline (unmutated copy): {which}FAILED, {b.failed} of {b.tests} tests "
                f"failed (exit {b.exit_code}) {first}").rstrip()

    def document(self) -> Document:
        table = Table(cols("mutant", "breaks", "failing checks", "failed", "verdict",
                           numeric=("failed",), code=("mutant",)),
                      [(r.mutant.name, " ".join(r.mutant.breaks), r.checks_text(),
                        f"{r.run.failed}/{r.run.tests}" if r.verdict != ERROR else "-",
                        r.verdict) for r in self.results])
        title = f"mutant catalogue `{self.name}`"
        if self.description:
            title += f": {self.description}"
        b = self.baseline
        data = {
            "catalogue": self.name, "ok": self.ok, "summary": self.summary(),
            "seconds": round(self.seconds, 2), "jobs": self.jobs, "stop": self.stop,
            "test_paths": list(self.test_paths),
            "baseline": {"ok": self.baseline_ok, "exit_code": b.exit_code, "tests": b.tests,
                         "failed": b.failed, "skipped": b.skipped,
                         "only": None if b.only is None else list(b.only),
                         "seconds": round(b.seconds, 2),
                         "detail": "" if self.baseline_ok else b.detail},
            "counts": {v: self.count(v) for v in VERDICTS},
            "mutants": [r.to_dict() for r in self.results],
        }
        blocks: list = [self.baseline_line(), table]
        if self.stop in STOP_NOTES:
            blocks.append(STOP_NOTES[self.stop])
        return Document(title, blocks, self.summary(), data)
