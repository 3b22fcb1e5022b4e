"""SentencePiece BPE (GGUF `tokenizer.ggml.model` = "llama"), as llama.cpp runs it.

A GGUF keeps the pieces and their scores but no merges. llama.cpp (llama-vocab.cpp,
`llm_tokenizer_spm_session`) splits the text into characters and, again and again, joins the
adjacent pair whose joined text is a piece with the highest score, the leftmost pair on a tie.
A character that is no piece falls back to its UTF-8 bytes, the `<0xAB>` pieces. Spaces are
spelled "▁", and a space is put before a stretch of text that opens the input or follows a
special token (`add_space_prefix`).

This is not the same as BPE with merges ranked by score, which onebit used before and
HuggingFace's converter still uses: ranks order pairs, not places, so two pairs that make
pieces of equal score ("▁▁" + "▁" and "▁" + "▁▁" both make "▁▁▁") were taken in rank order
instead of left to right, and a run of spaces came out as other ids than llama.cpp's (`' '`
gave `[29871]` where llama.cpp gives `[259]`).
"""

from __future__ import annotations

import heapq
import re

from onebit.text.errors import TokenizerError

SPACE = "\u2581"
_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def byte_of_piece(piece: str) -> int | None:
    """The byte a `<0xAB>` fallback piece stands for, else None."""
    match = _BYTE_PIECE.match(piece)
    return int(match.group(1), 16) if match else None


class SentencePieceEncoder:
    """The `FragmentEncoder` of a SentencePiece BPE vocabulary."""

    def __init__(self, tokens: list[str], scores: list[float], *, add_space_prefix: bool):
        self._ids = {text: i for i, text in enumerate(tokens)}
        self._scores = scores
        self._add_space_prefix = add_space_prefix
        self._byte_ids = [self._byte_id(b) for b in range(256)]

    def _byte_id(self, byte: int) -> int | None:
        found = self._ids.get(f"<0x{byte:02X}>")
        if found is None and byte < 0x80:       # llama.cpp's fallback: the byte as text
            found = self._ids.get(chr(byte))
        return found

    def encode(self, text: str, *, first: bool) -> list[int]:
        if self._add_space_prefix and first:
            text = " " + text
        text = text.replace(" ", SPACE)
        if not text:
            return []
        return self._merge(text)

    def _merge(self, text: str) -> list[int]:
        ids, scores = self._ids, self._scores
        # the symbols as a doubly linked list over the characters: [start, end) of each, with
        # a merged-away symbol's length 0
        n = len(text)
        start = list(range(n))
        end = list(range(1, n + 1))
        prev = list(range(-1, n - 1))
        nxt = [*range(1, n), -1]
        queue: list[tuple[float, int, int, int]] = []

        def push(left: int, right: int) -> None:
            if left < 0 or right < 0:
                return
            token = ids.get(text[start[left]:end[right]])
            if token is not None:
                # highest score first, then leftmost; the length tells a stale entry
                heapq.heappush(queue, (-scores[token], left, end[right] - start[left], right))

        for i in range(1, n):
            push(i - 1, i)
        while queue:
            _, left, size, right = heapq.heappop(queue)
            if end[left] == start[left] or end[right] == start[right] \
                    or end[right] - start[left] != size:
                continue
            end[left] = end[right]
            start[right] = end[right]           # length 0: merged away
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            push(prev[left], left)
            push(left, nxt[left])
        out: list[int] = []
        i = 0
        while i >= 0:
            piece = text[start[i]:end[i]]
            token = ids.get(piece)
            if token is not None:
                out.append(token)
            else:
                out.extend(self._bytes(piece))
            i = nxt[i]
        return out

    def _bytes(self, piece: str) -> list[int]:
        out = []
        for byte in piece.encode("utf-8"):
            token = self._byte_ids[byte]
            if token is None:
                raise TokenizerError(
                    f"the vocabulary has no piece for {piece!r} and no byte piece "
                    f"<0x{byte:02X}> to spell it with")
            out.append(token)
        return out
