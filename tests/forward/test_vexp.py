"""The compiled stack's float32 exp (onebit/models/vexp.py): accurate, exact at its edges, the
same bits in a vector lane as alone, and vectorised where the C library's is not."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("numba")

from numba import njit  # noqa: E402

from onebit.models.vexp import HIGHEST, LOWEST, exp_kernel  # noqa: E402


@pytest.fixture(scope="module")
def exp_loop():
    exp32 = exp_kernel()

    @njit(error_model="numpy")
    def run(x, out):
        for j in range(x.shape[0]):
            out[j] = exp32(x[j])

    def call(x):
        x = np.ascontiguousarray(x, np.float32)
        out = np.empty_like(x)
        run(x, out)
        return out

    call.dispatcher = run
    return call


def ulps_off(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    exact = np.exp(x.astype(np.float64))
    return np.abs(got.astype(np.float64) - exact) / np.spacing(exact.astype(np.float32))


def test_within_one_unit_in_the_last_place_over_the_normal_range(exp_loop):
    """Over every result a normal float32 can hold (a dense sweep and random points between
    LOWEST and HIGHEST), exp32 is less than one ulp from the exact value: it always returns
    one of the two floats around it."""
    x = np.concatenate([
        np.linspace(LOWEST, HIGHEST, 2_000_001, dtype=np.float32),
        np.random.default_rng(0).uniform(LOWEST, HIGHEST, 1_000_000).astype(np.float32),
        np.linspace(-1, 1, 200_001, dtype=np.float32),  # softmax's and SiLU's busiest range
    ])
    err = ulps_off(exp_loop(x), x)
    assert err.max() < 1.0, f"{err.max():.3f} ulp at x = {x[err.argmax()]!r}"


def test_edges_are_exact(exp_loop):
    """exp(0) = 1; NaN stays NaN; below LOWEST (results under the smallest normal float)
    gives 0, as does -inf; above HIGHEST gives inf, as does inf; the bounds themselves give
    the finite values exp has there."""
    x = np.array([0, -0.0, np.nan, -np.inf, np.inf, LOWEST, HIGHEST,
                  np.nextafter(LOWEST, np.float32(-np.inf)),
                  np.nextafter(HIGHEST, np.float32(np.inf)), -1e30, 1e30], np.float32)
    got = exp_loop(x)
    assert got[0] == 1 and got[1] == 1
    assert np.isnan(got[2])
    assert got[3] == 0 and got[4] == np.inf
    assert np.isfinite(got[5]) and got[5] > 0 and ulps_off(got[5:6], x[5:6])[0] < 1
    assert np.isfinite(got[6]) and ulps_off(got[6:7], x[6:7])[0] < 1
    assert got[7] == 0 and got[8] == np.inf
    assert got[9] == 0 and got[10] == np.inf


def test_a_lane_gives_the_bits_a_lone_call_gives(exp_loop):
    """An element computed inside the loop's vector body has the bits it has computed alone
    (a one-element loop runs the scalar code): what a row's exps are never depends on how
    many rows, or which neighbours, share the loop, which the base contract's B-checks need."""
    x = np.random.default_rng(1).normal(0, 8, 1003).astype(np.float32)
    together = exp_loop(x)
    alone = np.array([exp_loop(x[i:i + 1])[0] for i in range(x.size)], np.float32)
    assert np.array_equal(together.view(np.int32), alone.view(np.int32))


def test_its_loop_is_vectorised(exp_loop):
    """A loop over exp32 compiles to vector float operations (LLVM's `<n x float>`), where a
    loop over np.exp is a call per element: the reason the module exists."""
    exp_loop(np.zeros(64, np.float32))
    dispatcher = exp_loop.dispatcher
    ir = dispatcher.inspect_llvm(dispatcher.signatures[0])
    assert re.search(r"<\d+ x float>", ir), "the exp32 loop was not vectorised"
