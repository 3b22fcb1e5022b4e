"""`load_gguf`: a GGUF file to a running `BaseModel`, with its tokenizer attached.

The file is read once (reader.py: checked, dequantised, HF names), then built by the models'
family registry exactly like a HuggingFace checkpoint with the same config, so a GGUF model
keeps every guarantee the family has (the base contract, batch invariance).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from onebit.gguf.errors import GGUFTokenizerError
from onebit.gguf.reader import GGUFContents, read_gguf
from onebit.models.kernels import BLOCK_KERNELS

TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.tokens")


def load_gguf(path: str | Path, *, tokenizer: bool | None = None, **options: Any):
    """The model in GGUF file `path` as a `BaseModel`.

    `options` are `onebit.load_model`'s (dtype, max_batch_rows, kernel, backend, ...).
    `tokenizer`: None (default) attaches `model.tokenizer` when the file carries tokenizer
    metadata; True requires it (`GGUFTokenizerError` when absent); False skips it.
    """
    from onebit.models.registry import compute_dtype

    compute_dtype(options.get("dtype", "float32"))  # a bad option before the file is read
    # the integer kernel multiplies Q8_0 / Q4_0 / Q4_1 weights in their blocks (docs/gguf.md)
    contents = read_gguf(path, keep_blocks=options.get("kernel") in BLOCK_KERNELS)
    model = build(contents, source=str(path), **options)
    if tokenizer or (tokenizer is None and has_tokenizer(contents.metadata)):
        model.tokenizer = gguf_tokenizer(contents.metadata, str(path))
    return model


def build(contents: GGUFContents, *, source: str, **options: Any):
    """Build the model of `contents` through the family registry (`build_model`)."""
    from onebit.models.registry import build_model

    return build_model(contents.config, contents.tensors, source=source, **options)


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
