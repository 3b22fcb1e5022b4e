"""Holding a loop to the contract in one call: `check_loop(run)`, like scikit-learn's
`check_estimator`, and the report it returns.

Known failures are declared with reasons, `check_loop(run, expected_failed_checks={
"I7-pass-law": "our k is capped at 4"})`: such a check is reported as *xfail* with the
reason; one that passes anyway is *xpass*, which fails the report (the declaration is stale).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_onebit.checks import CHECKS, run_check
from pytest_onebit.scenarios import Scenario, standard_scenarios
from pytest_onebit.trace import RunFn, Trace, execute

PASSED, FAILED, XFAIL, XPASS = "passed", "failed", "xfail", "xpass"


@dataclass
class Finding:
    check: str
    scenario: str
    message: str


@dataclass
class ContractReport:
    """What `check_loop` found: every (check, scenario) pair that ran, and those that failed."""

    ran: int = 0
    failures: list[Finding] = field(default_factory=list)
    ran_by_check: dict[str, int] = field(default_factory=dict)
    expected_failed_checks: dict[str, str] = field(default_factory=dict)

    def failed_by_check(self) -> dict[str, int]:
        counts = dict.fromkeys(self.ran_by_check, 0)
        for f in self.failures:
            counts[f.check] += 1
        return counts

    def status(self, check: str) -> str:
        """passed / failed, or xfail / xpass for a check declared as an expected failure."""
        failed = self.failed_by_check().get(check, 0)
        if check in self.expected_failed_checks:
            return XFAIL if failed else XPASS
        return FAILED if failed else PASSED

    def statuses(self) -> dict[str, str]:
        return {name: self.status(name) for name in self.ran_by_check}

    @property
    def unexpected_failures(self) -> list[Finding]:
        return [f for f in self.failures if f.check not in self.expected_failed_checks]

    @property
    def ok(self) -> bool:
        """No unexpected failure, and no expected failure that passed."""
        return not self.unexpected_failures and XPASS not in self.statuses().values()


class LoopContractError(AssertionError):
    """`check_loop` found a broken invariant (or a stale expected failure); `.report` has
    every finding."""

    def __init__(self, report: ContractReport) -> None:
        order = list(CHECKS)
        broken = sorted({f.check for f in report.unexpected_failures}, key=order.index)
        xpassed = [c for c, s in report.statuses().items() if s == XPASS]
        parts = []
        if broken:
            first = report.unexpected_failures[0]
            parts.append(f"{len(report.unexpected_failures)} of {report.ran} checks failed "
                         f"({', '.join(broken)}); first: {first.check} on {first.scenario}: "
                         f"{first.message}")
        if xpassed:
            parts.append(f"declared as expected failures but passed: {', '.join(xpassed)}")
        super().__init__("; ".join(parts))
        self.report = report


def check_trace(trace: Trace, checks: Iterable[str] | None = None) -> list[Finding]:
    """Run every applicable check on one trace; return the failures."""
    found = []
    for name in checks or CHECKS:
        c = CHECKS[name]
        if not c.applies(trace.scenario):
            continue
        try:
            run_check(c, trace)
        except AssertionError as error:
            found.append(Finding(name, trace.scenario.id, str(error)))
    return found


def validate_expected(expected: Mapping[str, str] | None, known: Iterable[str]) -> dict:
    """`expected_failed_checks` as a dict of check name -> reason; unknown names or empty
    reasons raise `ValueError`."""
    expected = dict(expected or {})
    known = list(known)
    unknown = [n for n in expected if n not in known]
    if unknown:
        raise ValueError(f"expected_failed_checks names unknown check(s) {unknown}; "
                         f"known: {known}")
    blank = [n for n, why in expected.items() if not isinstance(why, str) or not why.strip()]
    if blank:
        raise ValueError(f"expected_failed_checks needs a reason for each check: {blank}")
    return expected


def check_loop(
    run: RunFn,
    scenarios: Sequence[Scenario] | None = None,
    *,
    checks: Iterable[str] | None = None,
    expected_failed_checks: Mapping[str, str] | None = None,
    raise_on_failure: bool = True,
    on_trace: Callable[[Trace], None] | None = None,
) -> ContractReport:
    """Hold `run` to every check on every scenario (default: `standard_scenarios()`).

    Raises `LoopContractError` naming the broken checks, unless `raise_on_failure` is False;
    either way returns the report. `on_trace` sees each scenario's trace (to cost the run)."""
    names = list(checks or CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}; known: {list(CHECKS)}")
    report = ContractReport(ran_by_check=dict.fromkeys(names, 0),
                            expected_failed_checks=validate_expected(expected_failed_checks,
                                                                     CHECKS))
    for scenario in scenarios or standard_scenarios():
        trace = execute(run, scenario)
        for name in names:
            if CHECKS[name].applies(scenario):
                report.ran += 1
                report.ran_by_check[name] += 1
        report.failures.extend(check_trace(trace, names))
        if on_trace is not None:
            on_trace(trace)
    if raise_on_failure and not report.ok:
        raise LoopContractError(report)
    return report
