"""Text in, text out: tokenizers from GGUF metadata or tokenizer.json, streaming decode, chat
templates in a sandbox, and `generate()` (docs/real-models.md)."""

from onebit.text.errors import ChatTemplateError, PromptError, TokenizerError
from onebit.text.stream import StreamDecoder
from onebit.text.tokenizer import Tokenizer

__all__ = ["ChatTemplateError", "PromptError", "StreamDecoder", "Tokenizer", "TokenizerError"]
