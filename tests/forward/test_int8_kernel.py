"""The integer kernel (onebit/models/int8_kernel.py) on fabricated ggml blocks: each row's
result is independent of the batch, bit for bit, and within the stated error bound of the float
path (the dequantised weight times the unquantised row).

Its checks carry ids, which the `int8` mutant catalogue (mutants/int8) credits: Q1 the
documented formula, bit for bit; Q2 a row's bits whatever the batch; Q3 the lanes forms agree;
Q4 the quantiser is the scheme; Q5 the error bound against the float path."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from onebit.models import blocks, int8_kernel  # noqa: E402
from onebit.models.errors import ModelFileError  # noqa: E402

KINDS = tuple(blocks.KINDS)
# Each (kind, form, parallel) is a kernel of its own to compile, 6-18 s on two cores. README
# line 2 checks the kernels a user's SmolLM2 runs (its layers are q4_1, its embedding q8_0), in
# the lane form this CPU uses: every batch and lane-form check on q4_1 (against the portable
# form), the formula and the error bound on both kinds. The rest (q4_0, and the forms this CPU
# does not choose) runs in the slow step; .ci/run runs both.
LINE2_KINDS = [pytest.param(k, marks=() if k == "q4_1" else pytest.mark.slow) for k in KINDS]
SMOLLM2_KINDS = [pytest.param(k, marks=() if k in ("q4_1", "q8_0") else pytest.mark.slow)
                 for k in KINDS]
# the formula check also runs q4_1f and q8_16f (Gemma 3's Q4_K and Q6_K layers) in line 2: their
# float32 scales, and q8_16f's two a block, are where their kernels differ from q4_1's and q8_0's
FORMULA_KINDS = [pytest.param(k, marks=() if k in ("q4_1", "q8_0", "q4_1f", "q8_16f")
                              else pytest.mark.slow) for k in KINDS]
LINE2_FORMS = [pytest.param(f, marks=() if f == int8_kernel.lanes_form() else pytest.mark.slow)
               for f in ("vnni", "vnni512")]


def random_blocks(kind: str, out: int, n_in: int, seed: int = 0) -> np.ndarray:
    """uint8 rows of `kind` blocks: random codes, small random float16 scale (and min), or
    float32 ones for q4_1f, with every mantissa bit in use (no float16 could hold them)."""
    rng = np.random.default_rng(seed)
    size, head = blocks.KINDS[kind][1:]
    nb = n_in // blocks.BLOCK
    raw = rng.integers(0, 256, size=(out, nb, size), dtype=np.uint8)
    scale_type = np.float32 if kind in blocks.FLOAT_SCALES else np.float16
    width = np.dtype(scale_type).itemsize
    for at in range(0, head, width):
        scale = (rng.standard_normal((out, nb)) * 0.02).astype(scale_type)
        raw[:, :, at:at + width] = scale.view(np.uint8).reshape(out, nb, width)
    return raw.reshape(out, -1)


@pytest.mark.parametrize("kind", LINE2_KINDS)
@pytest.mark.parametrize("parallel", [False, True])
def test_Q2_rows_independent_of_batch(kind, parallel):
    """For 1..16 rows, every row's output equals, bit for bit, that row's output in the
    16-row product (and in a 1-row product): the batch never changes a row's bits."""
    out, n_in = 72, 320
    weight = blocks.BlockWeight.from_stored(random_blocks(kind, out, n_in), kind, (out, n_in))
    rows = np.random.default_rng(1).standard_normal((16, n_in)).astype(np.float32)
    full = int8_kernel.block_rows(weight, rows, parallel=parallel)
    for count in range(1, 17):
        got = int8_kernel.block_rows(weight, rows[:count], parallel=parallel)
        assert np.array_equal(got, full[:count]), count
    for r in range(16):
        assert np.array_equal(int8_kernel.block_rows(weight, rows[r:r + 1]), full[r:r + 1])


