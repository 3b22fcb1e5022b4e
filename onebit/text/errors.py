"""The typed errors of text in and text out: each names the value and the place it came from."""

from __future__ import annotations


class TokenizerError(ValueError):
    """A tokenizer description (GGUF metadata or a tokenizer.json) is missing a field, carries a
    value of the wrong type or size, or asks for a tokenizer onebit does not build."""


class ChatTemplateError(ValueError):
    """A chat template failed to parse or render, or tried to reach outside its sandbox."""


class PromptError(ValueError):
    """A prompt onebit refuses before decoding: longer than the model's context, not valid
    UTF-8, or empty."""
