"""The batch checks M1..M6 as pytest tests: subclass `BatchContract` to hold a batched engine.

Kept apart from `batch.checks` and `batch.runner`, which import no pytest, so `onebit prove`
runs them from an install without it. Each test is parametrised over the standard batch
scenarios (set `scenarios` to change the grid); override the `make_engine` fixture to bind
another engine.
"""

from __future__ import annotations

from pytest_onebit.batch.checks import BATCH
from pytest_onebit.contract.suite import contract_suite

__all__ = ["BatchContract"]

BatchContract = contract_suite(
    BATCH, name="BatchContract",
    doc="M1..M6 of docs/batching.md, one test method per check, parametrised over the batch "
        "scenarios; subclass it to hold a batched engine (make_engine: onebit's BatchEngine, "
        "or override it to bind another).",
    target="make_engine", default="onebit_make_engine", grid_attr="scenarios", grid=None)
BatchContract.__module__ = __name__
