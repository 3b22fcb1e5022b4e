"""The contract core: one `Check` type, a `Contract` that registers checks and runs them (into
the one `Report`, raising the one `ContractFailure`: `contract.report`), one way to declare
expected failures, and the case cache.

The loop (I1..I13), base (B1..B8) and sampling (S1..S4) contracts are three `Contract`s. A
contract says how to turn the thing it judges (the *target*: a run() function, a base factory)
and one scenario into a *case*, what its checks read (a trace, a stepped subject). Each case is
made once and read by every check that applies to its scenario.

The core never crashes on the code it judges: whatever a check or a case trips over becomes a
finding naming the exception. Nothing here imports pytest, so `onebit prove` runs it from an
install without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_onebit.contract.report import ContractFailure, Finding, Report


class NotApplicable(Exception):  # noqa: N818 - a verdict, not an error
    """Raised by a check when the target lacks what the check judges (an optional method):
    the check is reported not applicable with this reason, neither passed nor failed."""


def always(scenario: object) -> bool:
    """The default `applies`: a check runs on every scenario of its grid."""
    return True


@dataclass(frozen=True)
class Check:
    """One named check. Its name is stable public API (it is in every test id and in the
    mutant tables); its id is the part before the first dash (`I7`, `B2`, `S1`)."""

    name: str
    doc: str
    verify: Callable[[Any], None]  # reads one case; raises AssertionError saying what broke
    applies: Callable[[Any], bool] = always  # which scenarios of its grid it runs on
    scenarios: Callable[[], Sequence[Any]] | None = None  # its own grid, else the contract's

    @property
    def id(self) -> str:
        return self.name.split("-", 1)[0]

    @property
    def invariant(self) -> str:
        return self.id

    @property
    def summary(self) -> str:
        return self.doc.split("\n", 1)[0]


class CaseCache:
    """Each (contract, target, scenario) case is made once and shared by every check that
    reads it; so is each target's applicability. pytest holds one per session (the
    `onebit_traces` fixture); a contract run holds its own."""

    def __init__(self) -> None:
        self._cases: dict[tuple, Any] = {}

    def case(self, contract: Contract, target: Any, scenario: Hashable) -> Any:
        key = (contract.name, target, scenario)
        if key not in self._cases:
            self._cases[key] = contract.prepare(target, scenario)
        return self._cases[key]

    def not_applicable(self, contract: Contract, target: Any) -> str | None:
        key = (contract.name, target, "not applicable")
        if key not in self._cases:
            self._cases[key] = contract.not_applicable(target)
        return self._cases[key]


@dataclass
class Failed:
    """A case that could not be made: every check that reads it fails naming why."""

    error: BaseException


class Contract:
    """A registry of checks and the one way to run them.

    `prepare(target, scenario)` makes a case; `scenarios()` is the default grid (None: one
    case per run, the scenario the caller passes); `not_applicable(target)` says why the whole
    contract does not apply to a target (None when it does), found by trying the target;
    `scenario_id(scenario)` names a scenario in findings and test ids."""

    def __init__(self, name: str, *, prepare: Callable[[Any, Any], Any],
                 scenarios: Callable[[], Sequence[Any]] | None = None,
                 not_applicable: Callable[[Any], str | None] | None = None,
                 scenario_id: Callable[[Any], str] = lambda s: getattr(s, "id", "")) -> None:
        self.name = name
        self.checks: dict[str, Check] = {}
        self._prepare = prepare
        self._scenarios = scenarios
        self._not_applicable = not_applicable
        self.scenario_id = scenario_id

    def __repr__(self) -> str:
        return f"Contract({self.name!r}, checks={list(self.checks)})"

    # -- declaring checks -----------------------------------------------------------------

    def check(self, name: str, *, applies: Callable[[Any], bool] = always,
              scenarios: Callable[[], Sequence[Any]] | None = None):
        """Register the decorated function as check `name`; its docstring says what it proves
        and it reads one case, raising AssertionError saying what broke."""
        if name in self.checks:
            raise ValueError(f"the {self.name} contract already has a check {name!r}")

        def register(fn: Callable[[Any], None]) -> Callable[[Any], None]:
            doc = "\n".join(line.strip() for line in (fn.__doc__ or "").strip().splitlines())
            self.checks[name] = Check(name, doc, fn, applies, scenarios)
            return fn

        return register

    def resolve(self, wanted: Iterable[str] | None = None) -> list[str]:
        """Check names from names or ids (`"B2"` or `"B2-commit-exact"`), all when None;
        ValueError naming what is unknown."""
        if wanted is None:
            return list(self.checks)
        if isinstance(wanted, str):
            wanted = [wanted]
        by_id = {c.id: name for name, c in self.checks.items()}
        names, unknown = [], []
        for w in wanted:
            name = w if w in self.checks else by_id.get(w)
            (names if name else unknown).append(name or w)
        if unknown:
            raise ValueError(f"unknown {self.name} check(s) {unknown}; known: {list(self.checks)}")
        return names

    def expected(self, declared: Mapping[str, str] | None) -> dict[str, str]:
        """`expected_failed_checks` as check name -> reason. An unknown name or an empty
        reason is a ValueError: a declaration must say which check and why."""
        declared = dict(declared or {})
        unknown = [n for n in declared if n not in self.checks]
        if unknown:
            raise ValueError(f"expected_failed_checks names unknown {self.name} check(s) "
                             f"{unknown}; known: {list(self.checks)}")
        blank = [n for n, why in declared.items() if not isinstance(why, str) or not why.strip()]
        if blank:
            raise ValueError(f"expected_failed_checks needs a reason for each check: {blank}")
        return declared

    # -- running them ---------------------------------------------------------------------

    def grid(self, name: str, scenarios: Sequence[Any] | None = None) -> list[Any]:
        """The scenarios check `name` runs on: `scenarios` if given, else the check's own grid,
        else the contract's; only those it applies to."""
        check = self.checks[name]
        if scenarios is None:
            source = check.scenarios or self._scenarios
            scenarios = source() if source is not None else [None]
        return [s for s in scenarios if check.applies(s)]

    def prepare(self, target: Any, scenario: Any) -> Any:
        """The case the checks read; a case that cannot be made is `Failed`, not a crash."""
        try:
            return self._prepare(target, scenario)
        except (Exception, SystemExit) as error:  # the target may break the harness's steps
            return Failed(error)

    def not_applicable(self, target: Any) -> str | None:
        """Why this contract does not apply to `target`, or None. A probe that trips over the
        target says nothing: the checks will judge it."""
        if self._not_applicable is None:
            return None
        try:
            return self._not_applicable(target)
        except (Exception, SystemExit):
            return None

    def verify(self, check: Check | str, case: Any) -> None:
        """Run one check on one case. Whatever it trips over in the target's output becomes an
        AssertionError naming the exception, so the contract judges and never crashes."""
        __tracebackhide__ = True
        check = self.checks[check] if isinstance(check, str) else check
        if isinstance(case, Failed):
            error = case.error
            raise AssertionError(f"the case could not be made: {type(error).__name__}: "
                                 f"{error}") from error
        try:
            check.verify(case)
        except (AssertionError, NotApplicable):
            raise
        except (Exception, SystemExit) as error:  # the target may raise anything, when called
            # or when its result is read
            raise AssertionError(f"raised {type(error).__name__}: {error}") from error

    def run(self, target: Any, *, checks: Iterable[str] | None = None,
            scenarios: Sequence[Any] | None = None,
            expected_failed_checks: Mapping[str, str] | None = None,
            raise_on_failure: bool = True,
            on_case: Callable[[Any], None] | None = None) -> Report:
        """Hold `target` to `checks` (default all) on their grids (or on `scenarios`).

        Scenario by scenario: each case is made once, every check that applies reads it, and
        `on_case` sees it. Raises `ContractFailure` naming the broken checks unless
        `raise_on_failure` is False; either way returns the report."""
        names = self.resolve(checks)
        report = Report(self.name, ran_by_check=dict.fromkeys(names, 0),
                        expected_failed_checks=self.expected(expected_failed_checks),
                        seconds=dict.fromkeys(names, 0.0))
        reason = self.not_applicable(target)
        if reason is not None:
            report.not_applicable = dict.fromkeys(names, reason)
            return report
        plan: dict[Any, list[str]] = {}
        for name in names:
            for scenario in self.grid(name, scenarios):
                plan.setdefault(scenario, []).append(name)
        for scenario, wanting in plan.items():
            case = self.prepare(target, scenario)
            for name in wanting:
                start = time.perf_counter()
                report.ran += 1
                report.ran_by_check[name] += 1
                try:
                    self.verify(name, case)
                except NotApplicable as why:  # not judged: not counted as run
                    report.not_applicable[name] = str(why)
                    report.ran -= 1
                    report.ran_by_check[name] -= 1
                except AssertionError as error:
                    sid = self.scenario_id(scenario) if scenario is not None else ""
                    report.failures.append(Finding(name, sid, str(error)))
                report.seconds[name] += time.perf_counter() - start
            if on_case is not None:
                on_case(case)
        if raise_on_failure and not report.ok:
            raise ContractFailure(report)
        return report
