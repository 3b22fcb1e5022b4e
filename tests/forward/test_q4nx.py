"""Q4NX blocks: the byte layout of docs/forward.md, both code conventions, bf16 rounding."""

from __future__ import annotations

import numpy as np
import pytest

from onebit.models import q4nx
from onebit.models.errors import Q4NXError


def reference_block(codes, scale_bits, min_bits, signed=False) -> np.ndarray:
    """An independent, loop-by-loop writer of one block, straight from the spec's words."""
    block = bytearray(5120)
    for g in range(8):
        for r in range(32):
            at = 2 * (g * 32 + r)
            block[at : at + 2] = int(scale_bits[r, g]).to_bytes(2, "little")
            block[512 + at : 512 + at + 2] = int(min_bits[r, g]).to_bytes(2, "little")
    for lane in range(2):
        for col in range(256):
            for j in range(8):
                low = int(codes[16 * lane + 2 * j, col]) & 0xF
                high = int(codes[16 * lane + 2 * j + 1, col]) & 0xF
                block[1024 + lane * 2048 + col * 8 + j] = low | (high << 4)
    return np.frombuffer(bytes(block), dtype=np.uint8)


def random_parts(rng, out, inp, signed=False):
    codes = rng.integers(-8, 8, (out, inp)) if signed else rng.integers(0, 16, (out, inp))
    scales = q4nx.round_bf16(rng.uniform(0.01, 2, (out, inp // 32)).astype(np.float32))
    mins = (
        np.zeros((out, inp // 32), np.float32)
        if signed
        else q4nx.round_bf16(rng.uniform(-3, 0, (out, inp // 32)).astype(np.float32))
    )
    return codes, scales, mins


def test_bf16_rounds_to_nearest_even():
    """float32 -> bf16 rounds to nearest with ties to even, keeps inf and NaN, overflows to
    inf, and widening back is exact."""
    x = np.array(
        [1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -2.5, np.inf, -np.inf, 3.4e38, 0.0],
        dtype=np.float32,
    )
    expected = [1.0, 1.0, 1 + 2**-6, 1 + 2**-7, -2.5, np.inf, -np.inf, np.inf, 0.0]
    assert q4nx.round_bf16(x).tolist() == expected
    assert np.isnan(q4nx.round_bf16(np.array([np.nan], np.float32)))[0]
    bits = np.arange(0, 0x7F80, 7, dtype=np.uint16)  # finite positive patterns
    assert np.array_equal(q4nx.f32_to_bf16_bits(q4nx.bf16_bits_to_f32(bits)), bits)


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_block_layout_byte_by_byte(signed):
    """One block packed by `pack` equals the block an independent loop writes from the spec's
    words (scales [g][r], mins, two lanes of 16 rows, byte j = rows 2j | 2j+1 << 4), and
    unpacks to the same codes: a swapped lane, nibble or group order fails here."""
    rng = np.random.default_rng(1)
    codes, scales, mins = random_parts(rng, 32, 256, signed)
    convention = "signed" if signed else "unsigned"
    block = q4nx.pack(codes, scales, mins, convention=convention)
    expected = reference_block(
        codes, q4nx.f32_to_bf16_bits(scales), q4nx.f32_to_bf16_bits(mins), signed
    )
    assert block.shape == (1, 5120)
    assert np.array_equal(block[0], expected)
    back_codes, back_scales, back_mins = q4nx.unpack(block, 32, 256, convention=convention)
    assert np.array_equal(back_codes, codes)
    assert np.array_equal(back_scales, scales) and np.array_equal(back_mins, mins)


def test_single_code_lands_in_its_byte_and_nibble():
    """Row 17, column 5 sits in lane 1, byte j = 0, high nibble: byte 1024 + 2048 + 5*8 = 3112
    holds 0xA0 and nothing else in the code area is set; group 1 / row 3's scale sits at
    bytes 2*(32+3), its min at 512 + 2*(32+3)."""
    codes = np.zeros((32, 256), np.int64)
    codes[17, 5] = 0xA
    scales = np.zeros((32, 8), np.float32)
    mins = np.zeros((32, 8), np.float32)
    scales[3, 1], mins[3, 1] = 1.0, -2.0  # bf16 0x3F80 and 0xC000
    block = q4nx.pack(codes, scales, mins)[0]
    nonzero = {int(i): int(block[i]) for i in np.flatnonzero(block)}
    assert nonzero == {70: 0x80, 71: 0x3F, 512 + 71: 0xC0, 3112: 0xA0}


def test_blocks_are_row_block_major():
    """A 64 x 512 weight is 2 x 2 blocks stored [row block][column block]: the code of row 40,
    column 300 is in block 1*2 + 1 = 3 (row 8 of lane 0, column 44); the grid form is the same
    bytes reshaped."""
    codes = np.zeros((64, 512), np.int64)
    codes[40, 300] = 7
    flat = q4nx.pack(codes, np.ones((64, 16), np.float32))
    grid = q4nx.pack(codes, np.ones((64, 16), np.float32), grid=True)
    assert flat.shape == (4, 5120) and grid.shape == (2, 2, 5120)
    assert np.array_equal(grid.reshape(4, 5120), flat)
    code_area = flat[:, 1024:]
    hits = np.argwhere(code_area)
    assert hits.tolist() == [[3, 44 * 8 + 4]]  # row 8 -> j = 4, low nibble
    assert code_area[3, 44 * 8 + 4] == 7


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
@pytest.mark.parametrize("grid", [False, True], ids=["flat", "grid"])
def test_round_trip_multi_block(signed, grid):
    """pack -> unpack returns the codes, scales and mins exactly for a 96 x 768 weight, and
    dequantize computes `min + scale * code` (signed codes -8..7 in the signed convention)."""
    rng = np.random.default_rng(2)
    convention = "signed" if signed else "unsigned"
    codes, scales, mins = random_parts(rng, 96, 768, signed)
    blocks = q4nx.pack(codes, scales, mins, convention=convention, grid=grid)
    back = q4nx.unpack(blocks, 96, 768, convention=convention)
    for got, want in zip(back, (codes, scales, mins), strict=True):
        assert np.array_equal(got, want)
    w = q4nx.dequantize(blocks, 96, 768, convention=convention, dtype=np.float64)
    expected = np.repeat(mins, 32, axis=1) + np.repeat(scales, 32, axis=1) * codes
    assert np.array_equal(w, expected)


def test_signed_nibbles_are_twos_complement():
    """In the signed convention nibble 0x8 reads -8 and 0xF reads -1; the same bytes read as
    unsigned give 8 and 15 (the convention is a parameter; nothing in the block says it)."""
    codes = np.zeros((32, 256), np.int64)
    codes[0, 0], codes[1, 0] = -8, -1
    block = q4nx.pack(codes, np.ones((32, 8), np.float32), convention="signed")
    assert block[0, 1024] == 0xF8
    assert q4nx.unpack(block, 32, 256, convention="signed")[0][:2, 0].tolist() == [-8, -1]
    assert q4nx.unpack(block, 32, 256, convention="unsigned")[0][:2, 0].tolist() == [8, 15]


@pytest.mark.parametrize("convention", ["unsigned", "signed"])
def test_quantize_error_is_within_half_a_step(convention):
    """Quantising a random weight and dequantising it lands each value within half a scale
    step of the original (plus the bf16 rounding of min and scale)."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((64, 256)).astype(np.float32)
    blocks = q4nx.quantize(w, convention=convention)
    back = q4nx.dequantize(blocks, 64, 256, convention=convention)
    _, scales, _ = q4nx.unpack(blocks, 64, 256, convention=convention)
    step = np.repeat(scales, 32, axis=1)
    slack = 0.02 * np.abs(w).max(axis=1, keepdims=True)  # bf16 rounding of min / scale
    assert np.all(np.abs(back - w) <= step / 2 + slack)
    assert np.abs(back - w).mean() < 0.1
    again = q4nx.quantize(back, convention=convention)
    assert np.allclose(q4nx.dequantize(again, 64, 256, convention=convention), back, atol=1e-2)


def test_shape_and_value_errors():
    """Shapes that do not tile into 32 x 256 blocks, blocks of the wrong shape or dtype, codes
    out of range, and non-zero mins in the signed convention are refused with Q4NXError."""
    ones = np.ones((32, 8), np.float32)
    with pytest.raises(Q4NXError, match="out_features"):
        q4nx.pack(np.zeros((33, 256), np.int64), np.ones((33, 8), np.float32))
    with pytest.raises(Q4NXError, match="in_features"):
        q4nx.quantize(np.zeros((32, 100), np.float32))
    with pytest.raises(Q4NXError, match="scales must have shape"):
        q4nx.pack(np.zeros((32, 256), np.int64), np.ones((32, 4), np.float32))
    with pytest.raises(Q4NXError, match="0..15"):
        q4nx.pack(np.full((32, 256), 16), ones)
    with pytest.raises(Q4NXError, match="-8..7"):
        q4nx.pack(np.full((32, 256), -9), ones, convention="signed")
    with pytest.raises(Q4NXError, match="min = 0"):
        q4nx.pack(np.zeros((32, 256), np.int64), ones, ones, convention="signed")
    with pytest.raises(Q4NXError, match="do not hold"):
        q4nx.unpack(np.zeros((3, 5120), np.uint8), 32, 512)
    with pytest.raises(Q4NXError, match="uint8"):
        q4nx.unpack(np.zeros((1, 5120), np.int16), 32, 256)
    with pytest.raises(Q4NXError, match="convention"):
        q4nx.unpack(np.zeros((1, 5120), np.uint8), 32, 256, convention="gguf")
    with pytest.raises(Q4NXError, match="NaN"):
        q4nx.quantize(np.full((32, 256), np.nan, np.float32))
