"""Byte surgery on small GGUF files, for the refusal tests and the fuzz suite: find a key's
value or a tensor's info in the header and overwrite it in place."""

from __future__ import annotations

import struct


def key_at(blob: bytes, key: str) -> int:
    """Byte offset just after `key`'s name (where its value type starts)."""
    raw = key.encode()
    at = blob.find(struct.pack("<Q", len(raw)) + raw)
    assert at >= 0, key
    return at + 8 + len(raw)


def tensor_at(blob: bytes, name: str) -> dict[str, int]:
    """Offsets of tensor `name`'s info fields: 'name', 'n_dims', 'dims', 'type', 'offset'."""
    raw = name.encode()
    start = blob.find(struct.pack("<Q", len(raw)) + raw + b"\x01\x00\x00\x00")
    if start < 0:
        start = blob.find(struct.pack("<Q", len(raw)) + raw + b"\x02\x00\x00\x00")
    assert start >= 0, name
    n_dims_at = start + 8 + len(raw)
    (n_dims,) = struct.unpack_from("<I", blob, n_dims_at)
    dims_at = n_dims_at + 4
    type_at = dims_at + 8 * n_dims
    return {"name": start + 8, "n_dims": n_dims_at, "dims": dims_at, "type": type_at,
            "offset": type_at + 4}


def put(blob: bytes, at: int, fmt: str, *values) -> bytes:
    out = bytearray(blob)
    struct.pack_into(fmt, out, at, *values)
    return bytes(out)
