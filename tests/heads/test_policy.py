"""`PolicyHead`: the drafts it sends are chosen by measured cost and acceptance, and whatever it
chooses, the loop's text (greedy) and distribution (sampled) are plain decoding's.

The checks, by id (mutants/policy/ names them): P1 greedy text, P2 sampled exactness and the
q rows cut with the drafts, P3 each round's time charged to its width, P4 acceptance scored
against the committed text, P5 the choice itself (all drafts when they pay, none when not)."""

from __future__ import annotations

import numpy as np
import pytest

import onebit
from onebit import Drafts, Sampling
from onebit.heads import NgramHead
from onebit.heads.policy import PolicyHead
from pytest_onebit.doubles.heads import Oracle, garbage_head, half_head, perfect_head
from pytest_onebit.doubles.sampling_heads import MemoToyBase, sampling_head
from pytest_onebit.doubles.toy import ToyBase
from pytest_onebit.sampling.enumeration import (
    assert_distribution_equivalent,
    exact_distribution,
    plain_distribution,
)

PROMPT = [3, 1, 4, 1, 5]
N = 48
CHEAP = {n: 1.0 for n in range(1, 10)}          # a batch costs a step, whatever its width
DEAR = {n: float(n) for n in range(1, 10)}      # every row costs a step: drafting never pays


def toy_and_oracle():
    base = ToyBase()
    return base, Oracle.from_greedy(ToyBase(), PROMPT, N + 8)


@pytest.mark.parametrize("costs", [CHEAP, DEAR], ids=["cheap", "dear"])
@pytest.mark.parametrize("make", [perfect_head, garbage_head, half_head])
def test_P1_text_is_greedy_whatever_the_policy_sends(make, costs):
    """With a perfect, an always-wrong and a half-right head, under cheap and dear batches,
    the run's tokens equal greedy decode's and the base ends where greedy leaves it."""
    base, oracle = toy_and_oracle()
    policy = PolicyHead(make(oracle), costs=costs)
    reference = onebit.greedy(ToyBase(), PROMPT, max_tokens=N)
    result = onebit.run(base, policy, PROMPT, max_tokens=N, k=7)
    assert result.tokens == reference.tokens
    assert base.committed == PROMPT + reference.tokens


def test_P5_a_perfect_head_with_cheap_batches_gets_every_draft():
    """Cheap batches and a head that is always right: after the first rounds the policy sends
    the full k, so the run takes about N / (k + 1) passes."""
    base, oracle = toy_and_oracle()
    policy = PolicyHead(perfect_head(oracle), costs=CHEAP)
    result = onebit.run(base, policy, PROMPT, max_tokens=N, k=7)
    assert policy.sent[-3:] == [7, 7, 7]
    assert result.stats.batches + result.stats.steps <= N // 8 + 3


def test_P5_a_wrong_head_with_dear_batches_is_not_sent_and_not_asked():
    """Dear batches and a head that is always wrong: the policy learns within a few rounds to
    send nothing (plain steps), then stops asking the head but for one probe every
    `probe_every` rounds; the acceptance it learned stays near zero."""
    base, oracle = toy_and_oracle()
    head = garbage_head(oracle)
    policy = PolicyHead(head, costs=DEAR, probe_every=8)
    result = onebit.run(base, policy, PROMPT, max_tokens=N, k=7)
    assert result.stats.steps >= N - 6
    assert all(sent == 0 for sent in policy.sent[6:])
    assert result.stats.drafts_asked == len(policy.sent)  # the loop asked every round...
    assert policy.acceptance()[1] < 0.2
    assert len(head.proposals) < N // 2  # ...and the policy passed few of them on


def test_P4_withheld_drafts_are_still_scored():
    """Shadow scoring: a perfect head under dear batches is sent nothing at first (the prior
    says it does not pay), yet its withheld drafts are scored against the text, so the policy
    learns it is always right and starts sending it once that pays (costs[2] below 2: a
    draft pays once its acceptance passes 0.9)."""
    base, oracle = toy_and_oracle()
    costs = {1: 1.0, 2: 1.9, 3: 2.8, 4: 3.7, 5: 4.6, 6: 5.5, 7: 6.4, 8: 7.3}
    policy = PolicyHead(perfect_head(oracle), costs=costs, probe_every=2)
    onebit.run(base, policy, PROMPT, max_tokens=N, k=7)
    assert policy.sent[0] == 0
    assert policy.acceptance()[1] > 0.9
    assert policy.sent[-1] >= 1


def test_P3_measured_costs_follow_the_clock():
    """Without fixed costs, each round's width is charged the clock's time from one propose to
    the next: a clock that makes every batch of n rows take n seconds prices cost[n] = n."""
    _, oracle = toy_and_oracle()
    now = [0.0]

    class Timed(ToyBase):
        def step(self, token, pos):
            now[0] += 1.0
            return super().step(token, pos)

        def verify(self, tokens, pos):
            now[0] += len(tokens)
            return super().verify(tokens, pos)

    base = Timed()
    policy = PolicyHead(half_head(oracle), clock=lambda: now[0])
    onebit.run(base, policy, PROMPT, max_tokens=N, k=7)
    assert policy.cost[1] == pytest.approx(1.0)
    for rows, cost in policy.cost.items():
        assert cost == pytest.approx(rows)


