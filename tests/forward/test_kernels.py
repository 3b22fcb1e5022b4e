"""The tiled numba kernel: exact batch invariance, agreement with numpy, and its edges."""

from __future__ import annotations

import numpy as np
import pytest
from matrix import cover

from onebit.models import kernels

pytest.importorskip("numba")

# Odd sizes on purpose: outputs not a multiple of the tile (3) or of the parallel block (24),
# inputs not a multiple of the vector (16 float32 lanes, 8 float64) and some smaller than one
# vector; (1030, 1021) is over PARALLEL_MIN_WEIGHTS, so it runs the parallel build.
SHAPES = [(1, 1), (2, 7), (5, 16), (13, 33), (37, 77), (96, 256), (50, 1024), (1030, 1021)]
DTYPES = [np.float32, np.float64]
MAX_ROWS = 16


def _data(shape, dtype, seed=0):
    """A random weight, read-only as the kernel is always handed one (kernels.read_only: one
    compiled signature), and MAX_ROWS + 3 random rows."""
    rng = np.random.default_rng(seed)
    weight = kernels.read_only(rng.standard_normal(shape).astype(dtype))
    rows = rng.standard_normal((MAX_ROWS + 3, shape[1])).astype(dtype)
    return weight, rows


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_every_batch_size_matches_one_row(shape, dtype):
    """For every R in 1..16 and several starting rows, row r of an R-row product has exactly
    the bits of the 1-row product of that row: the tile a row lands in (8-row, 4, 2 or 1-row
    remainder tiles) never changes its result."""
    weight, rows = _data(shape, dtype)
    single = np.stack([kernels.numba_rows(weight, rows[i : i + 1])[0] for i in range(len(rows))])
    for n_rows in range(1, MAX_ROWS + 1):
        for start in (0, 1, 3):
            batch = kernels.numba_rows(weight, rows[start : start + n_rows])
            assert batch.shape == (n_rows, shape[0]) and batch.dtype == dtype
            assert np.array_equal(batch, single[start : start + n_rows]), (n_rows, start)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_agrees_with_numpy(shape, dtype):
    """The kernel computes `W @ x` for each row: within float rounding of numpy's product."""
    weight, rows = _data(shape, dtype, seed=1)
    got = kernels.numba_rows(weight, rows[:MAX_ROWS])
    want = rows[:MAX_ROWS].astype(np.float64) @ weight.T.astype(np.float64)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    assert np.allclose(got, want, rtol=tol, atol=tol * np.sqrt(shape[1]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_parallel_and_serial_builds_agree_bitwise(dtype):
    """Splitting the outputs among threads changes no (row, output) sum: the parallel and the
    serial build give the same bits, so the size threshold between them cannot matter."""
    weight, rows = _data((101, 70), dtype, seed=2)
    outs = []
    for parallel in (False, True):
        out = np.empty((9, weight.shape[0]), dtype=dtype)
        kernels._tiled_kernel(parallel)(weight, rows[:9], out)
        outs.append(out)
    assert np.array_equal(outs[0], outs[1])


@pytest.mark.parametrize("shape, dtype", cover([(7, 33), (50, 1024), (101, 70)], DTYPES))
def test_prefetch_hints_change_no_bits(shape, dtype):
    """The prefetching build (what the model runs) and the build without hints give the same
    bits for every R, and each R's rows are the 1-row product's."""
    weight, rows = _data(shape, dtype, seed=3)
    for n_rows in range(1, MAX_ROWS + 1):
        outs = []
        for prefetch in (False, True):
            out = np.empty((n_rows, shape[0]), dtype=dtype)
            kernels._tiled_kernel(False, prefetch)(weight, rows[:n_rows], out)
            outs.append(out)
        assert np.array_equal(outs[0], outs[1]), n_rows
        one = np.empty((1, shape[0]), dtype=dtype)
        kernels._tiled_kernel(False, True)(weight, rows[n_rows - 1 : n_rows], one)
        assert np.array_equal(outs[1][-1], one[0]), n_rows


def _formula(x: np.ndarray, lanes: int) -> np.floating:
    """The documented order for a weight of ones (where fma(1, x, acc) is one rounded add):
    lane accumulators over whole vectors, a halving tree over the lanes, then the tail."""
    n_main = len(x) - len(x) % lanes
    acc = np.zeros(lanes, dtype=x.dtype)
    for i in range(0, n_main, lanes):
        acc = acc + x[i : i + lanes]
    while len(acc) > 1:
        half = len(acc) // 2
        acc = acc[:half] + acc[half:]
    total = acc[0]
    for j in range(n_main, len(x)):
        total = total + x[j]
    return total


@pytest.mark.parametrize("dtype", DTYPES)
def test_order_is_the_documented_formula(dtype):
    """Each (row, output) is summed in the order the module docstring states, bit for bit
    (emulated here in numpy for a weight of ones), for inputs with and without a tail; the
    order is fixed by the kernel's IR, not by how LLVM vectorises it."""
    lanes = kernels.VECTOR_BYTES // np.dtype(dtype).itemsize
    rng = np.random.default_rng(5)
    for n_in in (lanes - 1, lanes, 5 * lanes + 7, 64 * lanes + 3):
        rows = rng.standard_normal((4, n_in)) * 10.0 ** rng.integers(-4, 5, (4, n_in))
        rows = rows.astype(dtype)
        got = kernels.numba_rows(np.ones((3, n_in), dtype), rows)
        for r in range(4):
            want = _formula(rows[r], lanes)
            assert np.all(got[r] == want), (n_in, r)


def test_non_contiguous_inputs():
    """Non-contiguous weights and rows give the same bits as their contiguous copies."""
    weight, rows = _data((40, 50), np.float32, seed=3)
    strided_w = np.asfortranarray(weight)
    strided_x = np.asfortranarray(rows[:5])
    assert np.array_equal(
        kernels.numba_rows(strided_w, strided_x), kernels.numba_rows(weight, rows[:5])
    )


def test_choose_names_the_tiled_kernel():
    """`choose("numba")` (and "auto" with numba installed) is the tiled kernel."""
    assert kernels.choose("numba") == ("numba", kernels.numba_rows)
    assert kernels.choose("auto") == ("numba", kernels.numba_rows)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_machines_tile_gives_the_same_bits(dtype):
    """The tile is chosen by the host's vector registers (8 x 3 for AVX-512, 2 x 2 for AVX2),
    so it must change speed only: both tiles, on every R from 1 to MAX_ROWS, give bit for bit
    the host tile's result, and that is each row's 1-row product. A model's text is then the
    same on either machine."""
    weight, rows = _data((101, 70), dtype, seed=5)
    for n_rows in range(1, MAX_ROWS + 1):
        results = []
        for tile in (*kernels.TILES.values(), None):
            out = np.empty((n_rows, weight.shape[0]), dtype=dtype)
            kernels._tiled_kernel(False, True, tile)(weight, rows[:n_rows], out)
            results.append(out)
        one = np.empty((1, weight.shape[0]), dtype=dtype)
        kernels._tiled_kernel(False, True)(weight, rows[n_rows - 1 : n_rows], one)
        assert all(np.array_equal(results[0], r) for r in results[1:]), n_rows
        assert np.array_equal(results[-1][-1], one[0]), n_rows


def test_a_tile_that_cannot_cover_the_rows_is_refused():
    """The remainder rows run by halving tiles, so a row count that is not a power of two
    would leave rows uncomputed: such a tile is refused by name before anything compiles."""
    with pytest.raises(ValueError, match=r"power-of-two row count.*\(3, 2\)"):
        kernels._kernel_source(True, (3, 2))


def test_writeable_and_read_only_weights_share_one_compiled_kernel():
    """numba_rows hands the kernel a read-only view of a writeable weight, so a weight made in
    memory runs the signature a file-mapped one does (one compile, not two) and gives the same
    bits; the caller's array stays writeable."""
    rng = np.random.default_rng(5)
    weight = rng.standard_normal((16, 64)).astype(np.float32)
    rows = rng.standard_normal((3, 64)).astype(np.float32)
    got = kernels.numba_rows(weight, rows)
    assert weight.flags.writeable
    assert np.array_equal(got, kernels.numba_rows(kernels.read_only(weight.copy()), rows))
    signatures = kernels._tiled_kernel(False).signatures
    assert signatures and all(not sig[0].mutable for sig in signatures), signatures
