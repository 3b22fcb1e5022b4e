"""The ggml tensor types onebit reads, their block layouts, and dequantisation to float32.

Every type stores a row as whole blocks of `block` elements in `size` bytes. Values are
rebuilt in float32 with the same operations, in the same order, as ggml's reference
dequantisation (and `gguf.quants`), so a dequantised weight is bit for bit the one llama.cpp's
reference path and transformers' GGUF loader see: the cross-checks then compare forwards, not
rounding.

Block layouts (bytes in order; d, m, dmin are float16; all little-endian):
- Q8_0 (32 in 34): d, 32 int8 q; x = q * d.
- Q4_0 (32 in 18): d, 16 bytes; element j < 16 is the low nibble of byte j, j >= 16 the high
  nibble of byte j - 16; x = (q - 8) * d.
- Q4_1 (32 in 20): d, m, 16 bytes as Q4_0; x = q * d + m.
- Q5_0 (32 in 22): d, qh (u32, bit j is element j's fifth bit), 16 bytes as Q4_0;
  x = (q - 16) * d.
- Q5_1 (32 in 24): d, m, qh, 16 bytes; x = q * d + m.
- Q4_K (256 in 144): d, dmin, 12 bytes of eight 6-bit scales and mins, 128 bytes: four chunks
  of 32 bytes, whose low nibbles are sub-block 2c and high nibbles sub-block 2c + 1;
  x = (d * scale) * q - (dmin * min).
- Q5_K (256 in 176): d, dmin, the 12 scale bytes, qh (32 bytes: bit s of byte l is the fifth
  bit of element l of sub-block s), 128 bytes as Q4_K.
- Q6_K (256 in 210): ql (128), qh (64), 16 int8 scales, d. Two halves of 128: in half h, ql
  bytes 64h..64h+63 give low nibbles to elements 0..63 and high nibbles to 64..127; qh bytes
  32h..32h+31 give 2-bit pairs (shift 0, 2, 4, 6) to elements 0..31, 32..63, 64..95, 96..127;
  x = (d * scale[16ths]) * (q - 32).
"""

from __future__ import annotations

import numpy as np

from onebit.gguf.errors import UnsupportedGGUFError

# ggml type id -> (name, elements per block, bytes per block): the types onebit reads
SUPPORTED: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 30: ("BF16", 1, 2),
    2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
}


def _known_types() -> dict[int, str]:
    """Every type id ggml defines (so an unsupported one is refused by its name)."""
    from gguf import GGMLQuantizationType

    return {int(t): t.name for t in GGMLQuantizationType}


TYPE_NAMES: dict[int, str] = {**_known_types(), **{k: v[0] for k, v in SUPPORTED.items()}}
BY_NAME = {v[0]: k for k, v in SUPPORTED.items()}


def type_layout(type_id: int) -> tuple[int, int]:
    """(elements per block, bytes per block) of a supported type; `UnsupportedGGUFError`
    naming the type otherwise."""
    if type_id not in SUPPORTED:
        name = TYPE_NAMES.get(type_id, f"unknown type {type_id}")
        raise UnsupportedGGUFError(
            f"tensor type {name} is not supported; supported: "
            f"{', '.join(v[0] for v in SUPPORTED.values())}")
    _, block, size = SUPPORTED[type_id]
    return block, size


def tensor_bytes(type_id: int, shape: tuple[int, ...]) -> int:
    """Bytes a tensor of `shape` (numpy order; rows are the last axis) takes in `type_id`."""
    block, size = type_layout(type_id)
    elements = 1
    for d in shape:
        elements *= d
    return elements // block * size


def dequantize(type_id: int, raw: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The float32 values of a tensor of `shape` stored as `raw` (its bytes, uint8)."""
    block, size = type_layout(type_id)
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    name = SUPPORTED[type_id][0]
    if name == "F32":
        out = raw.view("<f4").astype(np.float32)
    elif name == "F16":
        out = raw.view("<f2").astype(np.float32)
    elif name == "BF16":  # the upper half of a float32
        out = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        # a damaged scale may be inf / NaN; the model's finite check refuses it by name
        with np.errstate(invalid="ignore", over="ignore"):
            out = _DECODERS[name](raw.reshape(-1, size))
    return out.reshape(shape)


def _f16(blocks: np.ndarray, at: int) -> np.ndarray:
    """The float16 at byte `at` of each block, as a float32 column."""
    return np.ascontiguousarray(blocks[:, at:at + 2]).view("<f2").astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """16 bytes per block -> 32 codes: the low nibbles first, then the high ones."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def _fifth_bits(blocks: np.ndarray, at: int) -> np.ndarray:
    qh = np.ascontiguousarray(blocks[:, at:at + 4]).view("<u4")
    return ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)


