"""Dequantisation of every supported ggml type: equal bit for bit to gguf's own decoder on many
random blocks, and to a scalar decode of one block written here from the block layouts."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from onebit.gguf import SUPPORTED, UnsupportedGGUFError, dequantize
from onebit.gguf.fabricate import encode, reference
from onebit.gguf.types import BY_NAME, type_layout

TYPES = [v[0] for v in SUPPORTED.values()]


@pytest.mark.parametrize("name", TYPES)
def test_matches_gguf_decoder(name):
    """A [6, 512] tensor of random blocks (or floats) decodes to exactly gguf.quants' values."""
    rng = np.random.default_rng(7)
    stored = encode(None, name, (6, 512), rng)
    ours = dequantize(BY_NAME[name], stored.view(np.uint8), (6, 512))
    assert ours.dtype == np.float32
    assert np.array_equal(ours, reference(stored, name, (6, 512)))


def f16(raw: bytes, at: int) -> float:
    return float(np.frombuffer(raw[at:at + 2], dtype="<f2")[0])


def scalar_block(name: str, b: bytes) -> list[float]:
    """One block decoded element by element, straight from ggml's C reference loops (float32
    rounding kept by computing through np.float32)."""
    f = np.float32
    if name == "Q8_0":
        d = f(f16(b, 0))
        return [f(struct.unpack("b", b[2 + j:3 + j])[0]) * d for j in range(32)]
    if name in ("Q4_0", "Q4_1", "Q5_0", "Q5_1"):
        has_min = name.endswith("_1")
        d = f(f16(b, 0))
        m = f(f16(b, 2)) if has_min else f(0)
        at = 4 if has_min else 2
        qh = 0
        if name.startswith("Q5"):
            qh = struct.unpack("<I", b[at:at + 4])[0]
            at += 4
        out = [f(0)] * 32
        for j in range(16):
            lo, hi = b[at + j] & 0x0F, b[at + j] >> 4
            if name.startswith("Q5"):
                lo |= ((qh >> j) & 1) << 4
                hi |= ((qh >> (j + 16)) & 1) << 4
            offset = 0 if has_min else (16 if name.startswith("Q5") else 8)
            for k, q in ((j, lo), (j + 16, hi)):
                out[k] = d * f(q - offset) + m if has_min else d * f(q - offset)
        return out
    if name in ("Q4_K", "Q5_K"):
        d, dmin = f(f16(b, 0)), f(f16(b, 2))
        sc = b[4:16]

        def scale_min(j):
            if j < 4:
                return sc[j] & 63, sc[j + 4] & 63
            return (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4), (sc[j + 4] >> 4) | (
                (sc[j] >> 6) << 4)

        qh, qs = (b[16:48], b[48:]) if name == "Q5_K" else (None, b[16:])
        out = []
        for chunk in range(4):
            for half in range(2):
                s, m = scale_min(2 * chunk + half)
                for l in range(32):  # noqa: E741 (ggml's loop variable)
                    q = (qs[32 * chunk + l] >> (4 * half)) & 0xF
                    if qh is not None:
                        q |= ((qh[l] >> (2 * chunk + half)) & 1) << 4
                    out.append(d * f(s) * f(q) - dmin * f(m))
        return out
    if name == "Q6_K":
        ql, qh, sc, d = b[:128], b[128:192], b[192:208], f(f16(b, 208))
        sc = struct.unpack("16b", sc)
        out = [f(0)] * 256
        for n in range(2):
            for l in range(32):  # noqa: E741
                L, H, S = 64 * n, 32 * n, 8 * n
                is_ = l // 16
                q1 = ((ql[L + l] & 0xF) | (((qh[H + l] >> 0) & 3) << 4)) - 32
                q2 = ((ql[L + l + 32] & 0xF) | (((qh[H + l] >> 2) & 3) << 4)) - 32
                q3 = ((ql[L + l] >> 4) | (((qh[H + l] >> 4) & 3) << 4)) - 32
                q4 = ((ql[L + l + 32] >> 4) | (((qh[H + l] >> 6) & 3) << 4)) - 32
                for k, q, s in ((0, q1, 0), (32, q2, 2), (64, q3, 4), (96, q4, 6)):
                    out[128 * n + k + l] = d * f(sc[S + is_ + s]) * f(q)
        return out
    raise AssertionError(name)


@pytest.mark.parametrize("name", [n for n in TYPES if n.startswith("Q")])
def test_one_block_by_hand(name):
    """The first block of a random tensor decodes to what the C reference's scalar loop gives."""
    block, size = type_layout(BY_NAME[name])
    stored = encode(None, name, (1, block), np.random.default_rng(3)).view(np.uint8)
    ours = dequantize(BY_NAME[name], stored, (block,))
    expected = np.array(scalar_block(name, bytes(stored.reshape(-1)[:size])), dtype=np.float32)
    np.testing.assert_allclose(ours, expected, rtol=2e-7, atol=0)


def test_bf16_and_f16_by_hand():
    """BF16 is the top half of a float32; F16 is IEEE half: both decoded exactly."""
    bf16 = np.array([0x3F80, 0xC000, 0x0000], dtype="<u2").view(np.uint8)
    assert dequantize(BY_NAME["BF16"], bf16, (3,)).tolist() == [1.0, -2.0, 0.0]
    f16s = np.array([0x3C00, 0xB800], dtype="<u2").view(np.uint8)
    assert dequantize(BY_NAME["F16"], f16s, (2,)).tolist() == [1.0, -0.5]


@pytest.mark.parametrize("type_id, named", [(10, "Q2_K"), (16, "IQ2_XXS"), (999, "999")])
def test_unsupported_type_named(type_id, named):
    """A type ggml knows but onebit does not read, or no type at all, is refused by name."""
    with pytest.raises(UnsupportedGGUFError, match=named):
        type_layout(type_id)
