"""`load_gguf`: a GGUF file to a running `BaseModel`, with its tokenizer attached.

The file is read once (reader.py: checked, dequantised, HF names), then built by the models'
family registry exactly like a HuggingFace checkpoint with the same config, so a GGUF model
keeps every guarantee the family has (the base contract, batch invariance).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from onebit.gguf.errors import GGUFTokenizerError, UnsupportedGGUFError
from onebit.gguf.reader import GGUFContents, read_gguf

DTYPES = {"float32": np.float32, "float64": np.float64}
TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.tokens")


def load_gguf(path: str | Path, *, tokenizer: bool | None = None, **options: Any):
    """The model in GGUF file `path` as a `BaseModel`.

    `options` are `onebit.load_model`'s (dtype, max_batch_rows, kernel, backend, ...).
    `tokenizer`: None (default) attaches `model.tokenizer` when the file carries tokenizer
    metadata; True requires it (`GGUFTokenizerError` when absent); False skips it.
    """
    contents = read_gguf(path)
    model = build(contents, source=str(path), **options)
    if tokenizer or (tokenizer is None and has_tokenizer(contents.metadata)):
        model.tokenizer = gguf_tokenizer(contents.metadata, str(path))
    return model


def build(contents: GGUFContents, *, source: str, **options: Any):
    """Build the model of `contents` through the family registry."""
    dtype = options.pop("dtype", "float32")
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        dtype = DTYPES[dtype]
    try:
        from onebit.models.registry import build_model
    except ImportError:  # before the family registry: only the Qwen3 forward exists
        return _build_qwen3(contents, source=source, dtype=dtype, **options)
    return build_model(contents.config, contents.tensors, source=source, dtype=dtype, **options)


def _build_qwen3(contents: GGUFContents, *, source: str, dtype, **options: Any):
    from onebit.models import DEFAULT_MAX_BATCH_ROWS, ModelConfig, Qwen3Model, WeightStore

    if contents.config["model_type"] != "qwen3":
        raise UnsupportedGGUFError(f"{source}: a {contents.config['model_type']} model needs "
                                   "the family registry (onebit.models.registry)")
    config = ModelConfig.from_dict(contents.config, source=source)
    weights = WeightStore(contents.tensors, config, dtype=dtype, source=source)
    return Qwen3Model(config, weights,
                      max_batch_rows=options.get("max_batch_rows", DEFAULT_MAX_BATCH_ROWS),
                      kernel=options.get("kernel", "auto"),
                      backend=options.get("backend", "host"),
                      max_prefill_rows=options.get("max_prefill_rows"))


def has_tokenizer(metadata: dict[str, Any]) -> bool:
    return all(key in metadata for key in TOKENIZER_KEYS)


def gguf_tokenizer(metadata: dict[str, Any], source: str):
    """The tokenizer the metadata describes (onebit.text); `GGUFTokenizerError` naming the
    file and the missing or bad field."""
    for key in TOKENIZER_KEYS:
        if key not in metadata:
            raise GGUFTokenizerError(f"{source}: missing tokenizer metadata '{key}'")
    from onebit.text import Tokenizer, TokenizerError

    try:
        return Tokenizer.from_gguf_metadata(metadata)
    except TokenizerError as error:
        raise GGUFTokenizerError(f"{source}: {error}") from None
