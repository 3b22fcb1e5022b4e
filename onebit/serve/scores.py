"""Log-probabilities of the emitted tokens, from the base's own scores of each.

The loop chooses each token from one row of the base's scores: the row that scores its
position. `ScoredBase` wraps the base the loop runs (the loop and its contract are unchanged:
it sees a base) and keeps, per position, the latest row that scores it. When a token is
committed at position P, every position before P is committed too, so the row held for P was
computed on exactly the committed prefix: it is the row the loop chose the token from (a
plain step's, a verify row's, the prefill's last). Rows of a verify past what its
`commit_verify` keeps scored rejected drafts; they are overwritten before any token at their
positions is committed, because the next round's pass re-scores from the first of them.

Each committed token after the prompt becomes a `TokenLogprob`: log-softmax of its row (the
raw scores, before temperature or top-k/top-p, as vLLM reports them) at the token, and the
`top` likeliest alternatives. Nothing else is kept: a row is dropped once its position is
committed, so memory stays a few rows whatever the length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from onebit.wrapped import WrappedBase


@dataclass(frozen=True)
class TokenLogprob:
    token: int
    logprob: float
    top: tuple[tuple[int, float], ...]  # (token id, logprob), likeliest first


def log_softmax(row: np.ndarray) -> np.ndarray:
    row = np.asarray(row, dtype=np.float64)
    shifted = row - row.max()
    return shifted - np.log(np.exp(shifted).sum())


def top_ids(logp: np.ndarray, top: int) -> np.ndarray:
    """The `top` likeliest ids, likeliest first, ties to the lower id: what a full stable sort
    gives, from a partition of the row (sorting all 49 152 entries for every token made
    logprobs cost more than the forward)."""
    if top <= 0:
        return np.zeros(0, np.int64)
    if top >= logp.size:
        return np.lexsort((np.arange(logp.size), -logp))
    cut = np.partition(logp, logp.size - top)[logp.size - top]  # the top-th largest value
    above = np.flatnonzero(logp > cut)
    tied = np.flatnonzero(logp == cut)[:top - above.size]  # the lowest ids of the tie
    chosen = np.concatenate([above, tied])
    return chosen[np.lexsort((chosen, -logp[chosen]))]


def token_logprob(row: np.ndarray, token: int, top: int) -> TokenLogprob:
    """The entry for `token` chosen from `row`, with the `top` likeliest (ties: lower id)."""
    logp = log_softmax(row)
    best = top_ids(logp, top)
    return TokenLogprob(int(token), float(logp[token]),
                        tuple((int(i), float(logp[i])) for i in best))


class ScoredBase(WrappedBase):
    """The base, recording a `TokenLogprob` for every token committed at `start` or later
    (`start` = the prompt's length). Members the loop does not call through this class (the
    tokenizer, the config, optional `max_prefill_rows`) are the base's own."""

    def __init__(self, base, *, start: int, top: int = 0) -> None:
        super().__init__(base)
        self.start = start
        self.top = top
        self.logprobs: list[TokenLogprob] = []
        self._rows: dict[int, np.ndarray] = {}   # position -> the latest row scoring it
        # the last verify: its tokens, position, rows, and which token its first row follows
        self._pending: tuple[list[int], int, np.ndarray, int] | None = None

    def reset(self) -> None:
        self._rows.clear()
        self._pending = None
        self.logprobs.clear()
        self._base.reset()

    def step(self, token: int, pos: int) -> np.ndarray:
        logits = self._base.step(token, pos)
        self._committed(token, pos)
        self._record(pos + 1, logits)
        return logits

    def verify(self, tokens: Sequence[int], pos: int) -> np.ndarray:
        rows = self._base.verify(tokens, pos)
        self._pending = (list(tokens), pos, np.array(rows, copy=True), 0)
        return rows

    def verify_last(self, tokens: Sequence[int], pos: int) -> np.ndarray:
        # The loop trusts a wrapper's own verify_last only (loop.prefill_batch); the base's
        # when it has one, else verify's last row, which is what verify_last means.
        inner = getattr(self._base, "verify_last", None)
        row = inner(tokens, pos) if callable(inner) else self._base.verify(tokens, pos)[-1]
        row = np.array(row, copy=True)
        # only the last row is known: the earlier positions are all prompt, never reported
        self._pending = (list(tokens), pos, row[None, :], len(tokens) - 1)
        return row

    def commit_verify(self, n: int) -> None:
        self._base.commit_verify(n)
        if self._pending is None:
            return
        tokens, pos, rows, offset = self._pending
        self._pending = None
        for i in range(int(n)):
            self._committed(tokens[i], pos + i)
            # row j of the batch scores position pos + offset + j + 1; keep those whose
            # whole input is committed (offset + j < n)
            j = i - offset
            if 0 <= j < len(rows):
                self._record(pos + i + 1, rows[j])

    def entry(self, position: int, token: int) -> TokenLogprob:
        """The entry of `token` as the loop emits it at `position` (a stream sends it with
        the token's text): the recorded one when a step has committed it already, else from
        the row held for the position or the row of the verify in flight that scores it, as
        its commit will record it."""
        done = position - self.start
        if 0 <= done < len(self.logprobs):
            return self.logprobs[done]
        row = self._rows.get(position)
        if row is None and self._pending is not None:
            _, pos, rows, offset = self._pending
            j = position - pos - offset - 1
            if 0 <= j < len(rows):
                row = rows[j]
        if row is None:
            raise RuntimeError(f"no scores recorded for the token at position {position}")
        return token_logprob(row, token, self.top)

    def _record(self, position: int, row) -> None:
        self._rows[position] = np.array(row, dtype=np.float64, copy=True)

    def _committed(self, token: int, position: int) -> None:
        row = self._rows.pop(position, None)
        if position < self.start:
            return
        if row is None:  # the loop committed a token no pass scored: the seam is broken
            raise RuntimeError(f"no scores recorded for the token at position {position}")
        self.logprobs.append(token_logprob(row, token, self.top))
