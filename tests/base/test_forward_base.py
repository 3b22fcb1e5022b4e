"""The base contract (B1..B8) on the NumPy forward: Qwen3 and the Qwen3.5 hybrid (GDN and
attention), float32 and float64, with each product kernel (numba's tiled kernel, numpy's
per-row gemv). The forward mutant catalogue (mutants/forward/) runs this file."""

from __future__ import annotations

import functools

import pytest
from matrix import cover

from onebit.models import fabricate_model, load_model
from pytest_onebit import BaseContract

KINDS = ("qwen3", "qwen3_5")
DTYPES = ("float32", "float64")
KERNELS = ("numpy", "numba")
# every (kind, dtype, kernel) in the slow step; README line 2 runs two that cover each value
CONFIGS = cover(KINDS, DTYPES, KERNELS, as_tuple=True)


@pytest.fixture(scope="session")
def forward_factory(tmp_path_factory):
    """(kind, dtype, kernel) -> a factory of fresh tiny quantised models; one factory object
    per configuration, so the stepped truth is made once per session."""
    dirs = {kind: fabricate_model(tmp_path_factory.mktemp(f"base-{kind}"), kind, quantized=True)
            for kind in KINDS}

    @functools.cache
    def factory(kind: str, dtype: str, kernel: str):
        return functools.partial(load_model, dirs[kind], dtype=dtype, kernel=kernel)

    return factory


class TestForwardBase(BaseContract):
    """Every check on every family, precision and kernel."""

    @pytest.fixture(params=CONFIGS)
    def base_factory(self, request, forward_factory):
        kind, dtype, kernel = request.param
        if kernel == "numba":
            pytest.importorskip("numba", reason="the numba kernel needs the `fast` extra")
        return forward_factory(kind, dtype, kernel)
