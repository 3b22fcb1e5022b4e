"""`onebit prove --loop-lib`: the same report as `onebit prove` gives a Python loop (the
contract table, the cost of each arm, the closing line), on the float32-exact toy, followed by
check F1 (faults), which only a compiled loop has."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from onebit.report import Document
from pytest_onebit.contract.report import FAILED, PASSED, Finding
from pytest_onebit.loop.prove import ProveReport, prove
from pytest_onebit.native.faults import DOC, NAME, check_fault, fault_cases
from pytest_onebit.native.loop import DEFAULT_TIMEOUT, native_loop
from pytest_onebit.native.suite import abi_scenarios


@dataclass
class NativeProveReport(ProveReport):
    fault_cases: int = 0
    fault_failures: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return super().ok and not self.fault_failures

    def tally(self) -> tuple[int, int, int]:
        """The contract's counts and F1's: a loop that fails only the fault checks reads
        `N passed, M failed`, never `0 failed` beside a failing verdict."""
        passed, failed, expected = super().tally()
        faults = len(self.fault_failures)
        return passed + self.fault_cases - faults, failed + faults, expected

    def check_rows(self) -> list[tuple[str, int, int, str, str]]:
        """The contract's rows, then F1's, so the table adds up to the closing line."""
        failed = len(self.fault_failures)
        return [*super().check_rows(),
                (NAME, self.fault_cases - failed, failed, FAILED if failed else PASSED, DOC)]

    def fault_line(self) -> str:
        """The first fault failures, one line each (empty when F1 held)."""
        return "\n".join(f"  {f.check} [{f.scenario}]: {f.message.splitlines()[0]}"
                         for f in self.fault_failures[:3])

    def document(self) -> Document:
        doc = super().document()
        if self.fault_failures:
            doc.blocks.append(f"{NAME} failures:\n{self.fault_line()}")
        doc.data["faults"] = {"cases": self.fault_cases,
                              "failures": [vars(f) for f in self.fault_failures]}
        doc.data["ok"] = self.ok
        return doc


def prove_library(spec: str, *, timeout: float = DEFAULT_TIMEOUT,
                  expected_failed_checks: Mapping[str, str] | None = None) -> NativeProveReport:
    """Probe the library `spec` names (a `LibraryError` when it cannot be held), then hold it
    to I1..I13 and F1."""
    loop = native_loop(spec, timeout=timeout)
    base = prove(loop, name=spec, expected_failed_checks=expected_failed_checks,
                 scenarios=abi_scenarios(), batch=False)
    report = NativeProveReport(**vars(base))
    cases = fault_cases()
    report.fault_cases = len(cases)
    for case in cases:
        try:
            check_fault(loop, case)
        except AssertionError as error:
            report.fault_failures.append(Finding(NAME, case.id, str(error)))
    return report
