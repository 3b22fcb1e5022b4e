"""The two parts a speculative loop joins: the base model (the truth) and the draft head.

These are structural protocols: any object with these members works, no inheritance needed.
The contract each member must honour is written out in `docs/contract.md`; the docstrings here
are its short form.
"""

from __future__ import annotations

from collections.abc import Sequence
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

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None) -> list[int]:
        """Up to `k` drafts for positions `pos + 1 .. pos + k`; `token` is t1 at `pos`."""
        ...

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        """`tokens[:count]` are committed, with hidden rows `rows[:count]`; rows past `count`
        belong to uncommitted positions and must not be read."""
        ...

    def reset(self) -> None:
        """Forget everything."""
        ...
