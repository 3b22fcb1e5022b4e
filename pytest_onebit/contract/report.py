"""What a contract run found: the one `Report` every contract returns, its `Finding`s, the
statuses a check can end in, and the one error (`ContractFailure`) a failed run raises."""

from __future__ import annotations

from dataclasses import dataclass, field

PASSED, FAILED, XFAIL, XPASS, NOT_APPLICABLE = (
    "passed", "failed", "xfail", "xpass", "not applicable")


@dataclass
class Finding:
    check: str
    scenario: str  # the scenario's id ("" for a contract with one case, as the base's)
    message: str


@dataclass
class Report:
    """What a contract found: how often each check ran, what failed, how long each took, which
    checks were declared as expected failures and which did not apply to the target (why)."""

    contract: str = ""
    ran: int = 0
    failures: list[Finding] = field(default_factory=list)
    ran_by_check: dict[str, int] = field(default_factory=dict)
    expected_failed_checks: dict[str, str] = field(default_factory=dict)
    not_applicable: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def checks(self) -> list[str]:
        """The checks this report covers, in the order they were asked for."""
        return list(self.ran_by_check)

    def failed_by_check(self) -> dict[str, int]:
        counts = dict.fromkeys(self.ran_by_check, 0)
        for f in self.failures:
            counts[f.check] = counts.get(f.check, 0) + 1
        return counts

    def status(self, check: str) -> str:
        """passed / failed, xfail / xpass for a declared expected failure, or not applicable."""
        if check in self.not_applicable:
            return NOT_APPLICABLE
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
        """No unexpected failure, and no expected failure that passed (a stale declaration)."""
        return not self.unexpected_failures and XPASS not in self.statuses().values()

    def merged(self, other: Report | None) -> Report:
        """This report and `other` (another contract's, on the same target) as one."""
        if other is None:
            return self
        return Report(
            f"{self.contract}+{other.contract}", self.ran + other.ran,
            [*self.failures, *other.failures], {**self.ran_by_check, **other.ran_by_check},
            {**self.expected_failed_checks, **other.expected_failed_checks},
            {**self.not_applicable, **other.not_applicable}, {**self.seconds, **other.seconds})

    def to_text(self) -> str:
        """One line per check (runs, seconds, verdict) and a closing count."""
        first = {}
        for f in self.failures:
            first.setdefault(f.check, f.message)
        lines = [f"{'check':<18} {'runs':>5} {'seconds':>8}  verdict"]
        for name, status in self.statuses().items():
            if status == NOT_APPLICABLE:
                verdict = f"not applicable: {self.not_applicable[name]}"
            elif name in first:
                verdict = f"{status.upper()}: " + (first[name].splitlines() or [""])[0]
            else:
                verdict = "ok" if status == PASSED else status
            lines.append(f"{name:<18} {self.ran_by_check[name]:>5} "
                         f"{self.seconds.get(name, 0.0):>8.2f}  {verdict}")
        judged = [s for s in self.statuses().values() if s != NOT_APPLICABLE]
        passed = sum(s in (PASSED, XFAIL) for s in judged)
        lines.append(f"{passed} of {len(judged)} {self.contract} checks passed")
        return "\n".join(lines)


class ContractFailure(AssertionError):
    """A contract found a broken check (or a stale expected failure); `.report` has every
    finding. `LoopContractError`, `BaseModelContractError` and `SamplingContractError` are
    this type under the names each contract has always raised."""

    def __init__(self, report: Report) -> None:
        broken = list(dict.fromkeys(f.check for f in report.unexpected_failures))
        xpassed = [c for c, s in report.statuses().items() if s == XPASS]
        parts = []
        if broken:
            first = report.unexpected_failures[0]
            where = f" on {first.scenario}" if first.scenario else ""
            parts.append(f"{len(report.unexpected_failures)} of {report.ran} {report.contract} "
                         f"checks failed ({', '.join(broken)}); first: {first.check}{where}: "
                         f"{first.message}")
        if xpassed:
            parts.append(f"declared as expected failures but passed: {', '.join(xpassed)}")
        super().__init__("; ".join(parts))
        self.report = report
