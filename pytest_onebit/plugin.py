"""The pytest plugin (entry point `pytest11: onebit`): options, the `device` marker, fixtures,
the Hypothesis profile, and the parametrisation of the conformance suite.

Installing onebit is all it takes: any project's pytest then has these.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from pytest_onebit import device as device_probe
from pytest_onebit import heads
from pytest_onebit.base_plugin import (  # noqa: F401 (fixtures)
    add_base_options,
    base_header,
    configure_base,
    onebit_base,
    onebit_base_subjects,
)
from pytest_onebit.contract import CHECKS, RunFn, Scenario, Trace, execute, load_loop
from pytest_onebit.toy import ToyBase

DEFAULT_LOOP = "onebit.loop:run"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("onebit", "onebit speculative-loop conformance")
    group.addoption(
        "--onebit-loop",
        default=DEFAULT_LOOP,
        metavar="MODULE:FUNC",
        help=f"the run() implementation the contract suite holds (default {DEFAULT_LOOP})",
    )
    group.addoption(
        "--onebit-device",
        default="auto",
        choices=device_probe.BACKENDS,
        help="which backend device_base uses (default auto: the NPU if the probe passes)",
    )
    add_base_options(group)


def _loop_option(spec: str) -> RunFn:
    try:
        return load_loop(spec)
    except ValueError as error:
        raise pytest.UsageError(f"--onebit-loop {error}") from error


def _register_hypothesis_profile() -> None:
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # the plugin works without Hypothesis; only the property tests need it
        return
    in_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    settings.register_profile(
        "onebit",
        max_examples=2000 if in_ci else 300,
        derandomize=in_ci,  # CI runs the same examples every time
        deadline=None,  # shared machines are noisy; speed is benchmarked, not asserted
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=True,
    )
    # For runs that repeat the suite many times (the mutant catalogue, mutmut).
    settings.register_profile("onebit-quick", parent=settings.get_profile("onebit"),
                              max_examples=100, derandomize=True)


# Registered at import so that a conftest can `settings.load_profile("onebit")`.
_register_hypothesis_profile()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "device: needs an accelerator; skipped with the probe's reason where there is none",
    )
    config.addinivalue_line(
        "markers", "onebit_check(name): a conformance check of design/loop.md (I1..I12)"
    )
    config._onebit_loop = _loop_option(config.getoption("onebit_loop"))  # type: ignore[attr-defined]
    configure_base(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"onebit: loop {config.getoption('onebit_loop')}, {base_header(config)}, "
            f"device {config.getoption('onebit_device')}"]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("device") is not None:
        reason = device_probe.skip_reason(item.config.getoption("onebit_device"))
        if reason is not None:
            pytest.skip(reason)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise each conformance check over the scenarios it applies to."""
    name = getattr(metafunc.function, "onebit_check", None)
    if name is None or "onebit_scenario" not in metafunc.fixturenames:
        return
    scenarios = [s for s in metafunc.cls.scenarios if CHECKS[name].applies(s)]
    if not scenarios:
        skip = pytest.mark.skip(reason=f"no scenario of {metafunc.cls.__name__} exercises {name}")
        metafunc.parametrize("onebit_scenario", [pytest.param(None, marks=skip)],
                             ids=["no-scenario"])
        return
    metafunc.parametrize("onebit_scenario", scenarios, ids=[s.id for s in scenarios])


# ---------------------------------------------------------------------------------------------
# Fixtures (their names are the public API)


class TraceCache:
    """Each (loop, scenario) is run once per session and shared by all its checks."""

    def __init__(self) -> None:
        self._traces: dict[tuple[RunFn, Scenario], Trace] = {}

    def trace(self, run: RunFn, scenario: Scenario) -> Trace:
        key = (run, scenario)
        if key not in self._traces:
            self._traces[key] = execute(run, scenario)
        return self._traces[key]


@pytest.fixture(scope="session")
def onebit_traces() -> TraceCache:
    return TraceCache()


@pytest.fixture(scope="session")
def spec_run(request: pytest.FixtureRequest) -> RunFn:
    """The loop under test: onebit.run, or what --onebit-loop names."""
    return request.config._onebit_loop  # type: ignore[attr-defined]


@pytest.fixture
def toy_base() -> Callable[..., ToyBase]:
    """Factory: `toy_base(vocab_size=64, hidden=16, max_batch_rows=8, rows_shape="prefix",
    seed=0)` makes a fresh deterministic toy base."""
    return ToyBase


@pytest.fixture
def oracle() -> Callable[..., heads.Oracle]:
    """Factory: `oracle(base, prompt, n)` runs plain greedy for n tokens and keeps the truth."""
    return heads.Oracle.from_greedy


@pytest.fixture
def perfect_head() -> Callable:
    """Factory: `perfect_head(oracle, flavour="one-pass" | "two-pass")`."""
    return heads.perfect_head


@pytest.fixture
def garbage_head() -> Callable:
    """Factory: `garbage_head(oracle, flavour)`: drafts that are always wrong."""
    return heads.garbage_head


@pytest.fixture
def half_head() -> Callable:
    """Factory: `half_head(oracle, flavour)`: right for the first half of its drafts."""
    return heads.half_head


@pytest.fixture
def plain_decode() -> Callable:
    """`plain_decode(prompt, max_tokens, **toy_config)`: onebit.greedy on a fresh toy base."""
    from onebit.loop import greedy

    def decode(prompt, max_tokens, **config):
        return greedy(ToyBase(**config), prompt, max_tokens=max_tokens)

    return decode


@pytest.fixture
def device_base(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The real forward on the selected backend (device tests only). `host` is the NumPy
    forward on a fabricated Qwen3.5 hybrid (GDN and attention layers), so a partial accept
    must roll the recurrent state back exactly."""
    backend = request.config.getoption("onebit_device")
    reason = device_probe.skip_reason(backend)
    if reason is not None:
        pytest.skip(reason)
    if backend != "host":
        pytest.skip("the NPU probe passed, but onebit has no NPU forward yet")
    from onebit.models import fabricate_model, load_model

    return load_model(fabricate_model(tmp_path_factory.mktemp("host-model"), "qwen3_5"))
