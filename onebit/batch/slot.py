"""`SlotBase`: one sequence's view of a batched engine, as the loop's `BaseModel`.

Each admitted sequence runs the ordinary speculative loop (`onebit.run`) in a thread of its
own, on a `SlotBase`. Its `step`, `verify` and `verify_last` do not run the model: they post
the rows to the engine and wait for the pass that runs them with every other sequence's rows
(`BatchEngine.step`). So a batched answer is made by exactly the loop that makes it alone, and
it equals its run alone as long as the batched rows equal the rows alone, which is the base's
promise (`BatchRows`).

A verify's rows are written to the slot's cache provisionally; `commit_verify(n)` keeps the
first n and truncates the slot after them, so a rejected draft is never read again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class SequenceCancelled(RuntimeError):
    """The sequence was cancelled: raised from its base call, so its loop stops there with
    what it had committed (the loop's `DecodeError.emitted`)."""


class SlotBase:
    """The base the loop of one sequence sees. `post(tokens, positions, last_only)` hands rows
    to the engine and returns `(logits, hidden)` once a pass has run them."""

    def __init__(self, engine, seq, max_rows: int) -> None:
        self._engine = engine
        self._seq = seq
        self._max_rows = max_rows
        self._committed = 0
        self._pending: tuple[int, np.ndarray] | None = None  # (first position, hidden rows)
        self._hidden_rows = np.zeros((0, 0), np.float32)
        self._last_hidden: np.ndarray | None = None

    @property
    def vocab_size(self) -> int:
        return self._engine.rows.vocab_size

    def max_batch_rows(self) -> int:
        # also the prefill's width: a long prompt enters in chunks of this many rows, each
        # sharing a pass with the other sequences' decode rows
        return self._max_rows

    def reset(self) -> None:
        self._committed = 0
        self._pending = None
        self._engine._truncate(self._seq, 0)

    def step(self, token: int, pos: int) -> np.ndarray:
        logits, hidden = self._engine._post(self._seq, [int(token)], pos, last_only=False)
        self._committed = pos + 1
        self._engine._truncate(self._seq, pos + 1)
        self._hidden_rows = hidden
        self._last_hidden = hidden[-1]
        return logits[0]

    def verify(self, tokens: Sequence[int], pos: int) -> np.ndarray:
        logits, hidden = self._engine._post(self._seq, [int(t) for t in tokens], pos,
                                            last_only=False)
        self._pending = (pos, hidden)
        return logits

    def verify_last(self, tokens: Sequence[int], pos: int) -> np.ndarray:
        logits, hidden = self._engine._post(self._seq, [int(t) for t in tokens], pos,
                                            last_only=True)
        self._pending = (pos, hidden)
        return logits[-1]

    def commit_verify(self, n: int) -> None:
        if self._pending is None:
            raise RuntimeError("commit_verify without a verify before it")
        pos, hidden = self._pending
        self._pending = None
        n = int(n)
        self._committed = pos + n
        self._engine._truncate(self._seq, pos + n)
        self._hidden_rows = hidden
        if n:
            self._last_hidden = hidden[n - 1]

    def last_hidden(self) -> np.ndarray:
        if self._last_hidden is None:
            raise RuntimeError("no committed row yet")
        return self._last_hidden

    def last_hidden_rows(self) -> np.ndarray:
        return self._hidden_rows

    def committed_length(self) -> int:
        return self._committed
