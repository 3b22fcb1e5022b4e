"""The model families, in one table: the only place `load_model`, `build_model` and
`fabricate_model` look a family up.

A `Family` says which `model_type` values of a config.json it reads, how it reads its config,
which tensors that config needs, how it builds its forward, and how tests fabricate a tiny
random one. Adding a family is one `Family(...)` entry in `FAMILIES` plus the family's own
module (CONTRIBUTING.md, "Add a model family").

`build_model(raw_config, tensors, source=...)` is the entry point for any reader that has a
config dict and tensors by HF name (safetensors directories here, GGUF files in
`onebit.gguf`): it finds the family, reads the config, checks every tensor against the
family's shapes (`WeightStore`) and builds the model. Its signature is kept stable.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from onebit.backends import Backend
from onebit.models.errors import ModelConfigError
from onebit.models.weights import Stored, WeightStore

DTYPES = {"float32": np.float32, "float64": np.float64}


@dataclass(frozen=True)
class Family:
    """One model family. Every callable is the family's own (its module defines them):

    - `read_config(raw, source)`: a validated config from a config.json dict (`source` names
      it in errors), `ModelConfigError` naming the field otherwise;
    - `shapes(config)`: every tensor the forward reads, by HF name, with its shape;
    - `build(config, weights, **options)`: the `BaseModel` (options: `max_batch_rows`,
      `max_prefill_rows`, `kernel`, `backend`, and the family's own keywords);
    - `tiny_config(**overrides)` / `random_weights(config, seed)`: a tiny random model for
      tests (`fabricate_model`);
    - `unfuse(config, tensors, source)` (optional): the tensors as the forward reads them, from
      a checkpoint that stores some fused (Phi-3's qkv_proj and gate_up_proj, cut by rows),
      applied before the weights are checked against `shapes`.
    """

    name: str
    model_types: tuple[str, ...]
    read_config: Callable[[dict[str, Any], str], Any]
    shapes: Callable[[Any], dict[str, tuple[int, ...]]]
    build: Callable[..., Any]
    tiny_config: Callable[..., Any]
    random_weights: Callable[[Any, int], dict[str, np.ndarray]]
    doc: str = ""
    unfuse: Callable[[Any, dict[str, Stored], str], dict[str, Stored]] | None = None


#: Every family: its name -> "module:attribute" of its `Family`. The one list to extend.
FAMILY_MODULES = {
    "qwen3": "onebit.models.qwen3:QWEN3",
    "qwen3_5": "onebit.models.qwen3:QWEN3_5",
    "gemma4": "onebit.models.gemma4:GEMMA4",
    "gemma3": "onebit.models.gemma3:GEMMA3",
    "llama": "onebit.models.llama:LLAMA",
    "gemma2": "onebit.models.gemma2:GEMMA2",
    "phi3": "onebit.models.phi3:PHI3",
}
FAMILY_NAMES = tuple(FAMILY_MODULES)


def _families() -> dict[str, Family]:
    """The table. Imported late: each family module imports the shared decoder plumbing."""
    table: dict[str, Family] = {}
    for name, where in FAMILY_MODULES.items():
        module, attribute = where.split(":")
        family = getattr(importlib.import_module(module), attribute)
        if family.name != name:
            raise RuntimeError(f"{where} is the family {family.name!r}, listed as {name!r}")
        table[name] = family
    return table


_TABLE: dict[str, Family] | None = None


def families() -> dict[str, Family]:
    """Every registered family by name ("qwen3", "qwen3_5", "gemma4", "gemma3", "llama",
    "gemma2", "phi3")."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _families()
    return dict(_TABLE)


def family_named(name: str) -> Family:
    """The family called `name` (a `fabricate_model` kind); `ValueError` listing them."""
    table = families()
    if name not in table:
        raise ValueError(f"kind must be one of {tuple(table)}, got {name!r}")
    return table[name]


def model_types() -> dict[str, str]:
    """config.json `model_type` -> family name, for every registered family."""
    return {t: f.name for f in families().values() for t in f.model_types}


def family_for(raw: object, source: str = "config.json") -> Family:
    """The family whose `model_type` the config dict `raw` names; `ModelConfigError` naming the
    value and every supported one otherwise."""
    if not isinstance(raw, dict):
        raise ModelConfigError(f"{source}: expected a JSON object, got {type(raw).__name__}")
    model_type = raw.get("model_type")
    if model_type is None:
        raise ModelConfigError(f"{source}: missing field 'model_type'")
    known = model_types()
    if not isinstance(model_type, str) or model_type not in known:
        shown = repr(model_type)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ModelConfigError(f"{source}: field 'model_type' is {shown}; supported: "
                               f"{sorted(known)}")
    return families()[known[model_type]]


def compute_dtype(dtype: str | type | np.dtype) -> np.dtype:
    """"float32" / "float64" (or the numpy types): the compute precision; `ValueError`
    otherwise."""
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        return np.dtype(DTYPES[dtype])
    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return np.dtype(dtype)


def build_model(
    raw_config: dict[str, Any],
    tensors: Mapping[str, Stored],
    *,
    source: str,
    dtype: str | type = "float32",
    max_batch_rows: int | None = None,
    max_prefill_rows: int | None = None,
    kernel: str = "auto",
    backend: str | Backend = "host",
    q4nx_convention: str = "unsigned",
    unpack_per_token: bool | None = None,
    **options: Any,
):
    """A `BaseModel` from a config.json-style dict and its tensors by HF name.

    - `raw_config`: the dict, with `model_type` and HF field names (a registered family's);
    - `tensors`: `Stored` tensors by name (kind "float", "bf16" or "q4nx"); names may use the
      multimodal prefixes `canonical_name` maps; tensors the family does not read are ignored;
    - `source`: names the origin (a file or directory) in every error;
    - the rest as `load_model`; `options` are the family's own keywords (Gemma 4:
      `ple_per_token`), refused by a family that has none.

    Raises `ModelConfigError` naming the field, `ModelFileError` naming the tensor (missing,
    wrong shape, not finite), `ValueError` for a bad option.
    """
    return build(raw_config, tensors, config_source=source, weights_source=source, dtype=dtype,
                 max_batch_rows=max_batch_rows, max_prefill_rows=max_prefill_rows, kernel=kernel,
                 backend=backend, q4nx_convention=q4nx_convention,
                 unpack_per_token=unpack_per_token, **options)


def build(raw_config: dict[str, Any], tensors: Mapping[str, Stored], *, config_source: str,
          weights_source: str, dtype: str | type, max_batch_rows: int | None,
          max_prefill_rows: int | None, kernel: str, backend: str | Backend,
          q4nx_convention: str, unpack_per_token: bool | None, **options: Any):
    """`build_model` with the config and the tensors named apart in errors (`load_model`:
    the config.json file and the model directory)."""
    from onebit.models.decoder import DEFAULT_MAX_BATCH_ROWS

    rows = DEFAULT_MAX_BATCH_ROWS if max_batch_rows is None else max_batch_rows
    dtype = compute_dtype(dtype)
    family = family_for(raw_config, config_source)
    config = family.read_config(raw_config, config_source)
    tensors = dict(tensors)
    if family.unfuse is not None:
        tensors = family.unfuse(config, tensors, weights_source)
    weights = WeightStore(tensors, config, dtype=dtype, convention=q4nx_convention,
                          unpack_per_token=unpack_per_token, source=weights_source,
                          shapes=family.shapes(config))
    model = family.build(config, weights, max_batch_rows=rows, max_prefill_rows=max_prefill_rows,
                         kernel=kernel, backend=backend, **options)
    # The longest sequence the model was trained for: `generate` refuses a prompt that fills it
    # (a GGUF file's `<arch>.context_length` arrives here as max_position_embeddings).
    model.context_length = context_length(raw_config, config_source)
    return model


def context_length(raw_config: dict[str, Any], source: str) -> int | None:
    """`max_position_embeddings`, checked, or None when the config does not say."""
    value = raw_config.get("max_position_embeddings")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelConfigError(
            f"{source}: max_position_embeddings must be a positive integer, got {value!r}")
    return value


__all__ = ["FAMILY_NAMES", "Family", "build_model", "compute_dtype", "families", "family_for",
           "family_named", "model_types"]
