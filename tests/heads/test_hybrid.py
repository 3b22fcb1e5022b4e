"""The hybrid head (`onebit.heads.hybrid.HybridHead`): prompt lookup where a whole n-gram
repeats, the inner head elsewhere. The text stays greedy decode's and a sampled run keeps
plain sampling's exact distribution, alone and under the policy; copied rounds do not ask the
inner head; the confidence of copied drafts is what they scored on the committed text."""

from __future__ import annotations

import pytest

import onebit
from onebit import Sampling
from onebit.heads.hybrid import HybridHead
from onebit.heads.policy import PolicyHead
from pytest_onebit.doubles.heads import Oracle, garbage_head, half_head, perfect_head
from pytest_onebit.doubles.sampling_heads import MemoToyBase, sampling_head
from pytest_onebit.doubles.toy import ToyBase
from pytest_onebit.sampling.enumeration import (
    assert_distribution_equivalent,
    exact_distribution,
    plain_distribution,
)

PROMPT = [3, 1, 2, 1, 0, 3, 2, 1, 3, 1, 2]
N = 40


@pytest.mark.parametrize("make", [perfect_head, garbage_head, half_head])
@pytest.mark.parametrize("under_policy", [False, True])
def test_H1_text_is_greedy_whichever_source_drafts(make, under_policy):
    """With a perfect, an always-wrong and a half-right inner head, alone and under the
    policy, the run's tokens equal greedy decode's and the base ends where greedy leaves it;
    both sources drafted (over four tokens, bigrams repeat: some rounds copied, the head was
    asked in the others)."""
    base = ToyBase(vocab_size=4)
    oracle = Oracle.from_greedy(ToyBase(vocab_size=4), PROMPT, N + 8)
    hybrid = HybridHead(make(oracle), n=2, k=4)
    head = PolicyHead(hybrid, costs={n: 1.0 for n in range(1, 9)}) if under_policy else hybrid
    reference = onebit.greedy(ToyBase(vocab_size=4), PROMPT, max_tokens=N)
    result = onebit.run(base, head, PROMPT, max_tokens=N, k=4)
    assert result.tokens == reference.tokens
    assert base.committed == PROMPT + reference.tokens
    assert hybrid.copies > 0 and hybrid.asks > 0


@pytest.mark.parametrize("kind", ["same", "blend", "spread"])
def test_H2_sampled_distribution_is_exact(kind):
    """A sampled run through the hybrid (copied drafts deterministic, the inner head's drawn
    with their q rows) has plain sampling's exact distribution, enumerated over every rng
    answer, alone and under the policy."""
    s = Sampling(1.0, top_k=3)
    for wrap in (lambda h: h, lambda h: PolicyHead(h, costs={n: 1.0 for n in range(1, 9)},
                                                  persist=False)):
        base = MemoToyBase(vocab_size=3, seed=4)
        head = wrap(HybridHead(sampling_head(base, kind), n=2, k=3))
        d = exact_distribution(onebit.run, base, head, [2, 0, 2, 0], max_tokens=3, k=3,
                               sampling=s)
        want = plain_distribution(ToyBase(vocab_size=3, seed=4), [2, 0, 2, 0], max_tokens=3,
                                  sampling=s)
        assert_distribution_equivalent(d, want, atol=1e-12)


class Counting:
    """An inner head that drafts nothing and counts how often it is asked."""

    k = 4

    def __init__(self):
        self.asked = 0
        self.confidence = []

    def needs_last_hidden(self):
        return False

    def reset(self):
        pass

    def commit_rows(self, tokens, rows, count):
        pass

    def propose(self, token, pos, k, hidden):
        self.asked += 1
        self.confidence = []
        return []


def test_H3_copied_rounds_do_not_ask_the_head_and_their_confidence_is_their_score():
    """Where the last three tokens repeat, the drafts are the tokens that followed them and
    the inner head is not asked; their confidence starts at the prior 1/2 a place and then
    follows what copies scored on the committed text: a first copy right and a second wrong
    leaves place 1 at 2/3 and place 2 at 1/3."""
    inner = Counting()
    hybrid = HybridHead(inner, n=3, k=2)
    text = [7, 8, 9, 5, 6, 7, 8]
    hybrid.commit_rows(text, None, len(text))
    drafts = hybrid.propose(9, len(text), 2, None)  # "7 8 9" occurred: copy "5 6"
    assert drafts == [5, 6] and inner.asked == 0
    assert hybrid.confidence == [0.5, 0.5]
    hybrid.commit_rows([9, 5, 1], None, 3)  # 5 right, 6 wrong
    assert list(hybrid.copied_right / hybrid.copied_asked) == [2 / 3, 1 / 3]
    assert hybrid.propose(4, len(text) + 3, 2, None) == [] and inner.asked == 1


def test_bad_options_are_refused_by_name():
    """n and k below 1 are refused, naming the option."""
    with pytest.raises(ValueError, match="n must"):
        HybridHead(Counting(), n=0)
    with pytest.raises(ValueError, match="k must"):
        HybridHead(Counting(), k=0)
