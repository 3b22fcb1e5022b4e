"""A bounded first pass over a GGUF file's header, before `gguf.GGUFReader` sees it.

`gguf.GGUFReader` trusts the counts it reads: a key/value count or an array length of 2**63
makes it loop (it reads past the end of its memory map as empty arrays, which never advance),
and a tensor whose bytes run past the end becomes a short view that fails later, far from the
cause. So the header is walked here first, with every count and length checked against the
bytes that are left *before* anything is allocated or iterated on it. Only a header that passes
is handed to the reader.

Layout (GGUF v2 and v3, little-endian): magic `GGUF`, version u32, tensor count u64, key/value
count u64; the key/values (key string, value type u32, value); the tensor infos (name string,
dimension count u32, dimensions u64 each, type u32, offset u64); padding to the alignment
(`general.alignment`, default 32); the tensor data, each tensor at its offset from there.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from onebit.gguf.errors import GGUFError, UnsupportedGGUFError
from onebit.gguf.types import SUPPORTED, TYPE_NAMES, tensor_bytes, type_layout

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # v1 had 32-bit counts and is long gone
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # ggml's GGML_MAX_DIMS
# No real key, tensor name or metadata string is near these; a hostile file's are refused
# before they are read. The token list of a 256k vocabulary is well under MAX_ARRAY.
MAX_NAME = 1 << 16
MAX_STRING = 1 << 26
MAX_ARRAY = 1 << 24
MAX_ELEMENTS = 1 << 40  # one tensor; a 1T-parameter model's largest matrix is far below

# GGUF value types: id -> (name, fixed size in bytes or None for string / array)
VALUE_TYPES = {
    0: ("uint8", 1), 1: ("int8", 1), 2: ("uint16", 2), 3: ("int16", 2), 4: ("uint32", 4),
    5: ("int32", 4), 6: ("float32", 4), 7: ("bool", 1), 8: ("string", None),
    9: ("array", None), 10: ("uint64", 8), 11: ("int64", 8), 12: ("float64", 8),
}
STRING, ARRAY = 8, 9


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header describes it: `shape` in numpy order (GGUF's reversed, so a
    linear is [out, in]), `type_id` the ggml type, `offset` absolute in the file."""

    name: str
    shape: tuple[int, ...]
    type_id: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class Header:
    version: int
    keys: tuple[str, ...]
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_start: int
    file_size: int


