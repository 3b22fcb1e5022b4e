"""How a draft head turns its own logits into a draft token, greedy or sampled.

Every head that drafts from logits goes through `choose`, so that the token and the `q` row the
loop judges it against come from one place: the token is drawn from exactly the row returned
(the bugs this rules out: a greedy draft paired with a softmax `q`, or `q` taken before top-k /
top-p while the draft was drawn after).
"""

from __future__ import annotations

import numpy as np

from onebit.heads.target import argmax_tokens
from onebit.protocols import Drafts
from onebit.sampling import Rng, Sampling, is_greedy, warp


def choose(
    logits: np.ndarray, sampling: Sampling | None, rng: Rng | None
) -> tuple[int, np.ndarray]:
    """One draft from a head's `logits` and the distribution `q` it was drawn from: the argmax
    and a one-hot `q` when greedy (or with no rng to draw with), else a draw through `rng` from
    `warp(logits, sampling)`."""
    if rng is None or is_greedy(sampling):
        q = warp(logits, None)  # one-hot at the argmax: the draft is deterministic
        return int(np.argmax(q)), q
    q = warp(logits, sampling)
    return int(rng.choice(q)), q


class SamplingDrafter:
    """What a head that drafts from its own logits needs to sample (mix it in): the loop's
    `use_sampling(sampling, rng)` is kept; `choose_rows` turns final-normed rows into drafts
    through the target's lm_head; `answer` is what `propose` returns (a bare list when greedy,
    so greedy drafting is exactly the argmax it always was)."""

    sampling: Sampling | None = None
    rng: Rng | None = None

    def use_sampling(self, sampling: Sampling | None, rng: Rng | None) -> None:
        self.sampling, self.rng = sampling, rng

    @property
    def samples(self) -> bool:
        return self.rng is not None and not is_greedy(self.sampling)

    def choose_rows(
        self, target: object, rows: np.ndarray
    ) -> tuple[list[int], np.ndarray | None]:
        """One draft per row and the `q` rows they were drawn from (None when greedy)."""
        if not self.samples:
            return argmax_tokens(target, rows), None
        logits = np.asarray(target.lm_head_logits(rows))  # type: ignore[attr-defined]
        logits = logits.reshape(rows.shape[0], -1)
        picks = [choose(row, self.sampling, self.rng) for row in logits]
        return [token for token, _ in picks], np.stack([q for _, q in picks])

    def answer(self, tokens: list[int], q: np.ndarray | None) -> list[int] | Drafts:
        return tokens if q is None else Drafts(tokens, q)
