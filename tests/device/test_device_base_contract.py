"""The base contract (B1..B8, docs/base-contract.md) on the device base (`pytest -m device`;
`--onebit-device=host` holds the NumPy forward to it anywhere)."""

from __future__ import annotations

import pytest

from pytest_onebit import BaseContract

pytestmark = pytest.mark.device


class TestDeviceBase(BaseContract):
    """Every base check on fresh device bases: the fabricated Qwen3.5 hybrid, each loaded
    anew on its own backend of the selected kind (host, torch, cuda or npu)."""

    @pytest.fixture
    def base_factory(self, onebit_device_model):
        return lambda: onebit_device_model("qwen3_5")