def test_prompt_lookup_under_the_policy_on_the_real_forward(qwen3):
    """Prompt lookup under the policy on a real forward (a fabricated Qwen3) emits greedy's
    tokens, with measured costs."""
    reference = onebit.greedy(qwen3, [189, 190] * 4, max_tokens=40)
    result = onebit.run(qwen3, PolicyHead(NgramHead(n=3, k=8)), [189, 190] * 4,
                        max_tokens=40, k=7)
    assert result.tokens == reference.tokens


@pytest.mark.parametrize("kind", ["same", "blend", "spread"])
@pytest.mark.parametrize("costs", [CHEAP, {1: 1.0, 2: 1.2, 3: 1.9, 4: 2.9}],
                         ids=["cheap", "steep"])
def test_P2_sampled_distribution_is_exact_under_the_policy(kind, costs):
    """A sampled run through the policy (which cuts each round's Drafts, tokens and q rows
    together, to a length chosen from what it has scored so far) has plain sampling's exact
    distribution, enumerated over every rng answer."""
    s = Sampling(1.0, top_k=3)
    base = MemoToyBase(vocab_size=3, seed=4)
    policy = PolicyHead(sampling_head(base, kind), costs=costs, persist=False)
    d = exact_distribution(onebit.run, base, policy, [2, 0], max_tokens=3, k=3, sampling=s)
    want = plain_distribution(ToyBase(vocab_size=3, seed=4), [2, 0], max_tokens=3, sampling=s)
    assert_distribution_equivalent(d, want, atol=1e-12)


def test_P2_drafts_are_cut_with_their_q_rows():
    """A `Drafts` answer is cut to the chosen length in tokens and q rows alike."""

    class Fixed:
        def needs_last_hidden(self):
            return False

        def reset(self):
            pass

        def commit_rows(self, tokens, rows, count):
            pass

        def propose(self, token, pos, k, hidden):
            return Drafts([1, 2, 0], np.eye(3))

    policy = PolicyHead(Fixed(), costs={1: 1.0, 2: 1.2, 3: 3.0, 4: 4.0})
    out = policy.propose(0, 5, 3, None)
    assert list(out.tokens) == [1] and out.q.shape == (1, 3)


@pytest.mark.parametrize(("kwargs", "word"), [
    ({"max_k": 0}, "max_k"), ({"probe_every": True}, "probe_every"),
    ({"row_cost": -1}, "row_cost"), ({"costs": {2: 1.0}}, "costs[1]"),
    ({"costs": {1: 0.0}}, "costs[1]"),
])
def test_bad_options_are_refused_by_name(kwargs, word):
    """Each bad option is a ValueError naming it."""
    with pytest.raises(ValueError, match=word.replace("[", r"\[").replace("]", r"\]")):
        PolicyHead(NgramHead(), **kwargs)


def test_two_pass_heads_are_refused():
    """The policy prices one-pass rounds; a two-pass head is refused by name."""
    with pytest.raises(ValueError, match="two-pass"):
        PolicyHead(NgramHead(two_pass=True))


def test_P4_acceptance_follows_the_text_at_hand():
    """Slot outcomes decay: after forty hits in slot 1, ten misses bring its acceptance below
    one half, so a policy that learned on copied text stops drafting soon in free prose."""
    policy = PolicyHead(NgramHead(), costs=CHEAP)
    policy.text = list(range(100))
    policy.pending = [(i, [i], 0, None) for i in range(40)]
    policy._score()
    assert policy.acceptance()[1] > 0.9
    policy.pending = [(i, [i + 1], 0, None) for i in range(40, 50)]
    policy._score()
    assert policy.acceptance()[1] < 0.5


def test_P3_one_stall_does_not_price_a_width():
    """A width's cost is the median of its latest rounds: one round a hundred times slower
    (the machine stalled) leaves cost[1] where the others put it."""
    now = [0.0]
    policy = PolicyHead(NgramHead(), clock=lambda: now[0])
    policy.reset()
    for seconds in (1.0, 1.0, 100.0, 1.0, 1.0):
        policy.propose(0, 0, 0, None)
        now[0] += seconds
    policy.propose(0, 0, 0, None)
    assert policy.cost[1] == 1.0


class SureWhenRight:
    """A head that says how sure it is: right (and 0.97 sure) on positions where `right(pos)`,
    wrong (and 0.05 sure) elsewhere, from the oracle; it records `stop_below` as set."""

    def __init__(self, oracle, right) -> None:
        self.oracle, self.right = oracle, right
        self.confidence: list[float] = []
        self.stop_below = 0.0
        self.stops: list[float] = []

    def needs_last_hidden(self):
        return False

    def reset(self):
        self.confidence = []

    def commit_rows(self, tokens, rows, count):
        pass

    def propose(self, token, pos, k, hidden):
        self.stops.append(self.stop_below)
        out, self.confidence = [], []
        for slot in range(k):
            p = pos + 1 + slot
            truth = self.oracle.truth(p)
            if truth is None:
                break
            good = self.right(p)
            out.append(truth if good else (truth + 1) % self.oracle.vocab_size)
            self.confidence.append(0.97 if good else 0.05)
        return out


