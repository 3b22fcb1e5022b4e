"""`check_batch(make_engine)`: hold a batched engine to M1..M6 in one call, like `check_loop`.

`make_engine(rows, *, max_rows, chunk, queue, context)` builds the engine over the toy batched
base (`pytest_onebit.batch.toy.ToyBatchRows`); `onebit_batch_engine` (below) is onebit's own,
running any loop with onebit's `run` signature.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from pytest_onebit.batch.checks import BATCH
from pytest_onebit.batch.scenarios import BatchScenario
from pytest_onebit.contract.report import ContractFailure, Report

__all__ = ["BatchContractError", "check_batch", "onebit_batch_engine"]

#: The error `check_batch` raises: the core's one error type (an AssertionError).
BatchContractError = ContractFailure


def onebit_batch_engine(run: Callable | None = None) -> Callable:
    """A `make_engine` for onebit's `BatchEngine`, its sequences decoded by `run` (default
    `onebit.run`)."""
    from onebit.batch import BatchEngine

    def make(rows, **settings):
        return BatchEngine(rows, run=run, **settings)

    make.__qualname__ = f"onebit_batch_engine({getattr(run, '__qualname__', 'onebit.run')})"
    return make


def check_batch(
    make_engine: Callable,
    *,
    checks: Iterable[str] | None = None,
    scenarios: Sequence[BatchScenario] | None = None,
    expected_failed_checks: Mapping[str, str] | None = None,
    raise_on_failure: bool = True,
) -> Report:
    """Hold the engine `make_engine` builds to the batch checks on the standard scenarios (or
    `scenarios`). Raises `BatchContractError` naming the failures unless `raise_on_failure` is
    False; either way returns the report."""
    return BATCH.run(make_engine, checks=checks, scenarios=scenarios,
                     expected_failed_checks=expected_failed_checks,
                     raise_on_failure=raise_on_failure)
