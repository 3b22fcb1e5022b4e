"""The device rig, an opt-in pytest plugin: `pytest -p pytest_onebit.device`.

It adds `--onebit-device`, the `device` marker (a marked test is skipped with the probe's
reason where the backend cannot run) and the fixtures that build a fabricated model on a
device backend: `onebit_device`, `onebit_npu_emulation`, `onebit_device_model`,
`onebit_host_model`, `onebit_device_base`. The probe (`device.probe`) and the logits budget
(`device.budget`) are plain modules. Nothing here is loaded by the main plugin, so a project
that installs onebit and never asks for the rig pays nothing for it.
"""

from __future__ import annotations

import pytest

from pytest_onebit.device.probe import BACKENDS  # standard library only


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("onebit").addoption(
        "--onebit-device",
        default="auto",
        choices=BACKENDS,
        help="the backend device tests run on (default auto: the NPU if its probe passes, "
        "else CUDA)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "device: needs an accelerator; skipped with the probe's reason where there is none",
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"onebit device rig: {config.getoption('onebit_device')}"]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("device") is not None:
        if "onebit_device" in item.fixturenames:
            return  # the fixture decides (and may use an emulation a conftest provides)
        from pytest_onebit.device import probe

        reason = probe.skip_reason(item.config.getoption("onebit_device"))
        if reason is not None:
            pytest.skip(reason)


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
    from pytest_onebit.device import probe

    wanted = request.config.getoption("onebit_device")
    if wanted == "npu" and onebit_npu_emulation is not None:
        return "npu"
    name, reason = probe.resolve(wanted)
    if name is None:
        pytest.skip(reason)
    return name


@pytest.fixture(scope="session")
def onebit_device_model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """family ("qwen3", "qwen3_5") -> a fabricated tiny model (Q4NX), written once."""
    from onebit.models import fabricate_model
    from pytest_onebit.device.probe import FAMILIES

    return {f: fabricate_model(tmp_path_factory.mktemp(f"device-{f}"), f) for f in FAMILIES}


@pytest.fixture
def onebit_device_model(onebit_device, onebit_npu_emulation, onebit_device_model_dirs):
    """Factory: `onebit_device_model(family="qwen3_5", **load_options)`: the fabricated model
    of that family on the device backend, weights resident unless `unpack_per_token=True`."""
    from onebit.models import load_model
    from onebit.models.weights import unpack_per_token_from_env
    from pytest_onebit.device.probe import make_backend

    def build(family: str = "qwen3_5", **options):
        path = onebit_device_model_dirs[family]
        per_token = options.get("unpack_per_token")
        resident = not (unpack_per_token_from_env() if per_token is None else per_token)
        backend = make_backend(onebit_device, path, resident=resident,
                               emulation=onebit_npu_emulation)
        return load_model(path, backend=backend, **options)

    return build


@pytest.fixture
def onebit_host_model(onebit_device_model_dirs):
    """Factory: `onebit_host_model(family="qwen3_5", **load_options)`: the same model on the
    host backend, the reference device logits are held to."""
    from onebit.models import load_model

    # the float reference by name (load_model's default is the integer kernel)
    return lambda family="qwen3_5", **options: load_model(onebit_device_model_dirs[family],
                                                          **{"kernel": "auto", **options})


@pytest.fixture
def onebit_device_base(onebit_device_model):
    """The real forward on the selected backend (device tests only): the fabricated Qwen3.5
    hybrid (GDN and attention layers), so a partial accept must roll the recurrent state back
    exactly."""
    return onebit_device_model("qwen3_5")
