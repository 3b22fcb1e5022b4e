"""`check_sampling(run)`: hold a loop to S1..S4 in one call, like `check_loop`.

A loop that does not sample (tried with `sampling=` and `rng=`, it refuses them) gets a report
whose checks are all *not applicable*, with the reason, and passes: it cannot break a promise
it does not make. A loop that samples and raises fails each check naming the exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pytest_onebit.contract.report import ContractFailure, Report
from pytest_onebit.loop.trace import RunFn
from pytest_onebit.sampling.checks import SAMPLING
from pytest_onebit.sampling.scenarios import SamplingScenario

__all__ = ["SamplingContractError", "check_sampling"]

#: The error `check_sampling` raises: the core's one error type (an AssertionError).
SamplingContractError = ContractFailure


def check_sampling(
    run: RunFn,
    *,
    checks: Iterable[str] | None = None,
    scenarios: Sequence[SamplingScenario] | None = None,
    expected_failed_checks: Mapping[str, str] | None = None,
    raise_on_failure: bool = True,
) -> Report:
    """Hold `run` to the sampling checks on their scenarios (or on `scenarios`). Raises
    `SamplingContractError` naming the failures unless `raise_on_failure` is False; either
    way returns the report."""
    return SAMPLING.run(run, checks=checks, scenarios=scenarios,
                        expected_failed_checks=expected_failed_checks,
                        raise_on_failure=raise_on_failure)
