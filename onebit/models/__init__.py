"""Real base models: the NumPy reference forward of Qwen3 / Qwen3.5 / Gemma 4 and its file
formats.

`load_model(path)` reads a model directory (a Q4NX container or a HuggingFace checkpoint) and
returns a `BaseModel`. See docs/forward.md for the facts the forward is built on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from onebit.backends import Backend
from onebit.models.config import ModelConfig
from onebit.models.decoder import DecoderBase
from onebit.models.errors import (
    ModelConfigError,
    ModelError,
    ModelFileError,
    ModelInputError,
    Q4NXError,
    UnsupportedModelError,
)
from onebit.models.fabricate import fabricate_model, random_weights, tiny_config
from onebit.models.gemma4 import PLE_ENV, Gemma4Model
from onebit.models.gemma4_config import Gemma4Config, read_json
from onebit.models.llama import LlamaConfig, LlamaModel
from onebit.models.qwen3 import DEFAULT_MAX_BATCH_ROWS, Qwen3Model
from onebit.models.registry import (
    DTYPES,  # noqa: F401 (onebit.models.DTYPES, as before the registry)
    Family,
    build,
    build_model,
    compute_dtype,
    family_for,
    family_named,
)
from onebit.models.weights import (
    CONFIG_FILE,
    UNPACK_ENV,
    WeightStore,
    container_kind,
    load_tensors,
)


def load_model(
    path: str | Path,
    *,
    dtype: str | type = "float32",
    max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS,
    kernel: str | None = None,
    q4nx_convention: str = "unsigned",
    unpack_per_token: bool | None = None,
    backend: str | Backend = "host",
    max_prefill_rows: int | None = None,
    **options,
) -> DecoderBase:
    """Load the model at `path` as a `BaseModel`.

    `path` is a directory holding `config.json` and either `model.q4nx` (a Q4NX container) or
    `*.safetensors` (a HuggingFace checkpoint), or a `.gguf` file (read by `onebit.gguf`).
    The family comes from config.json's `model_type` (`onebit.models.registry`: qwen3,
    qwen3_5, gemma4, llama / mistral / qwen2). Options:
    - `dtype`: "float32" (default) or "float64", the compute precision;
    - `max_batch_rows`: the most rows one decode `verify` takes (default 8);
    - `max_prefill_rows`: the most prompt tokens one prefill batch takes (default 64, never
      below `max_batch_rows`); Gemma 4 prefills in batches of `max_batch_rows` and refuses a
      wider value (its sliding-window cache holds that many rows past the window);
    - `kernel`: by default (None) the fastest exact kernel: "int8" on the host backend when
      numba is installed (`default_kernel()`: GGUF Q8_0 / Q4_0 / Q4_1 and Q4NX weights
      multiplied in their blocks by int8_kernel.py, llama.cpp's computation; float weights by
      the tiled float kernel; a Q4NX file whose scales do not fit float16 blocks falls back to
      "numba"), else "auto". The float reference by name: "auto" (numba when installed, else
      numpy), "numba" (GGUF weights dequantised at load, Q4NX weights multiplied packed, by
      q4nx_kernel.py), "numba-float" (Q4NX weights dequantised to a float cache) or "numpy"
      (see kernels.py); "int8" by name insists on the integer kernel;
    - `q4nx_convention`: "unsigned" codes 0..15, or "signed" (GGUF Q4_0: -8..7, min 0);
    - `unpack_per_token`: unpack Q4NX weights on every use instead of once; default from the
      environment variable ONEBIT_UNPACK_PER_TOKEN. On a device backend it also prepares
      (uploads) each weight again for every product: the slow arm of the residency A/B;
    - `backend`: where the products run (docs/device.md): "host" (default, the kernels above),
      "torch" (CPU torch), "cuda" (torch on a GPU), "npu" (pyxrt, kernels from
      $ONEBIT_KERNEL_DIR), or a `onebit.backends.Backend` object;
    - `options`: a family's own keywords (Gemma 4: `ple_per_token`).

    Bad files raise `ModelFileError` / `ModelConfigError` (both `ValueError`s) naming the file,
    tensor or field.
    """
    chosen = kernel if kernel is not None else default_kernel(backend, dtype)
    common = dict(dtype=dtype, max_batch_rows=max_batch_rows, kernel=chosen,
                  q4nx_convention=q4nx_convention, unpack_per_token=unpack_per_token,
                  backend=backend, max_prefill_rows=max_prefill_rows, **options)
    if str(path).lower().endswith(".gguf"):
        return _load_gguf(Path(path), common)
    path = Path(path)
    compute_dtype(dtype)  # a bad dtype is refused before any file is read
    kind = container_kind(path)
    raw = read_json(path / CONFIG_FILE)
    family_for(raw, str(path / CONFIG_FILE))  # an unknown family before the tensors are read
    tensors = load_tensors(path, kind)
    try:
        return build(raw, tensors, config_source=str(path / CONFIG_FILE),
                     weights_source=str(path), **common)
    except ModelFileError as error:
        # the default's integer kernel refuses a Q4NX weight whose scales do not fit float16
        # blocks (blocks.q4nx_half_scales); the default then takes the float reference, which
        # reads it. Asked for by name, "int8" still refuses.
        if kernel is not None or chosen != "int8" or not _block_form_refusal(error):
            raise
    return build(raw, tensors, config_source=str(path / CONFIG_FILE),
                 weights_source=str(path), **dict(common, kernel="numba"))


def default_kernel(backend: str | Backend = "host", dtype: str | type = "float32") -> str:
    """The kernel `load_model` runs when none is named: the fastest exact one, "int8" (the
    integer kernel on block weights, the tiled float kernel on float ones) on the host backend
    in float32 when numba imports; else "auto" (numpy without numba; a device backend's own
    default; float64, whose user asked for precision the integer kernel's float32 sums and
    int8 activations do not keep)."""
    from onebit.models.kernels import numba_available

    host = isinstance(backend, str) and backend == "host"
    if host and compute_dtype(dtype) == np.float32 and numba_available():
        return "int8"
    return "auto"


def _block_form_refusal(error: ModelFileError) -> bool:
    """Whether `error` is the integer kernel's refusal of a Q4NX weight as blocks."""
    text = str(error)
    return ("the integer kernel keeps float16 scales" in text
            or "to run as q4_0 blocks" in text)


def _load_gguf(path: Path, options: dict):
    """A GGUF file through `onebit.gguf.load_gguf` (its own module, imported only here)."""
    try:
        from onebit.gguf import load_gguf
    except ImportError as error:
        if getattr(error, "name", None) not in ("onebit.gguf", "gguf"):
            raise
        raise UnsupportedModelError(
            f"{path}: reading GGUF files needs onebit.gguf and the 'gguf' package "
            f"({error}); load a model directory instead") from None
    return load_gguf(path, **options)


__all__ = [
    "DEFAULT_MAX_BATCH_ROWS",
    "Gemma4Config",
    "Family",
    "Gemma4Model",
    "LlamaConfig",
    "LlamaModel",
    "ModelConfig",
    "ModelConfigError",
    "ModelError",
    "ModelFileError",
    "ModelInputError",
    "PLE_ENV",
    "Q4NXError",
    "Qwen3Model",
    "UNPACK_ENV",
    "UnsupportedModelError",
    "WeightStore",
    "build_model",
    "fabricate_model",
    "family_named",
    "load_model",
    "random_weights",
    "tiny_config",
]