@pytest.mark.parametrize("kind", SMOLLM2_KINDS)
@pytest.mark.parametrize("n_in", [32, 576, 1536])
def test_Q5_within_bound_of_float_path(kind, n_in):
    """Against the float path in float64, each output's error is within `error_bound` (the
    activation rounding per block plus float32 rounding growing with n_in), and the bound is
    not vacuous: the worst error uses a real part of it."""
    out = 64
    raw = random_blocks(kind, out, n_in, seed=n_in)
    weight = blocks.BlockWeight.from_stored(raw, kind, (out, n_in))
    dense = blocks.dequantize(raw, kind, (out, n_in))
    rows = np.random.default_rng(2).standard_normal((5, n_in)).astype(np.float32)
    got = int8_kernel.block_rows(weight, rows)
    want = rows.astype(np.float64) @ dense.astype(np.float64).T
    bound = int8_kernel.error_bound(dense, rows)
    error = np.abs(got - want)
    assert (error <= bound).all(), float((error / bound).max())
    assert (error / bound).max() > 0.02


def test_blocks_too_small_to_scale_stay_within_bound():
    """A block whose largest element is below what float32 can scale by 127 / amax (about
    3.7e-37) goes in as zeros; the bound counts what is dropped, so a row made only of such
    blocks, or mixing them with ordinary ones, is still within it (and exactly 0 alone)."""
    out, n_in = 16, 96
    raw = random_blocks("q4_1", out, n_in, seed=8)
    weight = blocks.BlockWeight.from_stored(raw, "q4_1", (out, n_in))
    dense = blocks.dequantize(raw, "q4_1", (out, n_in))
    rows = np.random.default_rng(9).standard_normal((2, n_in)).astype(np.float32)
    rows[0] *= np.float32(1e-38)
    rows[1, :32] *= np.float32(1e-38)
    got = int8_kernel.block_rows(weight, rows)
    want = rows.astype(np.float64) @ dense.astype(np.float64).T
    assert not got[0].any()
    assert (np.abs(got - want) <= int8_kernel.error_bound(dense, rows)).all()


def test_exact_when_rows_are_on_the_grid():
    """Rows whose blocks are integers with max |x| = 127 quantise exactly (dx = 1), so the
    q8_0 product equals the float product exactly: the integer sums lose nothing."""
    out, n_in = 8, 64
    rng = np.random.default_rng(3)
    raw = random_blocks("q8_0", out, n_in)
    raw.reshape(out, -1, 34)[:, :, 0:2] = np.array([0.5], np.float16).view(np.uint8)  # d = 0.5
    rows = rng.integers(-127, 128, size=(3, n_in)).astype(np.float32)
    rows[:, ::32] = 127
    got = int8_kernel.block_rows(blocks.BlockWeight.from_stored(raw, "q8_0", (out, n_in)), rows)
    want = rows.astype(np.float64) @ blocks.dequantize(raw, "q8_0", (out, n_in)).T
    assert np.array_equal(got, want)


def test_quantised_rows_follow_the_scheme():
    """An activation block is scaled by 127 / max|x| and rounded: its largest element maps to
    +-127, dx = max|x| / 127, sx = dx * sum(q); an all-zero block gives q = 0, dx = 0."""
    x = np.zeros((1, 64), np.float32)
    x[0, :32] = np.linspace(-2.0, 1.0, 32, dtype=np.float32)
    q, dx, sx = int8_kernel.quantize_rows(x)
    assert q[0] == -127 and dx[0, 0] == np.float32(2.0) / np.float32(127)
    assert np.array_equal(q[:32], np.rint(x[0, :32] * np.float32(127 / 2.0)).astype(np.int8))
    assert sx[0, 0] == dx[0, 0] * np.float32(q[:32].astype(np.int64).sum())
    assert not q[32:].any() and dx[0, 1] == 0 and sx[0, 1] == 0


