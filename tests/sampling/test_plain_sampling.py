"""onebit.sample, the plain-sampling reference: what it reports (the seed), how it stops (the
consumer), and how a bad base is named (the position), beside its exact distribution, which
test_enumeration holds to prod p(t_i | prefix)."""

import numpy as np
import pytest

import onebit
from onebit import BaseContractError, Sampling, SeededRng
from pytest_onebit.doubles.toy import ToyBase

PROMPT = [3, 1, 4]
S = Sampling(0.9, top_k=8)


def test_the_seed_is_reported_and_replays():
    """result.seed is the seed the run drew with: the one passed, or (with none) one drawn
    from the OS that replays the same text; a caller's own rng without a seed reports None."""
    given = onebit.sample(ToyBase(), PROMPT, max_tokens=20, sampling=S, seed=77)
    assert given.seed == 77
    assert onebit.sample(ToyBase(), PROMPT, max_tokens=20, sampling=S, seed=77).tokens \
        == given.tokens
    drawn = onebit.sample(ToyBase(), PROMPT, max_tokens=20, sampling=S)
    assert isinstance(drawn.seed, int)
    assert onebit.sample(ToyBase(), PROMPT, max_tokens=20, sampling=S,
                         seed=drawn.seed).tokens == drawn.tokens

    class OwnRng:
        def accept(self, prob):
            return True

        def choice(self, probs):
            return int(np.argmax(probs))

    own = onebit.sample(ToyBase(), PROMPT, max_tokens=5, sampling=S, rng=OwnRng())
    assert own.seed is None
    assert onebit.sample(ToyBase(), PROMPT, max_tokens=5, sampling=S,
                         rng=SeededRng(77)).seed == 77


def test_a_consumer_stop_ends_the_run_after_that_token():
    """on_token sees every token in order; returning False after the 4th stops the run there:
    4 tokens, stopped, and the base holds prompt + those 4."""
    seen = []

    def consumer(token):
        seen.append(token)
        return len(seen) < 4

    base = ToyBase()
    result = onebit.sample(base, PROMPT, max_tokens=20, sampling=S, seed=5, on_token=consumer)
    assert result.stopped and len(result.tokens) == 4 and seen == result.tokens
    assert result.tokens == onebit.sample(ToyBase(), PROMPT, max_tokens=20, sampling=S,
                                          seed=5).tokens[:4]
    assert base.committed == PROMPT + result.tokens


class NanAt(ToyBase):
    """A toy whose step scoring position `bad` returns a NaN logit."""

    def __init__(self, bad: int) -> None:
        super().__init__()
        self.bad = bad

    def step(self, token, pos):
        logits = super().step(token, pos)
        if pos + 1 == self.bad:
            logits = logits.copy()
            logits[5] = np.nan
        return logits


def test_non_finite_scores_name_the_position_they_score():
    """A NaN in the scores for position 7 is a BaseContractError naming position 7 (in the
    message and .pos), carrying the tokens emitted before it (positions 3..6)."""
    with pytest.raises(BaseContractError, match=r"non-finite logits scoring position 7$") as info:
        onebit.sample(NanAt(7), PROMPT, max_tokens=10, sampling=S, seed=1)
    assert info.value.pos == 7 and len(info.value.emitted) == 4
