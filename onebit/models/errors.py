"""Errors raised while reading a model or feeding it input.

All are `ValueError`s, so a caller that treats bad input generically still catches them; the
subclasses let a caller tell a broken file from a bad argument. Every message names the file,
tensor, field or value at fault.
"""

from __future__ import annotations


class ModelError(ValueError):
    """Something about a model (its files, its config, or its input) is wrong."""


class ModelFileError(ModelError):
    """A model file is missing, truncated, corrupt, or lacks / mis-shapes a tensor."""


class ModelConfigError(ModelFileError):
    """`config.json` is missing a field, has a bad value, or names an unsupported layer type."""


class ModelInputError(ModelError):
    """A call into the model got a bad argument (token id outside the vocabulary, bad position,
    bad layer id, a batch too large)."""


class Q4NXError(ValueError):
    """A Q4NX pack / unpack got arrays of the wrong shape, dtype or value range."""


class UnsupportedModelError(ModelConfigError):
    """`config.json` asks for something the forward does not implement (a vision or audio tower,
    a mixture-of-experts block, an unknown field with a value): refused rather than run wrong."""
