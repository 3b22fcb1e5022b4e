"""`check_base(factory)`: hold a base model to checks B1..B7 in one call.

    from pytest_onebit import check_base

    check_base(lambda: load_model("DIR"))            # raises BaseModelContractError if broken
    report = check_base(make_npu_base, raise_on_failure=False)
    print(report.to_text())

The factory takes no arguments and returns a fresh base each call (the checks make a few: the
stepped truth, the base under test, a second one for B6). The error is not
`onebit.BaseContractError`, which the loop raises mid-run when a base returns something
unusable; this one says a base failed the conformance checks.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from pytest_onebit.base_checks import BASE_CHECKS, BaseFactory, BaseSettings, Subject


@dataclass
class BaseFinding:
    check: str
    message: str


@dataclass
class BaseReport:
    """Which checks ran, how long each took, and what failed."""

    ran: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    failures: list[BaseFinding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_text(self) -> str:
        failed = {f.check: f.message for f in self.failures}
        lines = [f"{'check':<18} {'seconds':>8}  verdict"]
        for name in self.ran:
            verdict = "FAILED: " + failed[name].splitlines()[0] if name in failed else "ok"
            lines.append(f"{name:<18} {self.seconds[name]:>8.2f}  {verdict}")
        lines.append(f"{len(self.ran) - len(self.failures)} of {len(self.ran)} base checks "
                     "passed")
        return "\n".join(lines)


class BaseModelContractError(AssertionError):
    """`check_base` found a broken base check; `.report` has every finding."""

    def __init__(self, report: BaseReport) -> None:
        first = report.failures[0]
        names = ", ".join(f.check for f in report.failures)
        super().__init__(f"{len(report.failures)} of {len(report.ran)} base checks failed "
                         f"({names}); first: {first.check}: {first.message}")
        self.report = report


def check_base(
    factory: BaseFactory,
    *,
    checks: Iterable[str] | None = None,
    settings: BaseSettings | None = None,
    raise_on_failure: bool = True,
) -> BaseReport:
    """Hold the bases `factory()` makes to every check (or those named, by name or id: "B2" or
    "B2-commit-exact"). Raises `BaseModelContractError` naming the failed checks unless
    `raise_on_failure` is False; either way returns the report."""
    names = resolve_checks(checks)
    subject = Subject(factory, settings)
    report = BaseReport()
    for name in names:
        start = time.perf_counter()
        try:
            BASE_CHECKS[name].run(subject)
        except AssertionError as error:
            report.failures.append(BaseFinding(name, str(error)))
        except Exception as error:  # a base that raises on a legal call fails the check too
            report.failures.append(BaseFinding(name, f"raised {type(error).__name__}: {error}"))
        report.ran.append(name)
        report.seconds[name] = time.perf_counter() - start
    if raise_on_failure and report.failures:
        raise BaseModelContractError(report)
    return report


def resolve_checks(checks: Iterable[str] | None) -> list[str]:
    """Check names from names or ids; ValueError naming what is unknown."""
    if checks is None:
        return list(BASE_CHECKS)
    by_id = {c.id: name for name, c in BASE_CHECKS.items()}
    names, unknown = [], []
    for wanted in checks:
        name = wanted if wanted in BASE_CHECKS else by_id.get(wanted)
        (names if name else unknown).append(name or wanted)
    if unknown:
        raise ValueError(f"unknown base check(s) {unknown}; known: {list(BASE_CHECKS)}")
    return names
