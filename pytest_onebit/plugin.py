"""The pytest plugin (entry point `pytest11: onebit`): options, markers, fixtures, and the
parametrisation of the conformance suite.

It is loaded in every pytest run of an environment where onebit is installed, so it costs
nothing until used: this module imports only pytest (already loaded) and the standard library;
numpy, Hypothesis and the loop are imported by the fixtures and hooks that need them.
"""

from __future__ import annotations

import sys

import pytest

from pytest_onebit.base_plugin import (  # noqa: F401 (fixtures)
    add_base_options,
    base_header,
    configure_base,
    onebit_base,
    onebit_base_subjects,
)
from pytest_onebit.device import BACKENDS as DEVICE_BACKENDS  # standard library only

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
        choices=DEVICE_BACKENDS,
        help="the backend device tests run on (default auto: the NPU if its probe passes, "
        "else CUDA)",
    )
    add_base_options(group)


def _loop_option(config: pytest.Config):
    """The loop --onebit-loop names, loaded once per session; a bad spec is a usage error."""
    loop = getattr(config, "_onebit_loop", None)
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
        "markers",
        "device: needs an accelerator; skipped with the probe's reason where there is none",
    )
    config.addinivalue_line(
        "markers", "onebit_check(name): a conformance check of docs/contract.md (I1..I13)"
    )
    wanted = str(config.getoption("hypothesis_profile", None) or "")
    if "hypothesis" in sys.modules or wanted.startswith("onebit"):
        from pytest_onebit import profiles

        profiles.register()
    if config.getoption("onebit_loop") != DEFAULT_LOOP:
        _loop_option(config)  # a bad --onebit-loop fails at start-up, not in the first test
    configure_base(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"onebit: loop {config.getoption('onebit_loop')}, {base_header(config)}, "
            f"device {config.getoption('onebit_device')}"]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("device") is not None:
        if "onebit_device" in item.fixturenames:
            return  # the fixture decides (and may use an emulation a conftest provides)
        from pytest_onebit import device as device_probe

        reason = device_probe.skip_reason(item.config.getoption("onebit_device"))
        if reason is not None:
            pytest.skip(reason)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise each conformance check over the scenarios it applies to; the tests of a
    check the class declares in `expected_failed_checks` are xfail with its reason."""
    name = getattr(metafunc.function, "onebit_check", None)
    if name is None or "onebit_scenario" not in metafunc.fixturenames:
        return
    from pytest_onebit.checks import CHECKS

    scenarios = [s for s in metafunc.cls.scenarios if CHECKS[name].applies(s)]
    if not scenarios:
        skip = pytest.mark.skip(reason=f"no scenario of {metafunc.cls.__name__} exercises {name}")
        metafunc.parametrize("onebit_scenario", [pytest.param(None, marks=skip)],
                             ids=["no-scenario"])
        return
    from pytest_onebit.conformance import validate_expected

    expected = validate_expected(getattr(metafunc.cls, "expected_failed_checks", None), CHECKS)
    reason = expected.get(name)
    # Not strict: a declared check may fail on some scenarios only (a capped k passes I7 at
    # small k); each passing test is reported as XPASS, each failing one as xfail.
    marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
    metafunc.parametrize("onebit_scenario", [pytest.param(s, marks=marks) for s in scenarios],
                         ids=[s.id for s in scenarios])


# ---------------------------------------------------------------------------------------------
# Fixtures (their names are the public API)


class TraceCache:
    """Each (loop, scenario) is run once per session and shared by all its checks."""

    def __init__(self) -> None:
        self._traces: dict = {}

    def trace(self, run, scenario):
        from pytest_onebit.trace import execute

        key = (run, scenario)
        if key not in self._traces:
            self._traces[key] = execute(run, scenario)
        return self._traces[key]


@pytest.fixture(scope="session")
def onebit_traces() -> TraceCache:
    return TraceCache()


@pytest.fixture(scope="session")
def spec_run(request: pytest.FixtureRequest):
    """The loop under test: onebit.run, or what --onebit-loop names."""
    return _loop_option(request.config)


@pytest.fixture
def toy_base():
    """Factory: `toy_base(vocab_size=64, hidden=16, max_batch_rows=8, rows_shape="prefix",
    seed=0)` makes a fresh deterministic toy base."""
    from pytest_onebit.toy import ToyBase

    return ToyBase


@pytest.fixture
def oracle():
    """Factory: `oracle(base, prompt, n)` runs plain greedy for n tokens and keeps the truth."""
    from pytest_onebit.heads import Oracle

    return Oracle.from_greedy


@pytest.fixture
def perfect_head():
    """Factory: `perfect_head(oracle, flavour="one-pass" | "two-pass")`."""
    from pytest_onebit.heads import perfect_head

    return perfect_head


@pytest.fixture
def garbage_head():
    """Factory: `garbage_head(oracle, flavour)`: drafts that are always wrong."""
    from pytest_onebit.heads import garbage_head

    return garbage_head


@pytest.fixture
def half_head():
    """Factory: `half_head(oracle, flavour)`: right for the first half of its drafts."""
    from pytest_onebit.heads import half_head

    return half_head


@pytest.fixture
def plain_decode():
    """`plain_decode(prompt, max_tokens, **toy_config)`: onebit.greedy on a fresh toy base."""
    from onebit.reference import greedy
    from pytest_onebit.toy import ToyBase

    def decode(prompt, max_tokens, **config):
        return greedy(ToyBase(**config), prompt, max_tokens=max_tokens)

    return decode


@pytest.fixture(scope="session")
def onebit_npu_emulation():
    """None: the NPU backend uses the real pyxrt and $ONEBIT_KERNEL_DIR. A project's conftest
    may override it with an emulation: an object with `pyxrt` (a module-like object) and
    `kernel_dir(shapes)` (a folder of kernels serving those `[out, in]` shapes)."""
    return None


@pytest.fixture(scope="session")
def onebit_device(request: pytest.FixtureRequest, onebit_npu_emulation) -> str:
    """The backend device tests run on: --onebit-device, auto resolved. Skips with the probe's
    reason where it cannot run (an emulated NPU always can)."""
    from pytest_onebit import device as device_probe

    wanted = request.config.getoption("onebit_device")
    if wanted == "npu" and onebit_npu_emulation is not None:
        return "npu"
    name, reason = device_probe.resolve(wanted)
    if name is None:
        pytest.skip(reason)
    return name


@pytest.fixture(scope="session")
def device_model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """family ("qwen3", "qwen3_5") -> a fabricated tiny model (Q4NX), written once."""
    from onebit.models import fabricate_model
    from pytest_onebit.device import FAMILIES

    return {f: fabricate_model(tmp_path_factory.mktemp(f"device-{f}"), f) for f in FAMILIES}


@pytest.fixture
def device_model(onebit_device, onebit_npu_emulation, device_model_dirs):
    """Factory: `device_model(family="qwen3_5", **load_options)`: the fabricated model of that
    family on the device backend, weights resident unless `unpack_per_token=True`."""
    from onebit.models import load_model
    from onebit.models.weights import unpack_per_token_from_env
    from pytest_onebit.device import make_backend

    def build(family: str = "qwen3_5", **options):
        path = device_model_dirs[family]
        per_token = options.get("unpack_per_token")
        resident = not (unpack_per_token_from_env() if per_token is None else per_token)
        backend = make_backend(onebit_device, path, resident=resident,
                               emulation=onebit_npu_emulation)
        return load_model(path, backend=backend, **options)

    return build


@pytest.fixture
def host_model(device_model_dirs):
    """Factory: `host_model(family="qwen3_5", **load_options)`: the same model on the host
    backend, the reference device logits are held to."""
    from onebit.models import load_model

    return lambda family="qwen3_5", **options: load_model(device_model_dirs[family], **options)


@pytest.fixture
def device_base(device_model):
    """The real forward on the selected backend (device tests only): the fabricated Qwen3.5
    hybrid (GDN and attention layers), so a partial accept must roll the recurrent state back
    exactly."""
    return device_model("qwen3_5")
