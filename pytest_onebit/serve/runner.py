"""`check_served(make_server)`: hold a served engine to V1..V8 in one call, like `check_loop`.

`make_server(model, *, parallel, head, stream_interval)` returns a context manager with
`.url` serving `model` (the contract's `ServedToy`) over OpenAI's HTTP API: one request at a
time when `parallel` is None, else `parallel` sequences at once; `head` names the draft head
and `stream_interval` the least seconds between a stream's events. `onebit_server` is onebit's
own: `onebit serve`'s app and engine under uvicorn on a free loopback port.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from pytest_onebit.contract.report import ContractFailure, Report
from pytest_onebit.serve.checks import SERVED
from pytest_onebit.serve.scenarios import ServedScenario

__all__ = ["ServedContractError", "check_served", "onebit_served", "onebit_server"]

#: The error `check_served` raises: the core's one error type (an AssertionError).
ServedContractError = ContractFailure


def onebit_server(model, *, parallel: int | None, head: str, stream_interval: float,
                  run: Callable | None = None):
    """onebit's server over `model`: `create_app(Engine(model, ...))` in a `ServerThread`,
    its requests decoded by `run` (default `onebit.run`)."""
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread

    return ServerThread(create_app(Engine(model, head=head, parallel=parallel, run=run),
                                   stream_interval=stream_interval))


def onebit_served(run: Callable | None = None) -> Callable:
    """A `make_server` for onebit's server whose requests are decoded by `run`."""
    def make(model, **settings):
        return onebit_server(model, run=run, **settings)

    make.__qualname__ = f"onebit_served({getattr(run, '__qualname__', 'onebit.run')})"
    return make


def check_served(
    make_server: Callable = onebit_server,
    *,
    checks: Iterable[str] | None = None,
    scenarios: Sequence[ServedScenario] | None = None,
    expected_failed_checks: Mapping[str, str] | None = None,
    raise_on_failure: bool = True,
) -> Report:
    """Hold the server `make_server` builds to the served checks on the standard scenarios
    (or `scenarios`). Raises `ServedContractError` naming the failures unless
    `raise_on_failure` is False; either way returns the report."""
    return SERVED.run(make_server, checks=checks, scenarios=scenarios,
                      expected_failed_checks=expected_failed_checks,
                      raise_on_failure=raise_on_failure)
