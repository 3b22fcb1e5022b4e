"""The two parts a speculative loop joins: the base model (the truth) and the draft head.

These are structural protocols: any object with these members works, no inheritance needed.
The contract each member must honour is written out in `docs/contract.md`; the docstrings here
are its short form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class BaseModel(Protocol):
    """The model whose greedy output is the truth."""

    @property
    def vocab_size(self) -> int:
        """Length of every logits row."""
        ...

    def max_batch_rows(self) -> int:
        """The most rows one `verify` may take (at least 1)."""
        ...

    def reset(self) -> None:
        """Forget everything: nothing committed, next position 0."""
        ...

    def step(self, token: int, pos: int) -> np.ndarray:
        """Run `token` at `pos` (the committed length) and commit it.

        Returns the scores for position `pos + 1`, shape `[vocab_size]`.
        """
        ...

    def verify(self, tokens: Sequence[int], pos: int) -> np.ndarray:
        """Run `tokens` at `pos .. pos + n - 1` as one batch, provisionally.

        Returns `[n, vocab_size]`; row i scores position `pos + i + 1`.
        """
        ...

    def commit_verify(self, n: int) -> None:
        """Keep the first `n` rows of the last `verify`; the state is then exactly that of
        stepping those tokens one by one. The other rows are forgotten."""
        ...

    def last_hidden(self) -> np.ndarray:
        """The hidden row of the last committed token."""
        ...

    def last_hidden_rows(self) -> np.ndarray:
        """Hidden rows of the last `verify` (after `commit_verify`): the committed prefix or
        the whole batch. Callers read only the rows they know are committed."""
        ...


@runtime_checkable
class DraftHead(Protocol):
    """A cheap drafter that guesses the base's next tokens."""

    def needs_last_hidden(self) -> bool:
        """True: the head reads the base's hidden after t1 (two-pass round).
        False: it drafts from committed rows plus t1's token (one-pass round)."""
        ...

    def propose(
        self, token: int, pos: int, k: int, hidden: np.ndarray | None
    ) -> list[int] | Drafts:
        """Up to `k` drafts for positions `pos + 1 .. pos + k`; `token` is t1 at `pos`. A
        sampling head returns `Drafts` (the tokens and the `q` rows they were drawn from)."""
        ...

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        """`tokens[:count]` are committed, with hidden rows `rows[:count]`; rows past `count`
        belong to uncommitted positions and must not be read."""
        ...

    def reset(self) -> None:
        """Forget everything."""
        ...


@dataclass(frozen=True)
class Drafts:
    """What a sampling head's `propose` may return instead of a bare token list: the drafts and,
    row for row, the distribution `q` each was drawn from (`[len(tokens), vocab_size]`, float).

    The loop accepts draft i with probability `min(1, p_i(d_i) / q_i(d_i))`, so `q` must be
    exactly what the draft was drawn from. A bare list means deterministic drafts: a one-hot
    `q`. Under greedy decoding only the tokens are read."""

    tokens: Sequence[int]
    q: np.ndarray


@runtime_checkable
class SamplingHead(Protocol):
    """A head that drafts by sampling. The loop calls `use_sampling` right after `reset()` on
    every run: with the run's `Sampling` and rng on a sampled run, with (None, None) on a greedy
    one. The head then draws its drafts with `rng` from its own logits warped by `sampling` and
    returns `Drafts` with their `q` rows; when greedy it drafts its argmax as before."""

    def use_sampling(self, sampling: object, rng: object) -> None:
        """`sampling` is an `onebit.Sampling` (or None: greedy); `rng` has `accept(prob)` and
        `choice(probs)` (None when greedy)."""
        ...
