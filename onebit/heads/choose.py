"""How a draft head turns its own logits into a draft token, greedy or sampled.

Every head that drafts from logits goes through `choose`, so that the token and the `q` row the
loop judges it against come from one place: the token is drawn from exactly the row returned
(the bugs this rules out: a greedy draft paired with a softmax `q`, or `q` taken before top-k /
top-p while the draft was drawn after).
"""

from __future__ import annotations

import numpy as np

from onebit.heads.target import pick_tokens
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
    `use_sampling(sampling, rng)` is kept; `choose_logits` turns rows of the head's logits into
    drafts; `answer` is what `propose` returns (a bare list when greedy,
    so greedy drafting is exactly the argmax it always was)."""

    sampling: Sampling | None = None
    rng: Rng | None = None

    def use_sampling(self, sampling: Sampling | None, rng: Rng | None) -> None:
        self.sampling, self.rng = sampling, rng

    @property
    def samples(self) -> bool:
        return self.rng is not None and not is_greedy(self.sampling)

    def choose_logits(self, logits: np.ndarray) -> tuple[list[int], np.ndarray | None]:
        """One draft per row of the head's logits and the `q` rows they were drawn from (None
        when greedy: `pick_tokens`, the argmax, exactly as before)."""
        if not self.samples:
            return pick_tokens(logits), None
        picks = [choose(row, self.sampling, self.rng) for row in np.asarray(logits)]
        return [token for token, _ in picks], np.stack([q for _, q in picks])

    def answer(self, tokens: list[int], q: np.ndarray | None) -> list[int] | Drafts:
        return tokens if q is None else Drafts(tokens, q)