def _q8_0(b: np.ndarray) -> np.ndarray:
    return b[:, 2:].view(np.int8).astype(np.float32) * _f16(b, 0)


def _q4_0(b: np.ndarray) -> np.ndarray:
    return _f16(b, 0) * (_nibbles(b[:, 2:]).astype(np.int8) - 8).astype(np.float32)


def _q4_1(b: np.ndarray) -> np.ndarray:
    return _f16(b, 0) * _nibbles(b[:, 4:]).astype(np.float32) + _f16(b, 2)


def _q5_0(b: np.ndarray) -> np.ndarray:
    q = _nibbles(b[:, 6:]) | (_fifth_bits(b, 2) << 4)
    return _f16(b, 0) * (q.astype(np.int8) - 16).astype(np.float32)


def _q5_1(b: np.ndarray) -> np.ndarray:
    q = _nibbles(b[:, 8:]) | (_fifth_bits(b, 4) << 4)
    return _f16(b, 0) * q.astype(np.float32) + _f16(b, 2)


def k_scales(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The eight 6-bit scales and mins of a Q4_K / Q5_K block's 12 scale bytes: sub-blocks
    0..3 take the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); 4..7 take a nibble of
    bytes 8..11 plus the top 2 bits of bytes 0..3 (scales) or 4..7 (mins)."""
    lo, mid, top = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    scale = np.concatenate([lo & 0x3F, (top & 0x0F) | ((lo >> 6) << 4)], axis=1)
    mins = np.concatenate([mid & 0x3F, (top >> 4) | ((mid >> 6) << 4)], axis=1)
    return scale, mins


def k_codes(qs: np.ndarray) -> np.ndarray:
    """128 bytes -> 8 sub-blocks of 32 codes (chunk c: low nibbles 2c, high nibbles 2c + 1)."""
    chunks = qs.reshape(-1, 4, 1, 32)
    return np.concatenate([chunks & 0x0F, chunks >> 4], axis=2).reshape(-1, 8, 32)


def _q4_k(b: np.ndarray) -> np.ndarray:
    scale, mins = k_scales(b[:, 4:16])
    d = (_f16(b, 0) * scale.astype(np.float32))[:, :, None]
    m = (_f16(b, 2) * mins.astype(np.float32))[:, :, None]
    return (d * k_codes(b[:, 16:]).astype(np.float32) - m).reshape(-1, 256)


def _q5_k(b: np.ndarray) -> np.ndarray:
    scale, mins = k_scales(b[:, 4:16])
    d = (_f16(b, 0) * scale.astype(np.float32))[:, :, None]
    m = (_f16(b, 2) * mins.astype(np.float32))[:, :, None]
    qh = b[:, 16:48]
    high = (qh[:, None, :] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1
    q = k_codes(b[:, 48:]) | (high << 4)
    return (d * q.astype(np.float32) - m).reshape(-1, 256)


def q6_k_parts(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A Q6_K block's codes and scales: int8 `[n, 16, 16]` (each group of 16 elements' codes
    q - 32, in -32..31, element order) and float32 `[n, 16]` (d * scale of each group, a
    float16 times an int8, which float32 holds exactly)."""
    ql = b[:, :128].reshape(-1, 2, 1, 64)
    low = np.concatenate([ql & 0x0F, ql >> 4], axis=2).reshape(-1, 2, 4, 32)
    qh = b[:, 128:192].reshape(-1, 2, 1, 32)
    high = (qh >> np.array([0, 2, 4, 6], dtype=np.uint8)[None, None, :, None]) & 3
    q = ((low | (high << 4)).astype(np.int8) - 32).reshape(-1, 16, 16)
    scales = np.ascontiguousarray(b[:, 192:208]).view(np.int8).astype(np.float32)
    return q, _f16(b, 208) * scales


def _q6_k(b: np.ndarray) -> np.ndarray:
    q, d = q6_k_parts(b)
    return (d[:, :, None] * q.astype(np.float32)).reshape(-1, 256)


_DECODERS = {"Q8_0": _q8_0, "Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1,
             "Q4_K": _q4_k, "Q5_K": _q5_k, "Q6_K": _q6_k}
