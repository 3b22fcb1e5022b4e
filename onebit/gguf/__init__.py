"""GGUF files in: llama.cpp's format, read through `gguf` (its own numpy reader).

- `load_gguf(path, **load_model options)`: the model as a `BaseModel`, tokenizer attached;
- `read_gguf(path)`: the lower layer: the HF-style config dict, the tensors by HF name
  (`onebit.models.weights.Stored`, dequantised) and the raw metadata as a plain dict.

Modules: header.py (the bounded header walk), types.py (block layouts, dequantisation),
mapping.py (architecture metadata and tensor names -> HF), reader.py (reading), loader.py
(building). See docs/gguf.md.
"""

from onebit.gguf.errors import (
    GGUFConfigError,
    GGUFError,
    GGUFTokenizerError,
    UnsupportedGGUFError,
)
from onebit.gguf.loader import gguf_tokenizer, load_gguf
from onebit.gguf.reader import GGUFContents, read_gguf, read_metadata
from onebit.gguf.types import SUPPORTED, dequantize

__all__ = [
    "GGUFConfigError",
    "GGUFContents",
    "GGUFError",
    "GGUFTokenizerError",
    "SUPPORTED",
    "UnsupportedGGUFError",
    "dequantize",
    "gguf_tokenizer",
    "load_gguf",
    "read_gguf",
    "read_metadata",
]
