"""The device tests (tests/device/) held against the Gemma 4 forward: run with
`pytest -m device --onebit-device=host tests/forward/test_gemma4_device.py`.

The device suite's tests are imported as they are and run here with a `onebit_device_base`
that is the fabricated Gemma 4 on the host backend (the device rig's own is a Qwen3.5). Like
every device test they are marked `device`, so `-m "not device"` leaves them out, and they skip
on any backend but `host` (onebit has no NPU forward yet).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from onebit.models import Gemma4Model, fabricate_model, load_model

pytestmark = pytest.mark.device

_SUITE = Path(__file__).parents[1] / "device" / "test_device_contract.py"
_spec = importlib.util.spec_from_file_location("_onebit_device_contract", _SUITE)
_suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_suite)

# the device suite's tests, collected here against the fixture below
for _name in dir(_suite):
    if _name.startswith("test_"):
        globals()[_name] = getattr(_suite, _name)


@pytest.fixture
def onebit_device_base(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The tiny Gemma 4 (window 8, PLE, shared K/V) on the host backend."""
    if request.config.getoption("onebit_device") != "host":
        pytest.skip("the Gemma 4 device tests run on --onebit-device=host "
                    "(onebit has no NPU forward)")
    model = load_model(fabricate_model(tmp_path_factory.mktemp("host-gemma4"), "gemma4"))
    assert isinstance(model, Gemma4Model)
    return model
