"""The served contract: what a client of an OpenAI-compatible server receives is the library's
answer to the same request (checks V1..V8, docs/serve.md). `check_served(make_server)` runs it
in one call; `pytest_onebit.serve.suite.ServedContract` is the pytest face. Needs the `serve`
extra (starlette, uvicorn) for onebit's own server."""

from pytest_onebit.serve.checks import SERVED, SERVED_CHECKS
from pytest_onebit.serve.runner import ServedContractError, check_served, onebit_server

__all__ = ["SERVED", "SERVED_CHECKS", "ServedContractError", "check_served", "onebit_server"]
