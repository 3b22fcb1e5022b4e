"""A trained head with prompt lookup in front: copy where the text repeats itself, ask the head
elsewhere.

Prompt lookup is nearly free and right most of the time where an answer repeats what came
before (a recipe's quantities, an email's names, code), and has nothing to say elsewhere; a
trained head has something to say everywhere but costs a part of a step to ask. So each round,
when the text ending at t1 occurred before as a whole `n`-gram, the drafts are the tokens that
followed it (`onebit.heads.ngram.lookup`), and the head is not asked; otherwise the head
drafts.

Under `PolicyHead` every draft carries a `confidence` (what the policy bins its acceptance by):
the head's own for its drafts; for copied drafts, how often copied drafts at that place in a
proposal were right so far, measured here on the committed text (draft i counted only where
drafts 1 .. i-1 were right, as the policy's slots are; prior 1 hit in 2). Which source drafts
depends only on the committed text, never on a draw, so sampled speculation stays exact: a
copied draft is deterministic (its q row is one-hot), and the head samples its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onebit.heads.ngram import lookup


class HybridHead:
    """A one-pass `DraftHead`: prompt lookup where a whole `n`-gram repeats, `head` elsewhere
    (see the module docstring). `k`: the most drafts a round (default the head's); the head is
    asked for at most its own `k` of them, a copy may run to `k`."""

    def __init__(self, head, *, n: int = 3, k: int | None = None) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"hybrid head: n must be an integer >= 1, got {n!r}")
        self.head = head
        self.n = n
        self.k = int(k if k is not None else getattr(head, "k", 4))
        if self.k < 1:
            raise ValueError(f"hybrid head: k must be >= 1, got {k!r}")
        self.text: list[int] = []
        self.copied_right = np.ones(self.k)  # per draft place: copied drafts right ...
        self.copied_asked = np.full(self.k, 2.0)  # ... of those asked (prior 1 in 2)
        self.pending: list[tuple[int, list[int]]] = []  # copied proposals not yet scored
        self.confidence: list[float] = []
        self.stop_below = 0.0
        self.copies = self.asks = 0  # rounds drafted by copying / by the head

    def __repr__(self) -> str:
        return f"HybridHead({self.head!r}, n={self.n}, k={self.k})"

    def needs_last_hidden(self) -> bool:
        return False

    def use_sampling(self, sampling, rng) -> None:
        if callable(getattr(self.head, "use_sampling", None)):
            self.head.use_sampling(sampling, rng)

    def reset(self) -> None:
        self.head.reset()
        self.text = []
        self.pending = []
        self.confidence = []

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        self.head.commit_rows(tokens, rows, count)
        self.text.extend(int(t) for t in tokens[:count])
        self._score()

    def _score(self) -> None:
        """Score every copied proposal the committed text now decides: up to its first wrong
        draft, or all of it once the text has run past its last draft."""
        left = []
        for pos, drafts in self.pending:
            truth = self.text[pos + 1: pos + 1 + len(drafts)]
            pairs = zip(drafts, truth, strict=False)  # truth may be shorter
            miss = next((i for i, (d, t) in enumerate(pairs) if d != t), None)
            if miss is None and len(truth) < len(drafts):
                left.append((pos, drafts))  # not decided yet
                continue
            right = len(drafts) if miss is None else miss
            self.copied_asked[: right + (miss is not None)] += 1
            self.copied_right[:right] += 1
        self.pending = left

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None):
        want = min(int(k), self.k)
        if want < 1:
            self.confidence = []
            return []
        text = [*self.text[:pos], int(token)]
        copied = _whole_match(text, self.n, want)
        if copied:
            self.copies += 1
            self.pending.append((pos, copied))
            self.confidence = list(self.copied_right[: len(copied)]
                                   / self.copied_asked[: len(copied)])
            return copied
        self.asks += 1
        if hasattr(self.head, "stop_below"):
            self.head.stop_below = self.stop_below
        drafts = self.head.propose(token, pos, want, hidden)
        self.confidence = list(getattr(self.head, "confidence", []) or [])
        return drafts


def _whole_match(text: list[int], n: int, k: int) -> list[int]:
    """Prompt lookup's drafts when the last `n` tokens of `text` occurred before (a shorter
    match does not count here: it is right too seldom to stand in for the head)."""
    if len(text) <= n:
        return []
    suffix = text[-n:]
    body = text[:-1]
    for i in range(len(body) - n, -1, -1):
        if body[i: i + n] == suffix:
            return lookup(text, n, k)
    return []
