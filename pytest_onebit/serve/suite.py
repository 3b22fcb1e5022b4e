"""The served checks V1..V8 as pytest tests: subclass `ServedContract` to hold a server.

Kept apart from `serve.checks` and `serve.runner`, which import no pytest. Each test is
parametrised over the standard served scenarios (set `scenarios` to change the grid);
override the `make_server` fixture to bind another server.
"""

from __future__ import annotations

from pytest_onebit.contract.suite import contract_suite
from pytest_onebit.serve.checks import SERVED

__all__ = ["ServedContract"]

ServedContract = contract_suite(
    SERVED, name="ServedContract",
    doc="V1..V8 of docs/serve.md, one test method per check, parametrised over the served "
        "scenarios; subclass it to hold a server (make_server: onebit serve's app and engine, "
        "or override it to bind another).",
    target="make_server", default="onebit_make_server", grid_attr="scenarios", grid=None)
ServedContract.__module__ = __name__
