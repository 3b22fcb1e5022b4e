"""The base contract (B1..B6, docs/base-contract.md) on the device base (`pytest -m device`;
`--onebit-device=host` holds the NumPy forward to it anywhere)."""

from __future__ import annotations

import pytest

from pytest_onebit import BaseContract

pytestmark = pytest.mark.device


class TestDeviceBase(BaseContract):
    """Every base check on fresh bases built like the device base: the same weights, the same
    kernel and batch bound."""

    @pytest.fixture
    def base_factory(self, device_base):
        from onebit.models import Qwen3Model

        if not isinstance(device_base, Qwen3Model):
            pytest.skip(f"no factory of fresh {type(device_base).__name__} bases yet")

        def factory() -> Qwen3Model:
            return Qwen3Model(device_base.config, device_base.weights,
                              max_batch_rows=device_base.max_batch_rows(),
                              kernel=device_base.kernel)

        return factory
