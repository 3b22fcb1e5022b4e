"""Prompt lookup: draft by copying what followed the last time the text said the same thing.

The committed text (prompt + emitted, as `commit_rows` hands it over) plus t1 is searched for
the most recent earlier occurrence of its last n tokens; the tokens that followed it are the
drafts. If the last n tokens never occurred before, n - 1 is tried, down to 1. The copy may
run into the text's own end (a pattern that repeats with a period shorter than k): it then
keeps copying from the drafts already made, which continues the period.

No weights and no hidden rows, so the head is one-pass. With `two_pass=True` it asks for the
two-pass round instead (and ignores the hidden it is handed): the same drafts, one position
later, which lets the loop's two round kinds be compared on a real head.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class NgramHead:
    """A `DraftHead` that proposes the continuation of the longest recent match."""

    def __init__(self, n: int = 3, k: int = 8, *, two_pass: bool = False) -> None:
        for name, value in (("n", n), ("k", k)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ngram head: {name} must be an integer >= 1, got {value!r}")
        self.n = n
        self.k = k
        self.two_pass = two_pass
        self.text: list[int] = []  # committed tokens, in order

    def __repr__(self) -> str:
        return f"NgramHead(n={self.n}, k={self.k}{', two_pass=True' if self.two_pass else ''})"

    def needs_last_hidden(self) -> bool:
        return self.two_pass

    def reset(self) -> None:
        self.text = []

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        self.text.extend(int(t) for t in tokens[:count])

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None) -> list[int]:
        # t1 sits at `pos`: committed already in a two-pass round, not yet in a one-pass one.
        text = [*self.text[:pos], int(token)]
        return lookup(text, self.n, min(k, self.k))


def lookup(text: Sequence[int], n: int, k: int) -> list[int]:
    """Up to `k` tokens continuing `text`, copied from after the most recent earlier
    occurrence of its longest suffix of length n, n - 1, ..., 1 that occurred before."""
    if k < 1:
        return []
    end = len(text)
    for m in range(min(n, end - 1), 0, -1):
        suffix = list(text[end - m :])
        # the latest start i < end - m whose m tokens equal the suffix
        for i in range(end - m - 1, -1, -1):
            if list(text[i : i + m]) == suffix:
                seq = list(text)
                for j in range(k):
                    seq.append(seq[i + m + j])  # i + m + j < len(seq): copies may overlap
                return seq[end:]
    return []
