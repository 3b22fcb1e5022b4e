"""Errors raised while reading a GGUF file.

Each is a subclass of the models' errors (and so a `ValueError`), so a caller that already
catches `ModelFileError` around `load_model` catches these too; the GGUF classes let a caller
tell a damaged file from a well-formed file onebit does not run. Every message starts with the
file's path and names the field, tensor or value at fault.
"""

from __future__ import annotations

from onebit.models.errors import ModelConfigError, ModelFileError, UnsupportedModelError


class GGUFError(ModelFileError):
    """The file is not a well-formed GGUF file: wrong magic or version, truncated, a count or
    dimension that would allocate absurd memory, a tensor running past the end, a duplicate
    name."""


class GGUFConfigError(ModelConfigError):
    """The metadata is well-formed but wrong for the model: a missing or mis-typed field, or
    values that contradict each other or the tensors' shapes."""


class UnsupportedGGUFError(UnsupportedModelError):
    """The file asks for something onebit does not run: an unknown tensor type, an unknown
    architecture, or a metadata field or tensor the forward would not use."""


class GGUFTokenizerError(GGUFConfigError):
    """A tokenizer was asked for and the file lacks the `tokenizer.*` metadata it needs."""
