"""Host-side data layout for the NPU designs: instruction streams, padding and dtypes.

Nothing here touches pyxrt, so all of it is tested directly (tests/backends/test_npu_host.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from onebit.backends.errors import BackendError

ITEMSIZE = {"f32": 4, "bf16": 2, "i8": 1, "i32": 4}
STORAGE = {"f32": np.float32, "bf16": np.uint16, "i8": np.int8, "i32": np.int32}


def read_instructions(path: str | Path) -> np.ndarray:
    """The instruction stream as little-endian uint32 words: `insts.bin` raw, or `insts.txt`
    with one hex word per line (blank lines ignored). The run takes len() of this: words."""
    path = Path(path)
    if path.suffix == ".txt":
        words = []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    words.append(int(line.strip(), 16))
                except ValueError:
                    raise BackendError(
                        f"{path}:{number}: {line.strip()!r} is not a hex word"
                    ) from None
        if any(w >= 1 << 32 for w in words):
            raise BackendError(f"{path}: a word does not fit in 32 bits")
        stream = np.array(words, dtype="<u4")
    else:
        raw = path.read_bytes()
        if len(raw) % 4:
            raise BackendError(f"{path}: {len(raw)} bytes is not a whole number of 32-bit words")
        stream = np.frombuffer(raw, dtype="<u4").copy()
    if stream.size == 0:
        raise BackendError(f"{path}: the instruction stream is empty")
    return stream


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16), rounding to nearest even (NaN kept a NaN)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def quantise_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per row: `x[r] ~ q[r] * scale[r]`, scale = max|x[r]| / 127 (1 for a
    zero row). Each row's codes depend on that row only: batch-invariant by construction."""
    x = np.asarray(x, dtype=np.float64)
    peak = np.abs(x).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0)
    q = np.clip(np.rint(x / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def pad_to(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """`x` in the top-left corner of a zero `[rows, cols]` array of its dtype."""
    if x.shape[0] > rows or x.shape[1] > cols:
        raise BackendError(f"cannot pad {x.shape} down to {(rows, cols)}")
    out = np.zeros((rows, cols), dtype=x.dtype)
    out[: x.shape[0], : x.shape[1]] = x
    return out


def pack(x: np.ndarray, dtype: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray | None]:
    """`x` padded to `[rows, cols]` in the design's element type, as the bytes' storage array,
    and the per-row scales for int8 (None otherwise)."""
    if dtype == "f32":
        return pad_to(np.asarray(x, dtype=np.float32), rows, cols), None
    if dtype == "bf16":
        return pad_to(to_bf16(x), rows, cols), None
    if dtype == "i8":
        q, scale = quantise_rows(x)
        return pad_to(q, rows, cols), scale
    raise BackendError(f"no packing for element type {dtype!r}")


def unpack_result(c: np.ndarray, dtype: str, rows: int, cols: int, a_scale, b_scale,
                  out_dtype) -> np.ndarray:
    """The `[rows, cols]` corner of a design's result, as floats in `out_dtype`; an int32
    result is scaled back by the rows' and the weight rows' scales."""
    c = c[:rows, :cols]
    if dtype == "i32":
        scaled = c.astype(np.float64) * a_scale[:rows, None] * b_scale[None, :cols]
        return scaled.astype(out_dtype)
    return c.astype(out_dtype)
