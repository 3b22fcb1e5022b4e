"""How a draft head turns its own logits into a draft token, greedy or sampled.

Every head that drafts from logits goes through `choose`, so that the token and the `q` row the
loop judges it against come from one place: the token is drawn from exactly the row returned
(the bugs this rules out: a greedy draft paired with a softmax `q`, or `q` taken before top-k /
top-p while the draft was drawn after).
"""

from __future__ import annotations

import numpy as np

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
