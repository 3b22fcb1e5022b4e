"""Draft files: a directory with `config.json` and `*.safetensors` (never pickle).

Tensors are read by the models' safetensors reader (`onebit.models.weights.read_safetensors`:
F16 / F32 / F64 with the `safetensors` package, BF16, which numpy lacks, as its 16-bit patterns
through the file's validated header) and widened to float32.
`read_tensors(path, keep=...)` reads only the tensors a head needs (the MTP weights of
a whole target checkpoint, say), opening only the shards the index names for them. Drafts are
written as published ones are: BF16 tensors in `model.safetensors`. Every failure is a
`DraftFileError` naming the file and tensor.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from onebit.heads.errors import DraftFileError
from onebit.models.files import read_small
from onebit.models.weights import as_float32, read_safetensors

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


def read_config(path: str | Path) -> tuple[dict[str, Any], str]:
    """`config.json` of a draft directory as a dict, and its path (for messages)."""
    file = Path(path) / CONFIG_FILE
    if not Path(path).is_dir():
        raise DraftFileError(f"{path}: not a directory (a draft is a directory with "
                             f"{CONFIG_FILE} and *.safetensors)")
    try:  # a regular UTF-8 file only: a FIFO in its place is refused, not waited on
        raw = json.loads(read_small(file, DraftFileError))
    except (json.JSONDecodeError, RecursionError) as error:
        raise DraftFileError(f"{file}: not valid JSON: {error}") from None
    if not isinstance(raw, dict):
        raise DraftFileError(f"{file}: expected a JSON object, got {type(raw).__name__}")
    return raw, str(file)


def read_tensors(path: str | Path,
                 keep: Callable[[str], bool] | None = None) -> dict[str, np.ndarray]:
    """The tensors of the `*.safetensors` files in `path` whose names `keep` accepts (all when
    None), as float32 arrays. With an index (`model.safetensors.index.json`), only the shards
    it names for kept tensors are opened; tensors not kept are never read."""
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise DraftFileError(f"{path}: no *.safetensors file")
    index = Path(path) / INDEX_FILE
    if keep is not None and index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise DraftFileError(f"{index}: not a safetensors index: {error}") from None
        wanted = {weight_map[name] for name in weight_map if keep(name)}
        files = [f for f in files if f.name in wanted]
    tensors: dict[str, np.ndarray] = {}
    seen: dict[str, Path] = {}
    for file in files:
        for name, value in _read_file(file, keep).items():
            if name in seen:
                raise DraftFileError(f"tensor '{name}' is in both {seen[name]} and {file}; "
                                     "nothing says which one to load")
            tensors[name], seen[name] = value, file
    return tensors


def _read_file(file: Path, keep: Callable[[str], bool] | None = None) -> dict[str, np.ndarray]:
    """One file's kept tensors as float32, read by the models' reader (one safetensors reader
    for models and heads), with failures as `DraftFileError`."""
    stored = read_safetensors(file, keep=keep, error=DraftFileError)
    return {name: as_float32(value) for name, value in stored.items()}


def check_shapes(
    tensors: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]], source: str
) -> None:
    """Every expected tensor is there with its shape; raises `DraftFileError` naming it."""
    for name, shape in shapes.items():
        if name not in tensors:
            raise DraftFileError(f"{source}: missing tensor '{name}'")
        if tuple(tensors[name].shape) != shape:
            raise DraftFileError(
                f"{source}: tensor '{name}' has shape {tuple(tensors[name].shape)}; the config "
                f"says {shape}"
            )


def check_known(tensors: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]],
                source: str, what: str) -> None:
    """Refuse tensors the head does not read: a weight it would ignore changes what the
    checkpoint computes (DFlash2's convolutions, say), so loading it silently is wrong."""
    unknown = sorted(set(tensors) - set(shapes))
    if unknown:
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise DraftFileError(f"{source}: tensor '{unknown[0]}'{more} is not part of {what}; "
                             "a checkpoint with weights this head does not compute with is "
                             "refused rather than run without them")


def strip_prefix(
    tensors: dict[str, np.ndarray], prefixes: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """Names without a leading wrapper prefix (`model.`, `mtp.`, ...)."""
    out = {}
    for name, value in tensors.items():
        for prefix in prefixes:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        out[name] = value
    return out


def write_draft(path: str | Path, config: dict[str, Any], tensors: dict[str, np.ndarray],
                *, name: str = WEIGHTS_FILE) -> Path:
    """Write `config.json` and the tensors, in BF16 as published drafts are, to `path`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    write_bf16(path / name, tensors)
    return path


def to_bf16_bits(value: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, rounded to nearest even (as torch rounds); NaN stays
    a (quiet) NaN rather than rounding into the exponent."""
    value = np.ascontiguousarray(value, np.float32)
    bits = value.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(value), np.uint16(0x7FC0), rounded).astype(np.uint16)


def write_bf16(file: str | Path, tensors: dict[str, np.ndarray]) -> Path:
    """A safetensors file holding every tensor as BF16 (numpy has no bfloat16, and
    `safetensors.numpy` cannot write it, so the header is written here)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for tensor_name in sorted(tensors):
        value = np.asarray(tensors[tensor_name])
        blob = to_bf16_bits(value).astype("<u2").tobytes()
        header[tensor_name] = {"dtype": "BF16", "shape": list(value.shape),
                               "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned
    with open(file, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for blob in blobs:
            f.write(blob)
    return Path(file)
