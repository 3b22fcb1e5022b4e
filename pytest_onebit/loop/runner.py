"""Holding a loop to the contract in one call: `check_loop(run)`, like scikit-learn's
`check_estimator`, and the report it returns (the core's `Report`).

Known failures are declared with reasons, `check_loop(run, expected_failed_checks={
"I7-pass-law": "our k is capped at 4"})`: such a check is reported as *xfail* with the
reason; one that passes anyway is *xpass*, which fails the report (the declaration is stale).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from pytest_onebit.contract.report import (
    XFAIL,
    XPASS,
    ContractFailure,
    Finding,
    Report,
)
from pytest_onebit.loop.checks import LOOP
from pytest_onebit.loop.scenarios import Scenario
from pytest_onebit.loop.trace import RunFn, Trace

__all__ = ["XFAIL", "XPASS", "LoopContractError", "check_loop", "check_trace"]

#: The error `check_loop` raises: the core's one error type, under the loop's name.
LoopContractError = ContractFailure


def check_trace(trace: Trace, checks: Iterable[str] | None = None) -> list[Finding]:
    """Run every applicable check on one trace; return the failures."""
    found = []
    for name in LOOP.resolve(checks):
        if not LOOP.checks[name].applies(trace.scenario):
            continue
        try:
            LOOP.verify(name, trace)
        except AssertionError as error:
            found.append(Finding(name, trace.scenario.id, str(error)))
    return found


def check_loop(
    run: RunFn,
    scenarios: Sequence[Scenario] | None = None,
    *,
    checks: Iterable[str] | None = None,
    expected_failed_checks: Mapping[str, str] | None = None,
    raise_on_failure: bool = True,
    on_trace: Callable[[Trace], None] | None = None,
) -> Report:
    """Hold `run` to every check on every scenario (default: `standard_scenarios()`).

    Raises `LoopContractError` naming the broken checks, unless `raise_on_failure` is False;
    either way returns the report. `on_trace` sees each scenario's trace (to cost the run)."""
    return LOOP.run(run, checks=checks, scenarios=scenarios,
                    expected_failed_checks=expected_failed_checks,
                    raise_on_failure=raise_on_failure, on_case=on_trace)
