"""The pytest plugin (entry point `pytest11: onebit`): options, markers, fixtures, and the
parametrisation of the contract suites.

It is loaded in every pytest run of an environment where onebit is installed, so it costs
nothing until used: this module imports only pytest (already loaded) and the standard library;
numpy, Hypothesis and the loop are imported by the fixtures and hooks that need them. Every
fixture it registers is named `onebit_...` (docs/harness.md lists them); the device rig is a
plugin of its own, loaded only when asked for (`-p pytest_onebit.device`).
"""

from __future__ import annotations

import sys

import pytest

from pytest_onebit import served_plugin  # pytest only
from pytest_onebit.base.options import (  # noqa: F401 (fixtures)
    add_base_options,
    base_header,
    configure_base,
    onebit_base,
)
from pytest_onebit.native import plugin as native_plugin  # pytest only

DEFAULT_LOOP = "onebit.loop:run"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("onebit", "onebit speculative-loop conformance")
    group.addoption(
        "--onebit-loop",
        default=DEFAULT_LOOP,
        metavar="MODULE:FUNC",
        help=f"the run() implementation the contract suite holds (default {DEFAULT_LOOP})",
    )
    add_base_options(group)
    native_plugin.add_native_options(group)
    served_plugin.add_served_options(group)


def _loop_option(config: pytest.Config):
    """The loop --onebit-loop-lib or --onebit-loop names, loaded once per session; a bad spec
    is a usage error."""
    loop = getattr(config, "_onebit_loop", None)
    if loop is None:
        loop = native_plugin.native_loop_option(config)  # --onebit-loop-lib wins
    if loop is None:
        from pytest_onebit.loader import LoadError, load_loop

        try:
            loop = load_loop(config.getoption("onebit_loop"))
        except LoadError as error:
            raise pytest.UsageError(f"--onebit-loop {error}") from None
        config._onebit_loop = loop  # type: ignore[attr-defined]
    return loop


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's own plugin loads --hypothesis-profile
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "onebit_check(name): a contract check (I1..I13, B1..B8, S1..S4)"
    )
    wanted = str(config.getoption("hypothesis_profile", None) or "")
    if "hypothesis" in sys.modules or wanted.startswith("onebit"):
        from pytest_onebit.contract import profiles

        profiles.register()
    if config.getoption("onebit_loop") != DEFAULT_LOOP or native_plugin.abi_mode(config):
        _loop_option(config)  # a bad --onebit-loop fails at start-up, not in the first test
    configure_base(config)
    config._onebit_base = native_plugin.native_base_option(config) or config._onebit_base


def pytest_report_header(config: pytest.Config) -> list[str]:
    loop = config.getoption("onebit_loop_lib", None) or config.getoption("onebit_loop")
    base = config.getoption("onebit_base_lib", None)
    return [f"onebit: loop {loop}, {f'base {base}' if base else base_header(config)}"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise each contract test over the scenarios its check applies to (a contract
    judged on one case, the base's, is not parametrised)."""
    contract = getattr(metafunc.function, "onebit_contract", None)
    attr = getattr(metafunc.cls, "onebit_grid_attr", None)
    if contract is None or attr is None or "onebit_case" not in metafunc.fixturenames:
        return
    name = metafunc.function.onebit_check
    scenarios = contract.grid(name, getattr(metafunc.cls, attr))
    if native_plugin.abi_mode(metafunc.config):  # a compiled loop: the float32-exact toy
        from pytest_onebit.loop.checks import LOOP
        from pytest_onebit.native.suite import abi_scenarios

        if contract is LOOP:
            scenarios = abi_scenarios(scenarios)
    if not scenarios:
        skip = pytest.mark.skip(reason=f"no scenario of {metafunc.cls.__name__} exercises {name}")
        metafunc.parametrize("onebit_case", [pytest.param(None, marks=skip)],
                             ids=["no-scenario"], indirect=True)
        return
    metafunc.parametrize("onebit_case", scenarios, indirect=True,
                         ids=[contract.scenario_id(s) for s in scenarios])


# ---------------------------------------------------------------------------------------------
# Fixtures (their names are the public API)


@pytest.fixture(scope="session")
def onebit_traces():
    """The one case cache (`pytest_onebit.contract.CaseCache`): each (contract, target,
    scenario) is run once per session and shared by all its checks."""
    from pytest_onebit.contract.core import CaseCache

    return CaseCache()


@pytest.fixture(scope="session")
def onebit_loop(request: pytest.FixtureRequest):
    """The loop under test: onebit.run, or what --onebit-loop names."""
    return _loop_option(request.config)


@pytest.fixture(scope="session")
def onebit_make_engine(onebit_loop):
    """The batched engine the batch contract (`BatchContract`, M1..M6) holds by default:
    onebit's `BatchEngine`, its sequences decoded by the loop under test (`onebit_loop`)."""
    from pytest_onebit.batch.runner import onebit_batch_engine

    return onebit_batch_engine(onebit_loop)


@pytest.fixture(scope="session")
def onebit_make_server(onebit_loop):
    """The server the served contract (`ServedContract`, V1..V8) holds by default: onebit
    serve's app and engine on a loopback port, its requests decoded by `onebit_loop`."""
    from pytest_onebit.serve.runner import onebit_served

    return onebit_served(onebit_loop)


@pytest.fixture
def onebit_toy_base():
    """Factory: `onebit_toy_base(vocab_size=64, hidden=16, max_batch_rows=8,
    rows_shape="prefix", seed=0)` makes a fresh deterministic toy base."""
    from pytest_onebit.doubles.toy import ToyBase

    return ToyBase


@pytest.fixture
def onebit_oracle():
    """Factory: `onebit_oracle(base, prompt, n)` runs plain greedy for n tokens and keeps the
    truth."""
    from pytest_onebit.doubles.heads import Oracle

    return Oracle.from_greedy


@pytest.fixture
def onebit_perfect_head():
    """Factory: `onebit_perfect_head(oracle, flavour="one-pass" | "two-pass")`."""
    from pytest_onebit.doubles.heads import perfect_head

    return perfect_head


@pytest.fixture
def onebit_garbage_head():
    """Factory: `onebit_garbage_head(oracle, flavour)`: drafts that are always wrong."""
    from pytest_onebit.doubles.heads import garbage_head

    return garbage_head


@pytest.fixture
def onebit_half_head():
    """Factory: `onebit_half_head(oracle, flavour)`: right for the first half of its drafts."""
    from pytest_onebit.doubles.heads import half_head

    return half_head


@pytest.fixture
def onebit_plain_decode():
    """`onebit_plain_decode(prompt, max_tokens, **toy_config)`: onebit.greedy on a fresh toy
    base."""
    from onebit.reference import greedy
    from pytest_onebit.doubles.toy import ToyBase

    def decode(prompt, max_tokens, **config):
        return greedy(ToyBase(**config), prompt, max_tokens=max_tokens)

    return decode
