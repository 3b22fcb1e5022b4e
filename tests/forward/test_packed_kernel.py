"""The packed Q4NX kernel (onebit/models/q4nx_kernel.py): its value, its order, its batch
invariance, and that a Q4NX model on the numba kernel really reads its weights packed.

The checks K1..K3 are what the kernel mutant catalogue (mutants/kernel/) names:
K1 the product equals the dequantised weight's within float rounding, K2 every row of every
batch size has the one-row bits, K3 the bits are the documented formula's.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from matrix import cover

from onebit.models import fabricate_model, load_model, q4nx, tiny_config
from onebit.models.gemma4_fabricate import tiny_gemma4_config
from onebit.models.qwen3 import LM_HEAD
from onebit.models.weights import expected_shapes

pytest.importorskip("numba")

from onebit.models.q4nx_kernel import PackedWeight, group_sums, packed_rows  # noqa: E402

MAX_ROWS = 16
CONVENTIONS = q4nx.CONVENTIONS


def _fabricated_shapes() -> list[tuple[int, int]]:
    """Every weight shape the fabricators make that tiles into Q4NX blocks."""
    shapes = set()
    for kind in ("qwen3", "qwen3_5"):
        shapes |= set(expected_shapes(tiny_config(kind)).values())
    shapes |= {tuple(s) for s in tiny_gemma4_config().expected_shapes().values()}
    return sorted(s for s in shapes if q4nx.can_quantize(s))


SHAPES = _fabricated_shapes()


def _packed(shape, convention, seed=0):
    rng = np.random.default_rng(seed)
    weight = rng.standard_normal(shape) * 0.05 + rng.standard_normal((shape[0], 1)) * 0.01
    blocks = q4nx.quantize(weight, convention=convention)
    return blocks, PackedWeight.from_blocks(blocks, shape, convention)


def _rows(n_in, dtype, seed=1, n=MAX_ROWS + 3):
    return np.random.default_rng(seed).standard_normal((n, n_in)).astype(dtype)


def test_fabricated_shapes_are_covered():
    """The shape list is not empty and holds the fabricators' projections, so K1 and K2 run
    on what the models multiply."""
    assert (512, 256) in SHAPES and (256, 512) in SHAPES and len(SHAPES) >= 4


@pytest.mark.parametrize("shape, dtype, convention",
                         cover(SHAPES + [(1024, 1024)], [np.float32, np.float64], CONVENTIONS))
def test_K1_matches_the_dequantised_weight(shape, dtype, convention):
    """For 1..16 rows, the packed product equals the float64 product of the float64
    dequantised weight within the dtype's rounding (relative to sum |w| |x|, so a
    wrong nibble, lane, group, scale or min is far outside it); (1024, 1024) runs the
    parallel build."""
    blocks, packed = _packed(shape, convention)
    weight = q4nx.dequantize(blocks, *shape, convention=convention, dtype=np.float64)
    rows = _rows(shape[1], dtype)
    tol = 2e-6 if dtype == np.float32 else 1e-14
    for n in (1, 2, 3, 5, 8, 13, 16):
        got = packed_rows(packed, rows[:n])
        assert got.shape == (n, shape[0]) and got.dtype == dtype
        x = rows[:n].astype(np.float64)
        want = x @ weight.T
        scale = np.abs(x) @ np.abs(weight).T
        assert np.all(np.abs(got - want) <= tol * scale), n


@pytest.mark.parametrize("shape, dtype, convention",
                         cover(SHAPES, [np.float32, np.float64], CONVENTIONS))
def test_K2_every_batch_size_matches_one_row(shape, dtype, convention):
    """For every R in 1..16 and several starting rows, row r of an R-row product has exactly
    the bits of that row alone: the tile a row lands in (8-row, 4, 2 or 1-row) never changes
    its result; and the parallel build gives the serial build's bits."""
    _, packed = _packed(shape, convention, seed=2)
    rows = _rows(shape[1], dtype, seed=3)
    single = np.stack([packed_rows(packed, rows[i : i + 1])[0] for i in range(len(rows))])
    for n_rows in range(1, MAX_ROWS + 1):
        for start in (0, 1, 3):
            batch = packed_rows(packed, rows[start : start + n_rows])
            assert np.array_equal(batch, single[start : start + n_rows]), (n_rows, start)
    assert np.array_equal(packed_rows(packed, rows, parallel=True),
                          packed_rows(packed, rows, parallel=False))


def _fma(a, b, c, dtype):
    """`a * b + c` rounded once to `dtype`, computed exactly with fractions. For float32 the
    exact value must be a float64 (checked), so rounding it to float32 is the one rounding."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    wide = float(exact)  # int / int: correctly rounded to float64
    if dtype == np.float32:
        assert Fraction(wide) == exact, "test premise: the float32 fma is exact in float64"
    return dtype(wide)


def _formula(codes, scales, mins, x, dtype):
    """The module docstring's formula for one (row, output), operation by operation."""
    y = dtype(0)
    for g in range(len(scales)):
        part = x[32 * g : 32 * g + 32]
        sx = part[0]
        for v in part[1:]:
            sx = dtype(sx + v)
        a = dtype(0)
        for c in range(32):
            a = _fma(codes[32 * g + c], part[c], a, dtype)
        y = _fma(scales[g], a, y, dtype)
        y = _fma(mins[g], sx, y, dtype)
    return y


