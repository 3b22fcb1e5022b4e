"""Q4NX: the 4-bit block format of onebit's quantised weights (docs/forward.md).

A weight `W[out, in]` is cut into blocks of 32 output rows x 256 input columns. One block is
5120 bytes:

    bytes    0 ..  511  scales, bf16, ordered [group g = 0..7][row r = 0..31]
    bytes  512 .. 1023  mins,   bf16, same order
    bytes 1024 .. 5119  codes: two lanes of 16 rows (lane 0 = rows 0..15, lane 1 = rows 16..31);
                        within a lane, 8 bytes per input column (256 columns, in order);
                        byte j holds row 2j in its low nibble and row 2j + 1 in its high nibble

A group is 32 consecutive input columns of one row; block column c, group g covers input
columns 32g .. 32g + 31 of that block. The value of a weight is `w = min + scale * code`.

Two code conventions share the layout, and nothing in a file says which one it holds:
- "unsigned": codes 0..15 (onebit's own quantiser writes this);
- "signed": two's-complement nibbles -8..7 with min = 0 (files converted from GGUF Q4_0).

Blocks are stored row-block-major, either flat `[(out/32) * (in/256), 5120]` or as a grid
`[out/32, in/256, 5120]`; both are accepted everywhere.

All bf16 conversion is done here in numpy: float -> bf16 rounds to nearest, ties to even.
"""

from __future__ import annotations

import numpy as np

from onebit.models.errors import Q4NXError

BLOCK_ROWS = 32
BLOCK_COLS = 256
GROUP = 32  # input columns per scale / min
GROUPS = BLOCK_COLS // GROUP  # 8 groups per block row
LANE_ROWS = 16
BLOCK_BYTES = 5120
SCALES_AT, MINS_AT, CODES_AT = 0, 512, 1024
CONVENTIONS = ("unsigned", "signed")


# ---------------------------------------------------------------------------------------------
# bf16 <-> float32, bit-exact


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float values to bf16 (nearest, ties to even); return the 16-bit patterns.

    bf16 is the top half of a float32. Adding 0x7FFF plus the lowest kept bit before truncating
    rounds to nearest with ties to even; NaN is kept a (quiet) NaN instead of rounding to inf.
    """
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(nan, quiet_nan, rounded).astype(np.uint16)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen 16-bit bf16 patterns to float32 (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """`x` rounded to the nearest bf16 value, as float32."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


# ---------------------------------------------------------------------------------------------
# Shapes


def _check_dims(out_features: int, in_features: int) -> tuple[int, int]:
    if out_features <= 0 or out_features % BLOCK_ROWS:
        raise Q4NXError(
            f"Q4NX needs out_features to be a positive multiple of {BLOCK_ROWS}, got {out_features}"
        )
    if in_features <= 0 or in_features % BLOCK_COLS:
        raise Q4NXError(
            f"Q4NX needs in_features to be a positive multiple of {BLOCK_COLS}, got {in_features}"
        )
    return out_features // BLOCK_ROWS, in_features // BLOCK_COLS


def can_quantize(shape: tuple[int, ...]) -> bool:
    """True when a weight of this shape tiles into whole Q4NX blocks."""
    return (
        len(shape) == 2
        and shape[0] > 0
        and shape[0] % BLOCK_ROWS == 0
        and shape[1] > 0
        and shape[1] % BLOCK_COLS == 0
    )


def blocks_shape(out_features: int, in_features: int, *, grid: bool = False) -> tuple[int, ...]:
    """The stored shape of the blocks of a `[out, in]` weight (flat, or grid when `grid`)."""
    rb, cb = _check_dims(out_features, in_features)
    return (rb, cb, BLOCK_BYTES) if grid else (rb * cb, BLOCK_BYTES)


def as_grid(blocks: np.ndarray, out_features: int, in_features: int) -> np.ndarray:
    """View stored blocks (flat or grid) as `[out/32, in/256, 5120]` uint8, checking the shape."""
    rb, cb = _check_dims(out_features, in_features)
    blocks = np.asarray(blocks)
    if blocks.dtype != np.uint8:
        raise Q4NXError(f"Q4NX blocks must be uint8, got {blocks.dtype}")
    if blocks.shape not in ((rb * cb, BLOCK_BYTES), (rb, cb, BLOCK_BYTES)):
        raise Q4NXError(
            f"Q4NX blocks of shape {blocks.shape} do not hold a [{out_features}, {in_features}] "
            f"weight: expected ({rb * cb}, {BLOCK_BYTES}) or ({rb}, {cb}, {BLOCK_BYTES})"
        )
    return blocks.reshape(rb, cb, BLOCK_BYTES)


def _check_convention(convention: str) -> None:
    if convention not in CONVENTIONS:
        raise Q4NXError(f"Q4NX convention must be one of {CONVENTIONS}, got {convention!r}")


# ---------------------------------------------------------------------------------------------
# Pack / unpack of explicit codes, scales and mins


