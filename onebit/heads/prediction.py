"""Drafting from a guess of the answer: OpenAI's predicted outputs (`prediction`).

A client that edits a text (fixes its typos, renames a variable, changes one line of a long
file) knows most of the answer already: the text itself. `PredictionHead` drafts the tokens
of that guess that follow the answer so far. While the answer follows the prediction, each
round drafts the next `k` predicted tokens; where it leaves the prediction (the edit), the
head drafts nothing until the answer's last `n` tokens occur in the prediction again, and
then drafts from there: the place is found again, the first occurrence after the last place
it held, else anywhere. A place found again whose first draft is rejected was a false anchor
(three tokens of code or prose recur by chance): the anchor it takes grows by one token each
time, up to `n`, and falls back to three once such drafts are accepted, so a prediction the
answer has left behind stops costing verify rows.

The drafts are deterministic (q is one-hot), so greedy text equals plain decoding's and
sampled text is distributed as plain sampling's, whatever the prediction says. A wrong
prediction costs verify rows, never a wrong token.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: the most drafts a round sends: a prediction is a long, sure source (a verify of 33 rows)
PREDICTION_K = 32
#: the fewest tokens of the answer that must match the prediction to find its place again
ANCHOR = 3


class PredictionHead:
    """A one-pass `DraftHead` over `predicted` (token ids), for an answer that starts after
    `prompt_len` committed tokens."""

    def __init__(self, predicted: Sequence[int], prompt_len: int, *, k: int = PREDICTION_K,
                 n: int = 6) -> None:
        for name, value, least in (("k", k, 1), ("n", n, ANCHOR), ("prompt_len", prompt_len, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"prediction head: {name} must be an integer >= {least}, "
                                 f"got {value!r}")
        self.predicted = [int(t) for t in predicted]
        self.prompt_len = prompt_len
        self.k = k
        self.n = n
        self.reset()

    def __repr__(self) -> str:
        return f"PredictionHead({len(self.predicted)} tokens, k={self.k})"

    def needs_last_hidden(self) -> bool:
        return False

    def reset(self) -> None:
        self.answer: list[int] = []  # committed tokens after the prompt
        self._seen = 0  # committed tokens, the prompt's included
        self.cursor: int | None = 0  # where the answer so far stands in the prediction
        self.held = 0  # the furthest place held (a lost place is found again after it)
        self.anchor = ANCHOR  # the fewest matching tokens that find the place again
        self.trial = False  # the place was found again, and no draft from it accepted yet
        self._guess: list[int] | None = None  # the drafts of the last round, on trial

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        if self._guess is not None and count > 0:  # t1, then the drafts that were accepted
            if count > 1 and int(tokens[1]) == self._guess[0]:  # the place was right
                self.anchor, self.trial = ANCHOR, False
            else:
                self.anchor = min(self.n, self.anchor + 1)
            self._guess = None
        for token in tokens[:count]:
            self._seen += 1
            if self._seen <= self.prompt_len:
                continue
            self.answer.append(int(token))
            self.cursor = self._next(self.cursor, int(token))
        if self.cursor is None and self.answer:  # left the prediction: find the place again
            self.cursor = self.find(self.answer)
            self.trial = self.cursor is not None

    def _next(self, cursor: int | None, token: int) -> int | None:
        """The place after `token`, if the answer still follows the prediction there."""
        if cursor is not None and cursor < len(self.predicted) \
                and self.predicted[cursor] == token:
            self.held = max(self.held, cursor + 1)
            return cursor + 1
        return None

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None) -> list[int]:
        if pos < self.prompt_len:  # t1 is still the prompt's (a one-token prompt's prefill)
            return []
        answer = [*self.answer[:pos - self.prompt_len], int(token)]
        place = self._next(self.cursor, int(token)) if len(answer) == len(self.answer) + 1 \
            else None
        if place is None:
            place = self.find(answer)
            self.trial = place is not None
        if place is None:
            return []
        drafts = self.predicted[place:place + min(k, self.k)]
        self._guess = drafts if self.trial and drafts else None
        return drafts

    def find(self, answer: Sequence[int]) -> int | None:
        """The place in the prediction after the answer's last `n` (down to `anchor`) tokens:
        their first occurrence from the furthest place held on, else from the start."""
        for m in range(min(self.n, len(answer)), self.anchor - 1, -1):
            tail = list(answer[-m:])
            for start in (self.held, 0):
                at = _index(self.predicted, tail, max(0, start - m))
                if at is not None:
                    return at + m
        return None


def _index(seq: list[int], part: list[int], start: int) -> int | None:
    """The first i >= start with seq[i:i + len(part)] == part."""
    first, size = part[0], len(part)
    i = start
    while True:
        try:
            i = seq.index(first, i)
        except ValueError:
            return None
        if seq[i:i + size] == part:
            return i
        i += 1
