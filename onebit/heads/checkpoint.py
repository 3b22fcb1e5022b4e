"""Draft files: a directory with `config.json` and `*.safetensors` (never pickle).

Float tensors (F16 / F32 / F64) are read with the `safetensors` package; BF16, which numpy
lacks, is read as its 16-bit patterns through the file's (validated) header and widened to
float32. Every failure is a `DraftFileError` naming the file and tensor.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from onebit.heads.errors import DraftFileError
from onebit.models.files import check_regular, read_small

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


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


def read_tensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of every `*.safetensors` file in `path`, as float32 arrays."""
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise DraftFileError(f"{path}: no *.safetensors file")
    tensors: dict[str, np.ndarray] = {}
    seen: dict[str, Path] = {}
    for file in files:
        for name, value in _read_file(file).items():
            if name in seen:
                raise DraftFileError(f"tensor '{name}' is in both {seen[name]} and {file}; "
                                     "nothing says which one to load")
            tensors[name], seen[name] = value, file
    return tensors


def _read_file(file: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError, safe_open

    check_regular(file, DraftFileError)
    try:
        handle = safe_open(str(file), framework="numpy")
    except (SafetensorError, OSError, ValueError) as error:
        raise DraftFileError(
            f"{file}: not a valid safetensors file (truncated or corrupt?): {error}"
        ) from None
    out: dict[str, np.ndarray] = {}
    with handle as f:
        for name in f.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
            dtype = f.get_slice(name).get_dtype()
            if dtype == "BF16":
                out[name] = _read_bf16(file, name)
            elif dtype in ("F16", "F32", "F64"):
                out[name] = f.get_tensor(name).astype(np.float32)
            else:
                raise DraftFileError(
                    f"{file}: tensor '{name}' has dtype {dtype}; a draft's weights are floats"
                )
    return out


def _read_bf16(file: Path, name: str) -> np.ndarray:
    with open(file, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        entry = json.loads(f.read(size))[name]
        start, end = entry["data_offsets"]
        f.seek(8 + size + start)
        raw = f.read(end - start)
    shape = tuple(entry["shape"])
    if len(raw) != end - start or (end - start) // 2 != int(np.prod(shape, dtype=np.int64)):
        raise DraftFileError(f"{file}: tensor '{name}' is truncated")
    bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return bits.view(np.float32).reshape(shape)


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


def write_draft(path: str | Path, config: dict[str, Any], tensors: dict[str, np.ndarray]) -> Path:
    """Write `config.json` and `model.safetensors` (float32) to directory `path`."""
    from safetensors.numpy import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    save_file({k: np.ascontiguousarray(v, np.float32) for k, v in tensors.items()},
              str(path / WEIGHTS_FILE))
    return path
