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
from onebit.models.errors import (
    ModelConfigError,
    ModelError,
    ModelFileError,
    ModelInputError,
    Q4NXError,
    UnsupportedModelError,
)
from onebit.models.fabricate import fabricate_model, random_weights, tiny_config
from onebit.models.gemma4 import PLE_ENV, Gemma4Model, load_gemma4
from onebit.models.gemma4_config import Gemma4Config, is_gemma4, read_json
from onebit.models.qwen3 import DEFAULT_MAX_BATCH_ROWS, Qwen3Model
from onebit.models.weights import (
    CONFIG_FILE,
    UNPACK_ENV,
    WeightStore,
    container_kind,
    load_tensors,
)

DTYPES = {"float32": np.float32, "float64": np.float64}


def load_model(
    path: str | Path,
    *,
    dtype: str | type = "float32",
    max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS,
    kernel: str = "auto",
    q4nx_convention: str = "unsigned",
    unpack_per_token: bool | None = None,
    backend: str | Backend = "host",
    max_prefill_rows: int | None = None,
) -> Qwen3Model:
    """Load the model in directory `path` as a `BaseModel`.

    `path` holds `config.json` and either `model.q4nx` (a Q4NX container) or `*.safetensors`
    (a HuggingFace checkpoint). Options:
    - `dtype`: "float32" (default) or "float64", the compute precision;
    - `max_batch_rows`: the most rows one decode `verify` takes (default 8);
    - `max_prefill_rows`: the most prompt tokens one prefill batch takes (default 64, never
      below `max_batch_rows`); Gemma 4 prefills in batches of `max_batch_rows` and refuses a
      wider value (its sliding-window cache holds that many rows past the window);
    - `kernel`: "auto" (numba when installed), "numba" (Q4NX weights multiplied packed, by
      q4nx_kernel.py), "numba-float" (Q4NX weights dequantised to a float cache) or "numpy"
      (see kernels.py);
    - `q4nx_convention`: "unsigned" codes 0..15, or "signed" (GGUF Q4_0: -8..7, min 0);
    - `unpack_per_token`: unpack Q4NX weights on every use instead of once; default from the
      environment variable ONEBIT_UNPACK_PER_TOKEN. On a device backend it also prepares
      (uploads) each weight again for every product: the slow arm of the residency A/B;
    - `backend`: where the products run (docs/device.md): "host" (default, the kernels above),
      "torch" (CPU torch), "cuda" (torch on a GPU), "npu" (pyxrt, kernels from
      $ONEBIT_KERNEL_DIR), or a `onebit.backends.Backend` object.

    Bad files raise `ModelFileError` / `ModelConfigError` (both `ValueError`s) naming the file,
    tensor or field.
    """
    path = Path(path)
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        dtype = DTYPES[dtype]
    elif np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    kind = container_kind(path)
    raw = read_json(path / CONFIG_FILE)
    if is_gemma4(raw):  # Gemma 4 (docs/gemma4.md): its own config and forward
        if max_prefill_rows is not None and max_prefill_rows != max_batch_rows:
            raise ValueError(f"max_prefill_rows = {max_prefill_rows!r}: a Gemma 4 model "
                             f"prefills in batches of max_batch_rows ({max_batch_rows})")
        return load_gemma4(path, raw, kind, dtype=dtype, max_batch_rows=max_batch_rows,
                           kernel=kernel, q4nx_convention=q4nx_convention,
                           unpack_per_token=unpack_per_token, backend=backend)
    config = ModelConfig.from_dict(raw, source=str(path / CONFIG_FILE))
    tensors = load_tensors(path, kind)
    weights = WeightStore(
        tensors,
        config,
        dtype=dtype,
        convention=q4nx_convention,
        unpack_per_token=unpack_per_token,
        source=str(path),
    )
    return Qwen3Model(config, weights, max_batch_rows=max_batch_rows, kernel=kernel,
                      backend=backend, max_prefill_rows=max_prefill_rows)


__all__ = [
    "DEFAULT_MAX_BATCH_ROWS",
    "Gemma4Config",
    "Gemma4Model",
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
    "fabricate_model",
    "load_model",
    "random_weights",
    "tiny_config",
]
