"""The fallback policy: a head that keeps losing is switched off, a good head never is, and
the contract holds either way."""

import functools
import time

import pytest

import onebit
from onebit import Fallback
from pytest_onebit import Oracle, ToyBase, garbage_head, half_head, perfect_head, silent_head
from pytest_onebit.loop.runner import check_trace
from pytest_onebit.loop.scenarios import standard_scenarios
from pytest_onebit.loop.trace import execute

PROMPT = [3, 1, 4, 1, 5]
N = 40


def spec(head_factory, flavour, fallback, *, k=7):
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, N + k + 8)
    base, head = ToyBase(), head_factory(oracle, flavour)
    return onebit.run(base, head, PROMPT, max_tokens=N, k=k, fallback=fallback), base, head


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
@pytest.mark.parametrize("window", [1, 3, 5])
def test_garbage_head_falls_back_after_the_window(flavour, window):
    """A head that is always wrong loses every round (a batch of 8 rows costs 1.7 steps for
    one token; a two-pass round 1.05 for one): after `window` rounds the run falls back,
    drops the head (no more drafts, no more rows), and costs one pass per token."""
    result, base, head = spec(garbage_head, flavour, Fallback(window=window))
    s = result.stats
    assert s.fallback_round == window
    assert s.fallback_emitted == window
    assert len(head.proposals) == window == s.drafts_asked
    assert s.passes_per_token == 1.0
    assert base.passes_from(len(PROMPT))[1] == (window if flavour == "one-pass" else 0)
    assert result.tokens == onebit.greedy(ToyBase(), PROMPT, max_tokens=N).tokens
    assert head.committed_tokens == PROMPT + result.tokens[:window]


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
@pytest.mark.parametrize("head_factory", [perfect_head, half_head])
def test_good_heads_never_fall_back(flavour, head_factory):
    """A head that gains more tokens than its rounds cost is never switched off (the window
    of 3 rides out the short rounds at the end of the budget), and its pass law is
    untouched."""
    with_policy, _, _ = spec(head_factory, flavour, Fallback(window=3))
    without, _, _ = spec(head_factory, flavour, None)
    assert with_policy.stats.fallback_round is None
    assert (with_policy.stats.steps, with_policy.stats.batches) == (without.stats.steps,
                                                                     without.stats.batches)


def test_silent_head_falls_back():
    """Asking a head that never answers costs its drafting time every round: it falls back."""
    result, base, _ = spec(silent_head, "one-pass", Fallback(window=2))
    assert result.stats.fallback_round == 2
    assert (base.passes_from(len(PROMPT))[1], result.stats.drafts_asked) == (0, 2)


def test_row_cost_decides_break_even():
    """With verify rows free, a garbage head's one-pass round costs exactly one step for one
    token: break-even, not a loss, so the policy never fires."""
    result, _, _ = spec(garbage_head, "one-pass", Fallback(window=1, row_cost=0, draft_cost=0))
    assert result.stats.fallback_round is None


class DeviceLikeBase(ToyBase):
    """A toy that takes the time a device would: `step_seconds` a step (2 ms unless told),
    1.2 steps' time for a batch of any width."""

    def __init__(self, *args, step_seconds=0.002, **kwargs):
        super().__init__(*args, **kwargs)
        self.step_seconds = step_seconds

    def step(self, token, pos):
        time.sleep(self.step_seconds)
        return super().step(token, pos)

    def verify(self, tokens, pos):
        time.sleep(1.2 * self.step_seconds)
        return super().verify(tokens, pos)


class SlowHead:
    """A perfect one-pass head that takes 100 ms to draft: a hundred of DeviceLikeBase's 1 ms
    steps, so one step slowed tenfold by a busy machine still leaves the rounds losing."""

    def __init__(self, oracle):
        self.inner = perfect_head(oracle)

    def needs_last_hidden(self):
        return False

    def propose(self, token, pos, k, hidden):
        time.sleep(0.1)
        return self.inner.propose(token, pos, k, hidden)

    def commit_rows(self, tokens, rows, count):
        self.inner.commit_rows(tokens, rows, count)

    def reset(self):
        self.inner.reset()


