"""Weights kept in ggml's blocks of 32: the stored kinds "q8_0", "q4_0", "q4_1", "q4_1f" and
"q8_16f".

A GGUF weight of one of these types can be kept as the file stores it instead of being
dequantised at load (`read_gguf(path, keep_blocks=True)`, which `load_gguf` asks for when the
kernel is "int8"). Its `Stored.data` is then the raw bytes, uint8 `[out, in / 32 * size]`: each
row of the weight is its run of blocks, in the file's order (llama's q/k rows already put back
in HF order, a row permutation that never splits a block).

Block layouts (little-endian; d and m are float16):
- q8_0: 34 bytes: d, 32 int8 codes q;          w = d * q
- q4_0: 18 bytes: d, 16 bytes of nibbles;      w = d * (q - 8)
- q4_1: 20 bytes: d, m, 16 bytes of nibbles;   w = d * q + m
- q4_1f: 24 bytes: d, m as float32, 16 bytes of nibbles; w = d * q + m (not a ggml type: a
  Q4_K sub-block, whose scale and min are a float16 times a 6-bit integer, which float16
  cannot always hold and float32 always can; `q4_k_as_q4_1f`)
- q8_16f: 40 bytes: d0, d1 as float32, 32 int8 codes q; w = d0 * q for elements 0..15 and
  d1 * q for 16..31 (not a ggml type: two Q6_K groups of 16, each with its own scale, a
  float16 times an int8; `q6_k_as_q8_16f`)
where element j < 16 of a block is the low nibble of byte j and element j >= 16 the high
nibble of byte j - 16.

Everything that is not the integer kernel reads these weights in float: `dequantize` is
onebit.gguf.types' decoder (the dequantise-at-load path's), so the float cache of a block weight
is bit for bit the weight the float path loads. `BlockWeight` is the form the integer kernel
(int8_kernel.py) reads: the codes and the float16 scale bits split into contiguous arrays, the
same bytes as the file (4.5 bits a weight for q4_0, 5 for q4_1, 8.5 for q8_0; 6 for q4_1f and
10 for q8_16f, whose scales are float32).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from onebit.models.errors import ModelFileError

BLOCK = 32
# kind -> (ggml type id, bytes per block, bytes of scales before the codes)
KINDS: dict[str, tuple[int, int, int]] = {"q8_0": (8, 34, 2), "q4_0": (2, 18, 2),
                                          "q4_1": (3, 20, 4), "q4_1f": (-1, 24, 8),
                                          "q8_16f": (-1, 40, 8)}
# the kinds whose d (and m) are float32 rather than float16
FLOAT_SCALES = frozenset({"q4_1f", "q8_16f"})
# the kinds with a scale per 16 elements (two a block of 32) rather than one per block
HALF_SCALES = frozenset({"q8_16f"})
# the kinds whose codes are 8-bit (the rest hold nibbles)
BYTE_CODES = frozenset({"q8_0", "q8_16f"})
# ggml type name -> stored kind: the types kept in their blocks
FROM_GGML = {"Q8_0": "q8_0", "Q4_0": "q4_0", "Q4_1": "q4_1"}
# ggml type name -> stored kind: types the integer kernel reads after a change of layout that
# keeps every value (Q5_0's codes are Q8_0 codes under the same scale; a Q4_K sub-block is a
# q4_1f block)
CONVERTED = {"Q5_0": "q8_0", "Q4_K": "q4_1f", "Q6_K": "q8_16f"}


def is_block_kind(kind: str) -> bool:
    return kind in KINDS


def q5_0_as_q8_0(raw: np.ndarray, out: int, n_in: int) -> np.ndarray:
    """Q5_0 rows (22-byte blocks: d, a u32 of fifth bits, 16 bytes of nibbles) as Q8_0 rows
    (34-byte blocks), value for value: a Q5_0 element is d * (q - 16) with q its five-bit code,
    which is the Q8_0 code q - 16 (in -16..15) under the same float16 d. So the integer kernel
    reads a Q5_0 weight at 8.5 bits a weight instead of the float kernel at 32, and the float
    form of the result is the file's dequantised values bit for bit."""
    b = np.asarray(raw, np.uint8).reshape(out * (n_in // BLOCK), 22)
    nibbles = b[:, 6:]
    q = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.int16)
    qh = np.ascontiguousarray(b[:, 2:6]).view("<u4")
    q |= (((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int16) << 4)
    blocks8 = np.empty((b.shape[0], 34), np.uint8)
    blocks8[:, :2] = b[:, :2]
    blocks8[:, 2:] = (q - 16).astype(np.int8).view(np.uint8)
    return blocks8.reshape(out, -1)


def q4_k_as_q4_1f(raw: np.ndarray, out: int, n_in: int) -> np.ndarray:
    """Q4_K rows (144-byte super-blocks of 256: float16 d and dmin, twelve bytes of eight 6-bit
    scales and mins, 128 bytes of nibbles) as q4_1f rows (eight 24-byte blocks a super-block),
    value for value: sub-block s holds w = (d * sc_s) * q - (dmin * m_s), ggml's own
    dequantisation, which is the q4_1f block with d = d * sc_s and m = -(dmin * m_s). Both
    products are a float16 (11 significant bits) times a 6-bit integer, so float32 holds them
    exactly, and the float form is the file's dequantised values bit for bit."""
    from onebit.gguf.types import k_codes, k_scales

    b = np.asarray(raw, np.uint8).reshape(out * (n_in // 256), 144)
    half = np.ascontiguousarray(b[:, 0:4]).view("<f2").astype(np.float32)  # [n, (d, dmin)]
    scale, mins = k_scales(b[:, 4:16])  # [n, 8] each
    d = half[:, 0:1] * scale.astype(np.float32)
    m = -(half[:, 1:2] * mins.astype(np.float32))
    q = k_codes(b[:, 16:])  # [n, 8, 32], element order
    blocks_f = np.empty((b.shape[0], 8, 24), np.uint8)
    blocks_f[:, :, 0:4] = d.astype("<f4")[:, :, None].view(np.uint8)
    blocks_f[:, :, 4:8] = m.astype("<f4")[:, :, None].view(np.uint8)
    blocks_f[:, :, 8:] = q[:, :, :16] | (q[:, :, 16:] << np.uint8(4))
    return blocks_f.reshape(out, -1)


def q6_k_as_q8_16f(raw: np.ndarray, out: int, n_in: int) -> np.ndarray:
    """Q6_K rows (210-byte super-blocks of 256: 6-bit codes, sixteen int8 group scales, a
    float16 d) as q8_16f rows (eight 40-byte blocks a super-block), value for value: group g
    of 16 elements holds w = (d * sc_g) * (q - 32), which is block g // 2's scale g % 2 times
    the 8-bit code q - 32. d * sc_g is a float16 times an int8, exact in float32, so the float
    form is the file's dequantised values bit for bit."""
    from onebit.gguf.types import q6_k_parts

    b = np.asarray(raw, np.uint8).reshape(out * (n_in // 256), 210)
    q, d = q6_k_parts(b)  # [n, 16, 16] int8, [n, 16] float32
    blocks_h = np.empty((b.shape[0], 8, 40), np.uint8)
    blocks_h[:, :, 0:8] = np.ascontiguousarray(d.astype("<f4")).view(np.uint8).reshape(-1, 8, 8)
    blocks_h[:, :, 8:] = np.ascontiguousarray(q).view(np.uint8).reshape(-1, 8, 32)
    return blocks_h.reshape(out, -1)


# The integer kernel's vector loads (64 bytes of a group's codes, 16 scales) start at
# multiples of 32 or 64 bytes from an array's start: an array that starts on a cache line makes
# none of them cross one (a load across two lines costs about two). numpy and numba start
# arrays on 16 or 32 bytes.
ALIGN = 64


def aligned_empty(shape: int | tuple[int, ...], dtype) -> np.ndarray:
    """`np.empty(shape, dtype)` starting at a multiple of ALIGN bytes (a view of a slightly
    larger buffer)."""
    dtype = np.dtype(dtype)
    # math.prod, not np.prod: this runs for every product's quantised row, and np.prod makes
    # an array of the shape first (a few microseconds a call, 118 calls a Gemma 3 step)
    size = math.prod(shape) if isinstance(shape, tuple) else int(shape)
    buf = np.empty(size * dtype.itemsize + ALIGN, np.uint8)
    start = -buf.ctypes.data % ALIGN
    return buf[start:start + size * dtype.itemsize].view(dtype).reshape(shape)


def aligned(a: np.ndarray) -> np.ndarray:
    """`a` C-contiguous and starting at a multiple of ALIGN bytes: `a` itself when it already
    is, else a copy (the same values)."""
    if a.flags.c_contiguous and a.ctypes.data % ALIGN == 0:
        return a
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def row_bytes(kind: str, n_in: int) -> int:
    return n_in // BLOCK * KINDS[kind][1]


def check_shape(name: str, data: np.ndarray, kind: str, shape: tuple[int, ...],
                file: str) -> None:
    """`ModelFileError` naming the tensor unless `data` holds a `shape` weight's blocks."""
    if len(shape) != 2 or shape[1] % BLOCK:
        raise ModelFileError(f"{file}: tensor '{name}' is stored in {kind} blocks, but its "
                             f"shape {shape} is not [out, a multiple of {BLOCK}]")
    expected = (shape[0], row_bytes(kind, shape[1]))
    if data.dtype != np.uint8 or tuple(data.shape) != expected:
        raise ModelFileError(f"{file}: tensor '{name}' ({kind}) has {data.dtype} blocks of "
                             f"shape {tuple(data.shape)}; a {shape} weight needs uint8 {expected}")


def _scales(data: np.ndarray, kind: str) -> np.ndarray:
    """`[out, blocks, 1 or 2]` float32: each block's d (and m)."""
    size, head = KINDS[kind][1:]
    raw = np.ascontiguousarray(data.reshape(data.shape[0], -1, size)[:, :, :head])
    return raw.view("<f4" if kind in FLOAT_SCALES else "<f2").astype(np.float32)


def check_finite(name: str, data: np.ndarray, kind: str, dtype: np.dtype, file: str) -> None:
    """Refuse blocks whose d or m is NaN / inf, or whose largest weight overflows `dtype` (a
    code is always finite, so the scales decide); the error names the tensor and the block."""
    scales = _scales(data, kind)
    bad = ~np.isfinite(scales).all(axis=2)
    if not bad.any():
        top = {"q8_0": 128.0, "q4_0": 8.0, "q4_1": 15.0, "q4_1f": 15.0, "q8_16f": 32.0}[kind]
        # q8_16f: the larger of its block's two scales
        scale = np.abs(scales).max(axis=2) if kind in HALF_SCALES else np.abs(scales[:, :, 0])
        extent = scale.astype(np.float64) * top
        if kind in ("q4_1", "q4_1f"):
            extent += np.abs(scales[:, :, 1])
        bad = extent > float(np.finfo(dtype).max)
    if bad.any():
        row, block = (int(v) for v in np.argwhere(bad)[0])
        raise ModelFileError(f"{file}: tensor '{name}' has a non-finite or overflowing scale in "
                             f"{kind} block {block} of row {row} ({int(bad.sum())} bad block(s)); "
                             f"a weight must be finite")


def dequantize(data: np.ndarray, kind: str, shape: tuple[int, int]) -> np.ndarray:
    """The float32 weight the blocks hold: the dequantise-at-load path's values, bit for bit."""
    from onebit.gguf.types import dequantize as ggml_dequantize

    if kind == "q8_16f":  # d_half * q in float32, as ggml's Q6_K decoder computes it
        b = np.asarray(data, np.uint8).reshape(-1, 40)
        scales = np.ascontiguousarray(b[:, :8]).view("<f4").astype(np.float32)  # [n, 2]
        q = np.ascontiguousarray(b[:, 8:]).view(np.int8).astype(np.float32).reshape(-1, 2, 16)
        return (scales[:, :, None] * q).reshape(shape)
    if kind == "q4_1f":  # d * q + m in float32, as ggml's Q4_K decoder computes (d q) - (-m)
        b = np.asarray(data, np.uint8).reshape(-1, 24)
        scales = np.ascontiguousarray(b[:, :8]).view("<f4").astype(np.float32)
        nib = b[:, 8:]
        q = np.concatenate([nib & 0x0F, nib >> 4], axis=1).astype(np.float32)
        return (scales[:, 0:1] * q + scales[:, 1:2]).reshape(shape)
    return ggml_dequantize(KINDS[kind][0], np.asarray(data), tuple(shape))


def q4nx_block_kind(convention: str) -> str:
    """The ggml block kind a Q4NX weight of `convention` is read as by the integer kernel."""
    return "q4_1" if convention == "unsigned" else "q4_0"


def q4nx_half_scales(data: np.ndarray, shape: tuple[int, int], convention: str, *,
                     name: str = "", file: str = "") -> tuple[np.ndarray, np.ndarray]:
    """A Q4NX weight's group scales (and, unsigned, mins) as float16 bit patterns `[out, in /
    32]`, the ggml blocks' d and m. A bf16 value is a float16 one exactly when its exponent is
    in float16's range; a scale or min outside it, or a signed weight's min that is not 0 (its
    blocks are q4_0, which has none), is refused: `ModelFileError` naming the tensor, the row,
    the group and the value, and nothing is rounded."""
    from onebit.models import q4nx

    scales, mins = q4nx.group_scales(data, *shape)
    return _half_scales(scales, mins, convention, _tensor(name, file))


def _tensor(name: str, file: str) -> str:
    return f"{file}: tensor '{name}'" if file else f"tensor '{name}'"


def _half_scales(scales: np.ndarray, mins: np.ndarray, convention: str,
                 where: str) -> tuple[np.ndarray, np.ndarray]:
    """`q4nx_half_scales` on the widened float32 scales and mins `[out, in / 32]`."""
    kind = q4nx_block_kind(convention)
    if kind == "q4_0" and np.any(mins != 0):
        row, group = (int(v) for v in np.argwhere(mins != 0)[0])
        raise ModelFileError(f"{where} (Q4NX, signed codes) has min {float(mins[row, group])!r} "
                             f"in group {group} of row {row}; the signed convention needs every "
                             f"min to be 0 to run as q4_0 blocks")

    def half_bits(values: np.ndarray, what: str) -> np.ndarray:
        with np.errstate(over="ignore", under="ignore"):
            half = values.astype(np.float16)
        inexact = half.astype(np.float32) != values
        if inexact.any():
            row, group = (int(v) for v in np.argwhere(inexact)[0])
            raise ModelFileError(
                f"{where} (Q4NX) has {what} {float(values[row, group])!r} in group {group} of "
                f"row {row}, which float16 cannot hold exactly ({int(inexact.sum())} such "
                f"value(s)); the integer kernel keeps float16 scales: use another kernel")
        return np.ascontiguousarray(half.view(np.uint16))

    d = half_bits(scales, "scale")
    m = half_bits(mins, "min") if kind == "q4_1" else np.zeros((mins.shape[0], 0), np.uint16)
    return d, m


@dataclass(frozen=True)
class BlockWeight:
    """A block weight as the integer kernel reads it. `codes`: uint8 `[out, in / 2]` nibble
    bytes (q4_0 / q4_1 / q4_1f, 16 per block) or int8 `[out, in]` (q8_0, q8_16f); `d`, `m`: the
    float16 bit patterns `[out, in / 32]` (uint16; float32 values for q4_1f) of each block's
    scale and (q4_1 / q4_1f) min, `m` empty otherwise; q8_16f's `d` is float32 `[out, in / 16]`,
    a scale per 16 elements."""

    kind: str
    shape: tuple[int, int]
    codes: np.ndarray
    d: np.ndarray
    m: np.ndarray
    # the backend hands a prepared weight with `packed` set to its product as it is
    packed = True

    def __post_init__(self) -> None:
        # the codes start on a cache line (ALIGN), as every array the integer kernel loads
        object.__setattr__(self, "codes", aligned(self.codes))

    @classmethod
    def from_stored(cls, data: np.ndarray, kind: str, shape: tuple[int, int]) -> BlockWeight:
        out, n_in = shape
        size, head = KINDS[kind][1:]
        raw = np.asarray(data).reshape(out, n_in // BLOCK, size)
        codes = np.ascontiguousarray(raw[:, :, head:]).reshape(out, -1)
        if kind in BYTE_CODES:
            codes = codes.view(np.int8)
        if kind in HALF_SCALES:  # two scales a block, no min
            d = np.ascontiguousarray(raw[:, :, 0:8]).view("<f4").reshape(out, -1)
            return cls(kind, (int(out), int(n_in)), codes, d.astype(np.float32),
                       np.zeros((out, 0), np.float32))
        if kind in FLOAT_SCALES:
            d = np.ascontiguousarray(raw[:, :, 0:4]).view("<f4").reshape(out, -1)
            m = np.ascontiguousarray(raw[:, :, 4:8]).view("<f4").reshape(out, -1)
            return cls(kind, (int(out), int(n_in)), codes, d.astype(np.float32),
                       m.astype(np.float32))
        d = np.ascontiguousarray(raw[:, :, 0:2]).view("<u2").reshape(out, -1).astype(np.uint16)
        m = (np.ascontiguousarray(raw[:, :, 2:4]).view("<u2").reshape(out, -1).astype(np.uint16)
             if kind == "q4_1" else np.zeros((out, 0), np.uint16))
        return cls(kind, (int(out), int(n_in)), codes, d, m)

    @classmethod
    def from_q4nx(cls, data: np.ndarray, shape: tuple[int, int], convention: str, *,
                  name: str = "", file: str = "") -> BlockWeight:
        """A Q4NX weight (q4nx.py) as the same weight in ggml blocks, value for value: a Q4NX
        group is 32 input columns of one row with one scale and one min, which is a ggml block.
        "unsigned" codes (w = min + scale * q) become q4_1 (d = scale, m = min); "signed" codes
        (w = scale * s, min 0) become q4_0 (d = scale, q = s + 8). Raises `ModelFileError`
        where `q4nx_half_scales` does."""
        from onebit.models import q4nx

        out, n_in = shape
        codes, scales, mins = q4nx.unpack(data, out, n_in, convention=convention)
        d, m = _half_scales(scales, mins, convention, _tensor(name, file))
        kind = q4nx_block_kind(convention)
        q = codes.astype(np.int16) + (8 if kind == "q4_0" else 0)
        q = q.astype(np.uint8).reshape(out, n_in // BLOCK, BLOCK)
        # ggml's nibble order: element j < 16 the low nibble of byte j, j >= 16 the high one
        nibbles = (q[:, :, :16] | (q[:, :, 16:] << np.uint8(4))).reshape(out, -1)
        return cls(kind, (int(out), int(n_in)), np.ascontiguousarray(nibbles), d, m)

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.d.nbytes + self.m.nbytes
