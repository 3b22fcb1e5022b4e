"""Decode a stream of token ids to text without ever cutting a character in half.

A byte-level BPE token can end in the middle of a UTF-8 sequence (an emoji is four bytes and
often two or three tokens). Decoding each token alone would print a replacement character and
then garbage; the streaming decoder keeps the bytes of an incomplete character back until the
tokens that finish it arrive. Bytes that can never form a character (an invalid sequence) come
out as U+FFFD, as `decode()` prints them, so the pieces joined equal `decode(ids)`.
"""

from __future__ import annotations

import codecs


class StreamDecoder:
    """`push(token_id) -> str`: the text that became complete; `flush() -> str`: the rest."""

    def __init__(self, tokenizer, *, skip_special_tokens: bool = False) -> None:
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._strip = getattr(tokenizer, "strip_first_space", False)
        self._started = False
        self.text = ""      # everything emitted so far

    def push(self, token_id: int) -> str:
        if self._skip and int(token_id) in self._tokenizer.all_special_ids:
            return ""
        return self._emit(self._utf8.decode(self._tokenizer.token_bytes(token_id)))

    def flush(self) -> str:
        """The held-back bytes of an unfinished character, as U+FFFD (the stream is over)."""
        return self._emit(self._utf8.decode(b"", final=True))

    def _emit(self, text: str) -> str:
        if text and not self._started:
            self._started = True
            # SentencePiece puts a space before the text; decode() strips it, and so do we
            if self._strip and text.startswith(" "):
                text = text[1:]
        self.text += text
        return text