@pytest.mark.parametrize("dtype, convention", cover([np.float32, np.float64], CONVENTIONS))
def test_K3_bits_are_the_documented_formula(dtype, convention):
    """Each (row, output) is, bit for bit, the formula the module docstring states (group by
    group, a chain of fmas over the 32 columns, then scale and min times the group's running
    sum of x), emulated here exactly with fractions; and the group sums are left-to-right."""
    shape = (32, 512)
    blocks, packed = _packed(shape, convention, seed=4)
    codes, scales, mins = q4nx.unpack(blocks, *shape, convention=convention)
    rows = _rows(shape[1], dtype, seed=5, n=3)
    got = packed_rows(packed, rows)
    sums = group_sums(rows)
    for r in range(len(rows)):
        for g in range(shape[1] // 32):
            want = rows[r, 32 * g]
            for v in rows[r, 32 * g + 1 : 32 * g + 32]:
                want = dtype(want + v)
            assert sums[r, g] == want
        for o in (0, 1, 2, 15, 16, 17, 30, 31):
            want = _formula(codes[o], scales[o], mins[o], rows[r], dtype)
            assert got[r, o] == want, (r, o)


def test_packed_weight_refuses_bad_blocks():
    """A PackedWeight is checked when built: the wrong shape or convention is a Q4NXError
    naming it, and the kernel refuses rows of the wrong width or dtype."""
    blocks, packed = _packed((32, 256), "unsigned")
    with pytest.raises(q4nx.Q4NXError, match="do not hold"):
        PackedWeight.from_blocks(blocks, (64, 256), "unsigned")
    with pytest.raises(q4nx.Q4NXError, match="convention"):
        PackedWeight.from_blocks(blocks, (32, 256), "u4")
    with pytest.raises(ValueError, match="do not meet"):
        packed_rows(packed, np.zeros((1, 512), np.float32))
    with pytest.raises(TypeError, match="float32 or float64"):
        packed_rows(packed, np.zeros((1, 256), np.float16))


def test_dequantize_row_is_the_tables_row():
    """`dequantize_row` (the embedding lookup of a packed model) gives, for rows in both lanes,
    both nibbles and several block rows, exactly the row of the whole table's dequantisation."""
    for convention in CONVENTIONS:
        blocks, _ = _packed((96, 512), convention, seed=6)
        table = q4nx.dequantize(blocks, 96, 512, convention=convention)
        for row in (0, 1, 14, 15, 16, 17, 31, 32, 63, 95):
            got = q4nx.dequantize_row(blocks, 96, 512, row, convention=convention)
            assert np.array_equal(got, table[row]), (convention, row)
    with pytest.raises(q4nx.Q4NXError, match="outside"):
        q4nx.dequantize_row(blocks, 96, 512, 96)


@pytest.mark.parametrize("kind", ["qwen3", "qwen3_5"])
def test_a_q4nx_model_reads_its_weights_packed(model_dirs, kind):
    """On the numba kernel every Q4NX matrix a pass multiplies is held as its blocks (4 bits a
    weight plus scales and mins), no float copy of a Q4NX weight is made, and the logits are
    the float-cache kernel's within float32 rounding."""
    model = load_model(model_dirs[kind, "q4nx"], kernel="numba")
    logits = model.step(5, 0)
    held = model.backend._prepared
    assert any(isinstance(h, PackedWeight) for h in held.values())
    for key, handle in held.items():
        name = model.weights.lm_head_name() if key == LM_HEAD else key
        assert isinstance(handle, PackedWeight) == (model.weights.kind(name) == "q4nx"), key
    quantised = [n for n in model.weights.names() if model.weights.kind(n) == "q4nx"]
    assert not any(n in model.weights._cache for n in quantised)
    float_model = load_model(model_dirs[kind, "q4nx"], kernel="numba-float")
    want = float_model.step(5, 0)
    assert np.allclose(logits, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_signed_model_steps_and_verifies_alike(tmp_path):
    """A signed-convention (GGUF Q4_0 style) container on the packed kernel: every verify
    width 1..16 scores each row with stepping's bits."""
    path = fabricate_model(tmp_path / "signed", "qwen3", convention="signed")
    model = load_model(path, kernel="numba", q4nx_convention="signed", max_batch_rows=MAX_ROWS)
    tokens = [(29 * i + 3) % 256 for i in range(MAX_ROWS + 2)]
    stepped = [model.step(t, p) for p, t in enumerate(tokens)]
    for rows in (1, 2, 3, 7, 8, 9, 16):
        model.reset()
        model.step(tokens[0], 0)
        logits = model.verify(tokens[1 : 1 + rows], 1)
        for i in range(rows):
            assert np.array_equal(logits[i], stepped[1 + i]), (rows, i)
