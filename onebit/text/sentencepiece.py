"""SentencePiece BPE (GGUF `tokenizer.ggml.model` = "llama") as a `tokenizers` pipeline.

A GGUF keeps the pieces and their scores but no merges: a piece's score is its rank, so the
merges are recovered from the vocabulary (every split of a piece into two pieces, best score
first). Spaces are spelled "▁", a space is put before the text (`add_space_prefix`), and a
character outside the vocabulary falls back to its UTF-8 bytes, the `<0xAB>` pieces.
"""

from __future__ import annotations

import re

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

SPACE = "\u2581"
_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def byte_of_piece(piece: str) -> int | None:
    """The byte a `<0xAB>` fallback piece stands for, else None."""
    match = _BYTE_PIECE.match(piece)
    return int(match.group(1), 16) if match else None


def recover_merges(tokens: list[str], scores: list[float]) -> list[tuple[str, str]]:
    """The merges a scored vocabulary implies: a piece is made from two pieces, and the higher
    its score the earlier the merge. Ties keep the order of the pieces' ids."""
    vocab = {}
    for index, token in enumerate(tokens):
        vocab.setdefault(token, index)
    found = []
    for token, index in vocab.items():
        if len(token) < 2 or byte_of_piece(token) is not None:
            continue
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in vocab and right in vocab:
                found.append((-scores[index], index, vocab[left], vocab[right], left, right))
    found.sort()
    return [(left, right) for *_, left, right in found]


def build(tokens: list[str], scores: list[float], add_space_prefix: bool, unk: str | None
          ) -> Tokenizer:
    vocab = {}
    for index, token in enumerate(tokens):
        vocab.setdefault(token, index)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=recover_merges(tokens, scores),
                               unk_token=unk, fuse_unk=True, byte_fallback=True, dropout=None))
    scheme = "first" if add_space_prefix else "never"
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme=scheme,
                                                 split=False)
    steps = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_space_prefix:
        steps.append(decoders.Strip(content=" ", left=1))
    tok.decoder = decoders.Sequence(steps)
    return tok