class _Cursor:
    """Reads little-endian fields from the file, refusing any read past its end."""

    def __init__(self, f, size: int, path: Path) -> None:
        self.f, self.size, self.path, self.pos = f, size, path, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.size:
            raise GGUFError(f"{self.path}: truncated: {what} at byte {self.pos} needs {n} "
                            f"byte(s), the file has {self.size - self.pos} left")
        raw = self.f.read(n)
        if len(raw) != n:
            raise GGUFError(f"{self.path}: truncated while reading {what} at byte {self.pos}")
        self.pos += n
        return raw

    def skip(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise GGUFError(f"{self.path}: truncated: {what} at byte {self.pos} needs {n} "
                            f"byte(s), the file has {self.size - self.pos} left")
        self.pos += n
        self.f.seek(self.pos)

    def u32(self, what: str) -> int:
        return struct.unpack("<I", self.take(4, what))[0]

    def u64(self, what: str) -> int:
        return struct.unpack("<Q", self.take(8, what))[0]

    def count(self, what: str, each: int, limit: int) -> int:
        """A u64 count of items at least `each` bytes long: refused when they cannot fit in
        the rest of the file, or exceed `limit`, so nothing is ever sized on a false count."""
        n = self.u64(what)
        if n > limit or n * each > self.size - self.pos:
            raise GGUFError(f"{self.path}: {what} is {n}, more than the "
                            f"{self.size - self.pos} byte(s) left in the file can hold"
                            + (f" (limit {limit})" if n > limit else ""))
        return n

    def string(self, what: str, limit: int = MAX_STRING) -> bytes:
        n = self.u64(f"the length of {what}")
        if n > limit:
            raise GGUFError(f"{self.path}: {what} is {n} bytes long (limit {limit})")
        return self.take(n, what)


def read_header(path: Path) -> Header:
    """Walk the header of the GGUF file at `path`, checking every count, length, type and
    tensor extent; `GGUFError` / `UnsupportedGGUFError` naming the file and the culprit."""
    size = os.stat(path).st_size
    with open(path, "rb") as f:
        cur = _Cursor(f, size, path)
        magic = cur.take(4, "the magic")
        if magic != MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (magic {magic!r}, expected {MAGIC!r})")
        version = cur.u32("the version")
        if version not in VERSIONS:
            hint = " (a big-endian file?)" if version & 0xFFFF == 0 else ""
            raise GGUFError(f"{path}: GGUF version {version}{hint}; supported: "
                            f"{list(VERSIONS)}")
        n_tensors = cur.count("the tensor count", 8 + 4 + 4 + 8, MAX_ARRAY)
        n_keys = cur.count("the key/value count", 8 + 4 + 1, MAX_ARRAY)
        keys, alignment = _walk_keys(cur, n_keys)
        infos = [_tensor_info(cur, i) for i in range(n_tensors)]
        data_start = -(-cur.pos // alignment) * alignment
        tensors = _place(path, infos, data_start, alignment, size)
    return Header(version, tuple(keys), tuple(tensors), alignment, data_start, size)


def _walk_keys(cur: _Cursor, n: int) -> tuple[list[str], int]:
    keys: list[str] = []
    seen: set[str] = set()
    alignment = DEFAULT_ALIGNMENT
    for i in range(n):
        key = _text(cur, cur.string(f"key {i}", MAX_NAME), f"key {i}")
        if key in seen:
            raise GGUFError(f"{cur.path}: metadata key '{key}' appears twice")
        seen.add(key)
        vtype = cur.u32(f"the type of '{key}'")
        if vtype not in VALUE_TYPES:
            raise GGUFError(f"{cur.path}: metadata '{key}' has unknown value type {vtype}")
        if key == "general.alignment":
            if vtype != 4:
                raise GGUFError(f"{cur.path}: 'general.alignment' must be uint32, got "
                                f"{VALUE_TYPES[vtype][0]}")
            alignment = cur.u32("general.alignment")
            if alignment == 0 or alignment & (alignment - 1) or alignment > 1 << 20:
                raise GGUFError(f"{cur.path}: 'general.alignment' is {alignment}; it must be a "
                                "power of two up to 1 MiB")
        else:
            _skip_value(cur, vtype, key)
        keys.append(key)
    return keys, alignment


def _skip_value(cur: _Cursor, vtype: int, key: str) -> None:
    size = VALUE_TYPES[vtype][1]
    if size is not None:
        cur.skip(size, f"the value of '{key}'")
    elif vtype == STRING:
        n = cur.u64(f"the length of '{key}'")
        if n > MAX_STRING:
            raise GGUFError(f"{cur.path}: metadata '{key}' is a string of {n} bytes "
                            f"(limit {MAX_STRING})")
        cur.skip(n, f"the value of '{key}'")
    else:
        itype = cur.u32(f"the element type of '{key}'")
        if itype not in VALUE_TYPES or itype == ARRAY:
            what = "nested arrays are not supported" if itype == ARRAY else "unknown type"
            raise GGUFError(f"{cur.path}: metadata '{key}' is an array of element type "
                            f"{itype}: {what}")
        each = VALUE_TYPES[itype][1] or 8
        n = cur.count(f"the length of array '{key}'", each, MAX_ARRAY)
        if itype != STRING:
            cur.skip(n * each, f"the elements of '{key}'")
            return
        for j in range(n):
            length = cur.u64(f"the length of '{key}'[{j}]")
            if length > MAX_STRING:
                raise GGUFError(f"{cur.path}: metadata '{key}'[{j}] is a string of {length} "
                                f"bytes (limit {MAX_STRING})")
            cur.skip(length, f"'{key}'[{j}]")


def _text(cur: _Cursor, raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise GGUFError(f"{cur.path}: {what} is not UTF-8: {raw[:40]!r}") from None


def _tensor_info(cur: _Cursor, i: int) -> tuple[str, tuple[int, ...], int, int]:
    name = _text(cur, cur.string(f"the name of tensor {i}", MAX_NAME), f"tensor {i}'s name")
    n_dims = cur.u32(f"the dimension count of '{name}'")
    if not 1 <= n_dims <= MAX_DIMS:
        raise GGUFError(f"{cur.path}: tensor '{name}' has {n_dims} dimensions (1..{MAX_DIMS})")
    dims = struct.unpack(f"<{n_dims}Q", cur.take(8 * n_dims, f"the dimensions of '{name}'"))
    elements = 1
    for d in dims:
        elements *= d
    if 0 in dims or elements > MAX_ELEMENTS:
        raise GGUFError(f"{cur.path}: tensor '{name}' has dimensions {list(dims)}: "
                        f"{elements} elements (1..{MAX_ELEMENTS})")
    type_id = cur.u32(f"the type of '{name}'")
    offset = cur.u64(f"the offset of '{name}'")
    return name, tuple(reversed(dims)), type_id, offset


def _place(path: Path, infos, data_start: int, alignment: int, size: int) -> list[TensorInfo]:
    tensors: list[TensorInfo] = []
    seen: set[str] = set()
    for name, shape, type_id, offset in infos:
        if name in seen:
            raise GGUFError(f"{path}: tensor '{name}' appears twice")
        seen.add(name)
        if type_id not in SUPPORTED:
            kind = TYPE_NAMES.get(type_id, f"unknown type {type_id}")
            raise UnsupportedGGUFError(
                f"{path}: tensor '{name}' has ggml type {kind}, which onebit does not read; "
                f"supported: {', '.join(v[0] for v in SUPPORTED.values())}")
        block, _ = type_layout(type_id)
        if shape[-1] % block:
            raise GGUFError(f"{path}: tensor '{name}' ({TYPE_NAMES[type_id]}) has rows of "
                            f"{shape[-1]} elements, not a multiple of its block of {block}")
        nbytes = tensor_bytes(type_id, shape)
        if offset % alignment:
            raise GGUFError(f"{path}: tensor '{name}' is at data offset {offset}, not a "
                            f"multiple of the alignment {alignment}")
        start = data_start + offset
        if start + nbytes > size:
            raise GGUFError(f"{path}: tensor '{name}' runs past the end of the file: bytes "
                            f"{start}..{start + nbytes}, file size {size}")
        tensors.append(TensorInfo(name, shape, type_id, start, nbytes))
    return tensors
