"""Draft models made from a target GGUF file: the target with its later layers cut, or the
target's shapes and vocabulary filled with random weights.

A served engine's speculation is held to its own plain decode with drafts whose quality is
known (docs/peers.md, "The llama-server peer"): the target itself as its own draft (perfect:
every draft accepted), its first layers only (half-right: some accepted, some rolled back),
random weights with its vocabulary (garbage: nearly every draft rolled back). The engine
loads the draft as an ordinary model file, so each one is written here as a GGUF file that
keeps every metadata field of the target, its tokenizer included (a draft must share the
target's vocabulary, BOS and EOS), and changes only what it must:

- `cut_layers(src, dst, keep)`: `<arch>.block_count` becomes `keep`, and the tensors of blocks
  `keep` and up are left out; every other tensor is the target's, byte for byte.
- `randomize(src, dst, seed)`: every tensor keeps its name, shape and ggml type, and its data
  is random: float tensors N(0, 0.1), block types random codes with small finite scales (the
  same blocks `fabricate.encode` writes), so the file loads and computes, and says nothing.

`derived_drafts(target)` makes both once per target file, keyed by its sha256, under
`$ONEBIT_HOME/drafts/`. The target is read through onebit's checked header first (an
untrusted file), and each file is written to a temporary name and renamed into place, so a
run stopped halfway leaves no half-written draft behind.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from onebit.gguf.errors import GGUFConfigError, UnsupportedGGUFError
from onebit.gguf.fabricate import encode
from onebit.gguf.reader import read_metadata
from onebit.gguf.types import BY_NAME, SUPPORTED

_BLOCK = re.compile(r"^blk\.(\d+)\.")
FLOAT_TYPES = {"F32": np.float32, "F16": np.float16}


def _copy(src: str | Path, dst: str | Path, *, keep: int | None,
          data: Callable[[object], np.ndarray] | None) -> Path:
    """Write `src` to `dst` with blocks `keep` and up left out (None: all kept) and each
    tensor's bytes from `data(tensor)` (None: the source's own)."""
    import gguf

    src, dst = Path(src), Path(dst)
    _header, reader, metadata = read_metadata(src)
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise GGUFConfigError(f"{src}: no general.architecture string")
    count_key = f"{arch}.block_count"
    blocks = metadata.get(count_key)
    if not isinstance(blocks, int) or blocks < 1:
        raise GGUFConfigError(f"{src}: {count_key} is {blocks!r}, not a positive count")
    if keep is not None and not 1 <= keep <= blocks:
        raise ValueError(f"cut_layers: keep must be in 1..{blocks} for {src.name}, got {keep}")
    dst.parent.mkdir(parents=True, exist_ok=True)
    partial = dst.with_name(f".{dst.name}.{os.getpid()}.partial")
    writer = gguf.GGUFWriter(str(partial), arch, endianess=reader.endianess)
    try:
        for field in reader.fields.values():
            if field.name.startswith("GGUF.") or field.name == "general.architecture":
                continue  # the writer writes these itself
            kind = field.types[0]
            sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
            value = field.contents()
            if field.name == count_key and keep is not None:
                value = keep
            writer.add_key_value(field.name, value, kind, sub_type=sub)
        kept = [t for t in reader.tensors
                if keep is None or (m := _BLOCK.match(t.name)) is None or int(m.group(1)) < keep]
        stored = {}
        for tensor in kept:
            stored[tensor.name] = tensor.data if data is None else data(tensor)
            if stored[tensor.name].nbytes != tensor.data.nbytes:
                raise AssertionError(f"{tensor.name}: {stored[tensor.name].nbytes} bytes made "
                                     f"for {tensor.data.nbytes}")
            writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype,
                                   tensor.data.nbytes, tensor.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for tensor in kept:
            writer.write_tensor_data(stored[tensor.name], tensor_endianess=reader.endianess)
        writer.close()
        os.replace(partial, dst)
    finally:
        writer.close()
        partial.unlink(missing_ok=True)
    return dst


def cut_layers(src: str | Path, dst: str | Path, keep: int) -> Path:
    """`src` with only its first `keep` blocks (see the module docstring); returns `dst`."""
    return _copy(src, dst, keep=keep, data=None)


def randomize(src: str | Path, dst: str | Path, seed: int = 0) -> Path:
    """`src`'s names, shapes, types and metadata with random tensor data; returns `dst`."""
    rng = np.random.default_rng(seed)

    def random_like(tensor) -> np.ndarray:
        name = tensor.tensor_type.name
        if name in FLOAT_TYPES:
            return rng.normal(0, 0.1, tensor.data.shape).astype(FLOAT_TYPES[name])
        if name not in BY_NAME or BY_NAME[name] not in SUPPORTED:
            raise UnsupportedGGUFError(f"{src}: tensor '{tensor.name}' is {name}, which "
                                       f"randomize cannot fill")
        logical = tuple(int(n) for n in reversed(tensor.shape))  # ggml lists the row last
        return encode(None, name, logical, rng).reshape(tensor.data.shape)

    return _copy(src, dst, keep=None, data=random_like)


def drafts_home() -> Path:
    """`$ONEBIT_HOME/drafts`: the derived drafts, one folder per target file."""
    from onebit.hub import onebit_home

    return onebit_home() / "drafts"


def derived_drafts(target: str | Path, *, keep: int | None = None, seed: int = 0
                   ) -> dict[str, Path]:
    """{"half": the target's first `keep` blocks (default two thirds of them), "garbage":
    random weights}, made once per target file (by its sha256) and cached."""
    from onebit.hub import sha256_of

    target = Path(target)
    _header, _reader, metadata = read_metadata(target)
    arch = metadata.get("general.architecture")
    blocks = metadata.get(f"{arch}.block_count")
    if not isinstance(blocks, int) or blocks < 1:
        raise GGUFConfigError(f"{target}: {arch}.block_count is {blocks!r}")
    keep = keep if keep is not None else max(1, (2 * blocks) // 3)
    folder = drafts_home() / f"{target.stem}-{sha256_of(target)[:16]}"
    half = folder / f"cut-{keep}-of-{blocks}.gguf"
    garbage = folder / f"random-seed{seed}.gguf"
    if not half.exists():
        cut_layers(target, half, keep)
    if not garbage.exists():
        randomize(target, garbage, seed)
    return {"half": half, "garbage": garbage}
