"""Errors raised while reading a draft head or pairing it with its target.

All are `ValueError`s (bad input, not a broken loop); every message names the file, tensor,
field or size at fault, so a command can print it as one line.
"""

from __future__ import annotations


class DraftError(ValueError):
    """Something about a draft head (its files, its config, its pairing or its input) is wrong."""


class DraftFileError(DraftError):
    """A draft's config.json or safetensors file is missing, corrupt, or lacks / mis-shapes a
    tensor or field."""


class DraftMismatchError(DraftError):
    """A draft does not fit its target: hidden size, layer ids, vocabulary or mask token."""