def pack(
    codes: np.ndarray,
    scales: np.ndarray,
    mins: np.ndarray | None = None,
    *,
    convention: str = "unsigned",
    grid: bool = False,
) -> np.ndarray:
    """Lay out `codes[out, in]` with per-group `scales[out, in/32]` and `mins[out, in/32]` as
    Q4NX blocks. Scales and mins are rounded to bf16. In the "signed" convention codes are
    -8..7 and `mins` must be absent or all zero."""
    _check_convention(convention)
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise Q4NXError(f"codes must be 2-D [out, in], got shape {codes.shape}")
    out_features, in_features = codes.shape
    rb, cb = _check_dims(out_features, in_features)
    group_shape = (out_features, in_features // GROUP)
    scales = np.asarray(scales, dtype=np.float32)
    if scales.shape != group_shape:
        raise Q4NXError(f"scales must have shape {group_shape}, got {scales.shape}")
    if mins is None:
        mins = np.zeros(group_shape, dtype=np.float32)
    mins = np.asarray(mins, dtype=np.float32)
    if mins.shape != group_shape:
        raise Q4NXError(f"mins must have shape {group_shape}, got {mins.shape}")
    if not np.issubdtype(codes.dtype, np.integer):
        raise Q4NXError(f"codes must be integers, got {codes.dtype}")
    lo, hi = (0, 15) if convention == "unsigned" else (-8, 7)
    if codes.size and (codes.min() < lo or codes.max() > hi):
        raise Q4NXError(
            f"{convention} codes must lie in {lo}..{hi}, got {int(codes.min())}..{int(codes.max())}"
        )
    if convention == "signed" and np.any(mins != 0):
        raise Q4NXError("the signed (GGUF Q4_0) convention has min = 0; got non-zero mins")

    blocks = np.empty((rb, cb, BLOCK_BYTES), dtype=np.uint8)

    # Scales and mins: [out, in/32] = [rb, row r, cb, group g] -> per block [g][r].
    def group_bytes(values: np.ndarray) -> np.ndarray:
        bits = f32_to_bf16_bits(values).reshape(rb, BLOCK_ROWS, cb, GROUPS)
        bits = bits.transpose(0, 2, 3, 1).astype("<u2")  # [rb, cb, g, r]
        return np.ascontiguousarray(bits).view(np.uint8).reshape(rb, cb, 2 * GROUPS * BLOCK_ROWS)

    blocks[:, :, SCALES_AT:MINS_AT] = group_bytes(scales)
    blocks[:, :, MINS_AT:CODES_AT] = group_bytes(mins)

    # Codes: the row within a block is 16 * lane + 2 * j + nibble. [out, in] viewed as
    # [rb, lane, j, nibble, cb, column] and moved to [rb, cb, lane, column, j, nibble].
    nibbles = (codes.astype(np.int64) & 0xF).astype(np.uint8)
    nibbles = nibbles.reshape(rb, 2, LANE_ROWS // 2, 2, cb, BLOCK_COLS).transpose(0, 4, 1, 5, 2, 3)
    packed = nibbles[..., 0] | (nibbles[..., 1] << np.uint8(4))  # [rb, cb, lane, col, j]
    blocks[:, :, CODES_AT:] = packed.reshape(rb, cb, BLOCK_BYTES - CODES_AT)
    return blocks if grid else blocks.reshape(rb * cb, BLOCK_BYTES)


def group_scales(
    blocks: np.ndarray, out_features: int, in_features: int
) -> tuple[np.ndarray, np.ndarray]:
    """`(scales f32 [out, in/32], mins f32 [out, in/32])`: each group's bf16 scale and min,
    widened exactly (the codes are not touched)."""
    grid = as_grid(blocks, out_features, in_features)
    rb, cb = grid.shape[:2]

    def group_values(raw: np.ndarray) -> np.ndarray:
        bits = np.ascontiguousarray(raw).view("<u2").reshape(rb, cb, GROUPS, BLOCK_ROWS)
        return bf16_bits_to_f32(bits.transpose(0, 3, 1, 2).reshape(out_features, cb * GROUPS))

    return group_values(grid[:, :, SCALES_AT:MINS_AT]), group_values(grid[:, :, MINS_AT:CODES_AT])


def unpack(
    blocks: np.ndarray, out_features: int, in_features: int, *, convention: str = "unsigned"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The inverse of `pack`: `(codes int8 [out, in], scales f32 [out, in/32], mins f32)`."""
    _check_convention(convention)
    grid = as_grid(blocks, out_features, in_features)
    rb, cb = grid.shape[:2]
    scales, mins = group_scales(blocks, out_features, in_features)
    packed = grid[:, :, CODES_AT:].reshape(rb, cb, 2, BLOCK_COLS, LANE_ROWS // 2)
    nibbles = np.stack([packed & np.uint8(0xF), packed >> np.uint8(4)], axis=-1)
    # [rb, cb, lane, col, j, nibble] -> [rb, lane, j, nibble, cb, col] -> [out, in]
    codes = nibbles.transpose(0, 2, 4, 5, 1, 3).reshape(out_features, in_features).astype(np.int8)
    if convention == "signed":
        codes = np.where(codes >= 8, codes - 16, codes).astype(np.int8)
    return codes, scales, mins


# ---------------------------------------------------------------------------------------------
# Float weights <-> blocks


def dequantize(
    blocks: np.ndarray,
    out_features: int,
    in_features: int,
    *,
    convention: str = "unsigned",
    dtype: np.dtype | type = np.float32,
) -> np.ndarray:
    """The float weight `W[out, in] = min + scale * code` that the blocks hold.

    Computed in float64, where it is exact (a bf16 scale times a 4-bit code plus a bf16 min
    fits easily), then rounded once to `dtype`.
    """
    codes, scales, mins = unpack(blocks, out_features, in_features, convention=convention)
    shape = (out_features, in_features // GROUP, GROUP)
    w = mins.astype(np.float64)[:, :, None] + scales.astype(np.float64)[:, :, None] * codes.reshape(
        shape
    )
    return w.reshape(out_features, in_features).astype(dtype)


def dequantize_row(
    blocks: np.ndarray,
    out_features: int,
    in_features: int,
    row: int,
    *,
    convention: str = "unsigned",
    dtype: np.dtype | type = np.float32,
) -> np.ndarray:
    """Row `row` of `dequantize(blocks, ...)`, bit for bit, reading only that row's bytes:
    per block column, its 8 scales, 8 mins and the 256 bytes that hold its nibbles."""
    _check_convention(convention)
    grid = as_grid(blocks, out_features, in_features)
    if not 0 <= row < out_features:
        raise Q4NXError(f"row {row} is outside a weight of {out_features} rows")
    band, r = divmod(row, BLOCK_ROWS)
    lane, within = divmod(r, LANE_ROWS)
    blocks_of_row = grid[band]  # [in/256, 5120]
    at = CODES_AT + lane * BLOCK_COLS * 8 + within // 2
    packed = blocks_of_row[:, at : at + BLOCK_COLS * 8 : 8]  # [in/256, 256 columns]
    codes = (packed >> np.uint8(4)) if within % 2 else (packed & np.uint8(0xF))
    codes = codes.astype(np.int8)
    if convention == "signed":
        codes = np.where(codes >= 8, codes - 16, codes).astype(np.int8)

    def group_values(start: int) -> np.ndarray:  # [in/256, 8] bf16 of this row, as float64
        raw = np.ascontiguousarray(blocks_of_row[:, start : start + 512]).view("<u2")
        return bf16_bits_to_f32(raw.reshape(-1, GROUPS, BLOCK_ROWS)[:, :, r]).astype(np.float64)

    w = group_values(MINS_AT)[:, :, None] + group_values(SCALES_AT)[:, :, None] * codes.reshape(
        -1, GROUPS, GROUP
    )
    return w.reshape(in_features).astype(dtype)


def quantize(weight: np.ndarray, *, convention: str = "unsigned", grid: bool = False) -> np.ndarray:
    """Quantise a float `W[out, in]` to Q4NX blocks, per group of 32 columns.

    unsigned: min = bf16(group min), scale = bf16((max - min) / 15), codes 0..15.
    signed:   min = 0, scale = bf16(max |w| / 7), codes -8..7 (GGUF Q4_0 style).
    Codes are chosen against the bf16-rounded scale and min, so a dequantise-quantise round
    trip reproduces the same blocks.
    """
    _check_convention(convention)
    weight = np.asarray(weight)
    if weight.ndim != 2:
        raise Q4NXError(f"weight must be 2-D [out, in], got shape {weight.shape}")
    out_features, in_features = weight.shape
    _check_dims(out_features, in_features)
    if not np.all(np.isfinite(weight)):
        raise Q4NXError("weight holds NaN or inf; Q4NX cannot represent them")
    w = weight.astype(np.float64).reshape(out_features, in_features // GROUP, GROUP)
    if convention == "unsigned":
        mins = round_bf16(w.min(axis=2)).astype(np.float64)
        scales = round_bf16((w.max(axis=2) - mins) / 15.0).astype(np.float64)
        safe = np.where(scales > 0, scales, 1.0)[:, :, None]
        codes = np.clip(np.rint((w - mins[:, :, None]) / safe), 0, 15)
    else:
        mins = np.zeros(w.shape[:2])
        scales = round_bf16(np.abs(w).max(axis=2) / 7.0).astype(np.float64)
        safe = np.where(scales > 0, scales, 1.0)[:, :, None]
        codes = np.clip(np.rint(w / safe), -8, 7)
    codes = np.where(scales[:, :, None] > 0, codes, 0).astype(np.int8)
    return pack(
        codes.reshape(out_features, in_features), scales, mins, convention=convention, grid=grid
    )