def test_measured_cost_charges_a_slow_head():
    """Measured, a perfect head that drafts slower than the base steps still loses: eight
    tokens per round do not pay for rounds that cost about a hundred steps' time. The model
    (unmeasured) cost cannot see that and keeps drafting."""
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, N + 16)
    measured = onebit.run(DeviceLikeBase(step_seconds=0.001), SlowHead(oracle), PROMPT,
                          max_tokens=N, k=7, fallback=Fallback(window=2, measured=True))
    modelled = onebit.run(DeviceLikeBase(step_seconds=0.001), SlowHead(oracle), PROMPT,
                          max_tokens=N, k=7, fallback=Fallback(window=2))
    assert measured.stats.fallback_round == 2
    assert modelled.stats.fallback_round is None
    assert measured.tokens == modelled.tokens


def test_contract_holds_with_fallback_on():
    """Every conformance check still holds on every standard scenario with an eager policy
    (window 2, drafting free so that only a real loss of passes counts): falling back changes
    the cost, never the text, the state or the rows; a perfect head keeps its pass law (its
    rounds never lose passes) and a garbage head keeps plain decode's."""
    run = functools.partial(onebit.run, fallback=Fallback(window=2, draft_cost=0))
    traces = [execute(run, s) for s in standard_scenarios()]
    failures = [f for t in traces for f in check_trace(t)]
    assert not failures, failures[:3]
    fired = [t.scenario.id for t in traces if t.result and t.result.stats.fallback_round]
    assert len(fired) > 10  # not vacuous: the policy fired on the losing arms


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"window": 0}, "window must be an integer >= 1, got 0"),
     ({"window": 2.5}, "window must be an integer >= 1"),
     ({"row_cost": -1}, "row_cost must be a number >= 0, got -1"),
     ({"draft_cost": "x"}, "draft_cost must be a number >= 0")],
)
def test_bad_policy(kwargs, message):
    """A policy out of range is refused when it is made, naming the parameter."""
    with pytest.raises(ValueError, match=message):
        Fallback(**kwargs)


def test_fallback_must_be_a_policy():
    """run() refuses a fallback that is not a Fallback before touching the base."""
    base = ToyBase()
    with pytest.raises(ValueError, match="fallback must be a onebit.Fallback or None, got 3"):
        onebit.run(base, None, PROMPT, max_tokens=3, k=2, fallback=3)
    assert base.steps == 0


def test_drafting_cost_decides_a_close_round():
    """Each round is charged its own call to the head, not the run's running total: a
    perfect k = 1 round (2 tokens for 1.95 steps: one 2-row batch at row_cost 0.9 plus one
    call at 0.05) wins every time, however long the run."""
    result, _, _ = spec(perfect_head, "one-pass", Fallback(window=3, row_cost=0.9), k=1)
    assert result.stats.fallback_round is None
    result, _, _ = spec(perfect_head, "one-pass", Fallback(window=3, row_cost=0.96), k=1)
    assert result.stats.fallback_round == 3  # 2.01 steps for 2 tokens: a loss




def test_measured_cost_keeps_a_paying_head():
    """Measured on a base whose batch costs about a step, a perfect head's rounds (8 tokens
    for about 1.2 steps of time) win, and the run never falls back."""
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, 30)
    result = onebit.run(DeviceLikeBase(), perfect_head(oracle), PROMPT, max_tokens=24, k=7,
                        fallback=Fallback(window=1, measured=True))
    assert result.stats.fallback_round is None
    assert result.stats.batches == 3


def test_measured_cost_without_a_step_time_uses_the_model():
    """A measured policy with no step time to compare against (a clock too coarse to see the
    prefill) prices the round by the model instead of dividing by zero."""
    policy = Fallback(measured=True)
    cost = policy.round_cost(steps=0, batches=1, batch_rows=8, drafts_asked=1, seconds=0.01,
                             step_seconds=0.0)
    assert cost == pytest.approx(1 + 7 * 0.1 + 0.05)
    assert policy.round_cost(steps=0, batches=1, batch_rows=8, drafts_asked=1, seconds=0.01,
                             step_seconds=0.002) == pytest.approx(5.0)
