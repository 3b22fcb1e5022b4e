"""What every tokenizer type gives the `Tokenizer`: the ids of one stretch of plain text.

llama.cpp tokenizes in two passes (llama-vocab.cpp, `tokenize`): the text is first cut at the
special tokens' texts (special.py), then each stretch between them goes to the vocabulary
type's own algorithm. A `FragmentEncoder` is that second pass; the `Tokenizer` does the first,
adds BOS/EOS/SEP and decodes.
"""

from __future__ import annotations

from typing import Protocol


class FragmentEncoder(Protocol):
    def encode(self, text: str, *, first: bool) -> list[int]:
        """The ids of `text`, which holds no special token. `first` says that the stretch opens
        the text or follows a special token (SentencePiece puts its space prefix only there)."""
        ...