MIDDLING = {n: 1.0 + 0.6 * (n - 1) for n in range(1, 10)}  # a draft pays above 60 % acceptance


def test_P6_a_head_sure_of_a_third_of_its_drafts_sends_those_and_withholds_the_rest():
    """Right on every third position and sure exactly when right: on average a draft is right
    a third of the time, which does not pay for a row here (60 % needed), yet the policy learns
    per confidence bin, sends the sure first drafts (one each: the next is unsure) and withholds
    the unsure ones (plain steps); the text is greedy's."""
    base, oracle = toy_and_oracle()
    head = SureWhenRight(oracle, lambda p: p % 3 == 0)
    policy = PolicyHead(head, costs=MIDDLING)
    reference = onebit.greedy(ToyBase(), PROMPT, max_tokens=N)
    result = onebit.run(base, policy, PROMPT, max_tokens=N, k=4)
    assert result.tokens == reference.tokens
    sure_bin, unsure_bin = policy._bins(1)[0], None
    head.confidence = [0.05]
    unsure_bin = policy._bins(1)[0]
    learned = policy.bin_acceptance()
    assert learned[sure_bin] > 0.9 and learned[unsure_bin] < 0.15
    late = policy.sent[len(policy.sent) // 2:]
    assert set(late) <= {0, 1} and 1 in late and 0 in late
    assert result.stats.accepted == result.stats.proposed  # only sure drafts went out
    assert policy.acceptance()[1] < 0.8  # by slot alone the head looks unprofitable


def test_P6_the_head_is_told_the_confidence_a_draft_needs():
    """With dear rows the confidence a draft needs rises (the head may stop chaining there);
    with rows nearly free it is the lowest bin's edge."""
    base, oracle = toy_and_oracle()
    cheap = SureWhenRight(oracle, lambda p: True)
    onebit.run(base, PolicyHead(cheap, costs=CHEAP), PROMPT, max_tokens=N, k=4)
    dear = SureWhenRight(oracle, lambda p: p % 3 == 0)
    onebit.run(ToyBase(), PolicyHead(dear, costs=MIDDLING), PROMPT, max_tokens=N, k=4)
    assert cheap.stops[-1] == 0.0
    assert dear.stops[-1] >= 0.6


def test_P6_a_sure_head_is_asked_only_while_its_sure_drafts_pay_for_its_own_time():
    """The decision to ask a confident head weighs its measured time per proposal against
    what its first drafts have been worth: with sure drafts that pay and a cheap head it is
    asked; when it is rarely sure, or its own time eats the gain, it is not."""
    base, oracle = toy_and_oracle()
    policy = PolicyHead(SureWhenRight(oracle, lambda p: True), max_k=4)
    policy.cost = {1: 1.0, 2: 1.3}
    sure, unsure = len(policy.first_bins) - 1, 0
    policy.bin_hits[:] = policy.bin_trials * 0.05
    policy.bin_hits[sure] = policy.bin_trials[sure] * 0.95
    policy.first_bins[:] = 0.0
    policy.first_bins[sure], policy.first_bins[unsure] = 0.5, 0.5
    assert policy.worth_asking_sure()  # half the rounds gain 0.95 tokens for 0.3 more time
    policy.head_seconds.extend([0.5] * 3)
    assert not policy.worth_asking_sure()  # ...but not when asking costs half a step
    policy.head_seconds.clear()
    policy.first_bins[sure], policy.first_bins[unsure] = 0.05, 0.95
    policy.head_seconds.extend([0.05] * 3)
    assert not policy.worth_asking_sure()  # rarely sure: the asking costs more than it brings


def test_P3_a_head_that_always_drafts_still_gets_its_plain_step_measured():
    """A head sure of every draft would otherwise be sent a draft every round, and the plain
    step's cost, which every width is weighed against, would stay a prior: the policy sends
    plain rounds early and one every `probe_every` rounds to measure it, and until then infers
    it from the narrowest width measured rather than from an arbitrary unit."""
    base, oracle = toy_and_oracle()
    ticks = iter(range(10**6))
    policy = PolicyHead(SureWhenRight(oracle, lambda p: True), clock=lambda: next(ticks) * 1e-3)
    policy.cost = {3: 0.002}
    assert policy.price(1) == pytest.approx(0.002 / (1 + 2 * policy.row_cost))
    policy._forget()
    onebit.run(base, policy, PROMPT, max_tokens=N, k=2)
    assert 1 in policy.cost
    assert policy.sent[2:5] == [0, 0, 0]  # three plain rounds timed, then drafts again
    assert 0 in policy.sent[5 + policy.probe_every:][:2]  # and one every probe_every rounds