def _scheme(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The activation scheme of int8_kernel.py, element by element in float32 (NumPy)."""
    blocks_ = np.asarray(x, np.float32).reshape(-1, 32)
    amax = np.abs(blocks_).max(axis=1)
    with np.errstate(divide="ignore", over="ignore"):
        scale = np.float32(127) / amax
    usable = (amax > 0) & np.isfinite(scale)
    inv = np.where(usable, scale, np.float32(0)).astype(np.float32)
    d = np.where(usable, amax / np.float32(127), np.float32(0)).astype(np.float32)
    q = np.clip(np.rint(blocks_ * inv[:, None]), -127, 127).astype(np.int8)
    return q.reshape(-1), d, d * q.astype(np.int64).sum(axis=1).astype(np.float32)


def test_Q4_quantiser_gives_the_scalar_schemes_bits():
    """The quantiser (a block at a time in vector registers) gives, bit for bit, the scheme
    computed element by element: on random rows of every magnitude, an all-zero block,
    exact halves (rint rounds them to even: 0.5 -> 0, 2.5 -> 2, -1.5 -> -2), negative zeros,
    subnormals (too small to scale: zeros, dx = 0) and the largest float32s."""
    rng = np.random.default_rng(11)
    rows = (rng.standard_normal((6, 256)) * np.float32(10.0) ** rng.integers(-30, 30, (6, 1))
            ).astype(np.float32)
    rows[0, :32] = 0
    rows[1, :32] = np.arange(32) - np.float32(15.5)  # halves on a grid where amax maps to 127
    rows[1, 31] = 127
    rows[2, :32] = -0.0
    rows[2, 5] = 1.0
    rows[3, :32] = np.float32(1e-45) * np.arange(32)  # subnormals
    rows[4, :32] = np.finfo(np.float32).max * np.linspace(-1, 1, 32, dtype=np.float32)
    q, dx, sx = int8_kernel.quantize_rows(rows)
    want_q, want_dx, want_sx = _scheme(rows)
    assert np.array_equal(q, want_q)
    assert np.array_equal(dx.reshape(-1).view(np.uint32), want_dx.view(np.uint32))
    assert np.array_equal(sx.reshape(-1).view(np.uint32), want_sx.view(np.uint32))
    assert list(q[256:256 + 4]) == [-16, -14, -14, -12]  # -15.5, -14.5, ... to even
    assert not q[3 * 256:3 * 256 + 32].any() and dx[3, 0] == 0  # subnormals: as zeros


def test_bad_blocks_refused_by_name():
    """A NaN scale, or blocks of the wrong shape, end in a ModelFileError naming the tensor."""
    raw = random_blocks("q4_1", 4, 64)
    raw.reshape(4, -1, 20)[2, 1, 2:4] = np.array([np.nan], np.float16).view(np.uint8)
    with pytest.raises(ModelFileError, match="'w'.*block 1 of row 2"):
        blocks.check_finite("w", raw, "q4_1", np.dtype(np.float32), "f.gguf")
    with pytest.raises(ModelFileError, match="'w'.*needs uint8"):
        blocks.check_shape("w", raw[:, :-1], "q4_1", (4, 64), "f.gguf")
    with pytest.raises(ValueError, match=r"\(3, 96\)"):
        int8_kernel.block_rows(blocks.BlockWeight.from_stored(raw, "q4_1", (4, 64)),
                               np.zeros((3, 96), np.float32))


def _f32(value) -> np.float32:
    return np.float32(float(value))  # an exact Fraction rounds once, to nearest even


def _formula(weight: blocks.BlockWeight, row: np.ndarray, o: int) -> np.float32:
    """The module docstring's formula for one (row, output), written out independently of the
    kernel: an exact integer per block, fma as an exact product-sum rounded once (Fractions),
    the blocks in order, q4_1's min term in a chain of its own, then their sum."""
    from fractions import Fraction

    def fma(a, b, c):
        return _f32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))

    xq, dx, sx = int8_kernel.quantize_rows(row[None])
    f16 = int8_kernel.f16_table()

    def table(bits):  # a float16 bit pattern's value; q4_1f's scales are float32 values
        return bits if weight.kind in blocks.FLOAT_SCALES else f16[bits]

    nb = weight.shape[1] // 32
    acc = m = np.float32(0)
    for b in range(nb):
        if weight.kind in blocks.HALF_SCALES:  # each half of 16 its own sum and scale
            for h in range(2):
                at = b * 32 + h * 16
                c = weight.codes[o, at:at + 16].astype(np.int64)
                v = int((c * xq[at:at + 16].astype(np.int64)).sum())
                acc = fma(v, np.float32(table(weight.d[o, 2 * b + h]) * dx[0, b]), acc)
            continue
        if weight.kind == "q8_0":
            c = weight.codes[o, b * 32:(b + 1) * 32].astype(np.int64)
        else:
            nib = weight.codes[o, b * 16:(b + 1) * 16].astype(np.int64)
            c = np.concatenate([nib & 15, nib >> 4]) - (8 if weight.kind == "q4_0" else 0)
        v = int((c * xq[b * 32:(b + 1) * 32].astype(np.int64)).sum())
        acc = fma(v, np.float32(table(weight.d[o, b]) * dx[0, b]), acc)
        if weight.kind in ("q4_1", "q4_1f"):
            m = fma(table(weight.m[o, b]), sx[0, b], m)
    return np.float32(acc + m)


@pytest.mark.parametrize("kind", FORMULA_KINDS)
def test_Q1_kernel_computes_the_documented_formula(kind):
    """Every output equals, bit for bit, the module docstring's formula computed independently
    (an exact integer per block, fma rounded once, the blocks in order, q4_1's min term apart):
    on 3 and 19 blocks with the extreme codes present, for 37 outputs (two whole groups of 16,
    whose codes the kernel reads interleaved, and 5 past them, which it reads one by one)."""
    for n_in in (96, 608):
        _check_formula(kind, n_in)


def _check_formula(kind: str, n_in: int) -> None:
    out = 37
    raw = random_blocks(kind, out, n_in, seed=5)
    weight = blocks.BlockWeight.from_stored(raw, kind, (out, n_in))
    for o in (0, 33):  # in a group and past the groups
        if kind in blocks.BYTE_CODES:
            weight.codes[o, :32] = -128  # the one code whose magnitude is 128
            weight.codes[o + 1, :32] = 127
        else:
            weight.codes[o, :16] = 0x00
            weight.codes[o + 1, :16] = 0xFF
    rows = np.random.default_rng(3).standard_normal((2, n_in)).astype(np.float32)
    got = int8_kernel.block_rows(weight, rows)
    for r in range(2):
        for o in range(out):
            assert got[r, o] == _formula(weight, rows[r], o), (r, o)


@pytest.mark.parametrize("kind", LINE2_KINDS)
@pytest.mark.parametrize("form", LINE2_FORMS)
def test_Q3_lane_forms_agree_bit_for_bit(kind, form):
    """The VNNI lanes (two 256-bit `vpdpbusd` a group's four products, or one 512-bit one) give
    the portable lanes' bits, at 1 to 15 rows (tiles of 8 rows and every smaller size), 19
    blocks and 41 outputs (two whole groups and 9 outputs past them), serial and split over
    threads; skipped where the CPU lacks that instruction."""
    if not int8_kernel.host_has_vnni(wide=form == "vnni512"):
        pytest.skip(f"this CPU cannot run the {form} lanes; only the portable form runs here")
    out, n_in = 41, 608  # 19 blocks: the last one is an odd block out
    weight = blocks.BlockWeight.from_stored(random_blocks(kind, out, n_in, seed=9), kind,
                                            (out, n_in))
    rows = np.random.default_rng(4).standard_normal((15, n_in)).astype(np.float32)
    rows[0, :32] = 0  # an all-zero block
    for count in (1, 2, 3, 4, 5, 6, 7, 8, 9, 15):
        portable = int8_kernel.block_rows(weight, rows[:count], form="portable")
        for parallel in (False, True):
            fast = int8_kernel.block_rows(weight, rows[:count], form=form, parallel=parallel)
            assert np.array_equal(fast, portable), (count, parallel)


def test_lanes_form_follows_the_environment(monkeypatch):
    """ONEBIT_INT8_LANES picks a lesser form (never one the CPU lacks), and a name it does not
    know is refused with the accepted names."""
    monkeypatch.setenv(int8_kernel.LANES_ENV, "portable")
    assert int8_kernel.lanes_form() == "portable"
    monkeypatch.setenv(int8_kernel.LANES_ENV, "vnni")
    assert int8_kernel.lanes_form() == ("vnni" if int8_kernel.host_has_vnni() else "portable")
    monkeypatch.setenv(int8_kernel.LANES_ENV, "avx9000")
    with pytest.raises(ValueError, match="vnni512"):
        int8_kernel.lanes_form()
