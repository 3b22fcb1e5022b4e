"""run() with sampling: the greedy limit, seeds, the head's q rows checked, a consumer stop,
bad arguments, and a property test of the exact distribution over random knobs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import onebit
from onebit import BaseContractError, Drafts, HeadContractError, Sampling, SeededRng
from onebit.heads.choose import choose
from onebit.loop import Q_SUM_TOLERANCE
from pytest_onebit.doubles.heads import Oracle, half_head, perfect_head
from pytest_onebit.doubles.sampling_heads import FLAVOURS, KINDS, MemoToyBase, sampling_head
from pytest_onebit.doubles.toy import ToyBase
from pytest_onebit.sampling.enumeration import (
    assert_distribution_equivalent,
    exact_distribution,
    plain_distribution,
)

PROMPT = [3, 1, 4]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_temperature_zero_is_todays_greedy(flavour):
    """sampling=Sampling(0, ...) runs the greedy loop: the same text and the same stats as
    sampling=None, with an oracle head that is half right."""
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, 60)
    plain = onebit.run(ToyBase(), half_head(oracle, flavour), PROMPT, max_tokens=40, k=5)
    zero = onebit.run(ToyBase(), half_head(oracle, flavour), PROMPT, max_tokens=40, k=5,
                      sampling=Sampling(0.0, top_k=3, top_p=0.5), seed=4)
    assert zero.tokens == plain.tokens == onebit.greedy(ToyBase(), PROMPT, max_tokens=40).tokens
    assert zero.stats == plain.stats


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_seed_replays_and_is_reported(flavour):
    """seed=s twice gives the same tokens; result.seed says s; with no seed the run draws
    one, reports it, and a run with that seed replays the text."""
    base = ToyBase()
    s = Sampling(0.9, top_k=10)

    def go(**source):
        return onebit.run(base, sampling_head(base, "model", flavour), PROMPT,
                          max_tokens=30, k=4, sampling=s, **source)

    first, again = go(seed=12), go(seed=12)
    assert first.tokens == again.tokens and first.seed == 12
    drawn = go()
    assert drawn.seed is not None and go(seed=drawn.seed).tokens == drawn.tokens
    assert go(rng=SeededRng(12)).tokens == first.tokens


def test_q_equal_to_p_accepts_every_draft():
    """With q = p the acceptance probability min(1, p/q) is exactly 1: every draft proposed
    is accepted, and the base commits prompt + emitted."""
    base = ToyBase(vocab_size=16)
    result = onebit.run(base, sampling_head(base, "same"), PROMPT, max_tokens=25, k=4,
                        sampling=Sampling(1.0), seed=3)
    assert len(result.tokens) == 25 and result.stats.accepted == result.stats.proposed
    assert base.committed == PROMPT + result.tokens


class _BadQHead:
    """A head whose q rows are broken in a chosen way."""

    def __init__(self, how):
        self.how = how

    def needs_last_hidden(self):
        return False

    def reset(self):
        pass

    def commit_rows(self, tokens, rows, count):
        pass

    def propose(self, token, pos, k, hidden):
        q = np.full((k, 64), 1 / 64)
        if self.how == "shape":
            return Drafts([1] * k, q[:, :10])
        if self.how == "rows":
            return Drafts([1] * k, q[:-1])
        if self.how == "flat":
            return Drafts([1] * k, q[0])
        if self.how == "zero":
            q[:, 1] = 0.0
            q[:, 2] += 1 / 64
        if self.how == "sum":
            q *= 2
        if self.how == "late":  # slot 1's row gives its draft no mass
            q[1, 1] = 0.0
            q[1, 2] += 1 / 64
        if self.how in ("edge", "over"):  # off by exactly the tolerance, then by twice it
            q[:, 0] += Q_SUM_TOLERANCE * (1 if self.how == "edge" else 2)
        return Drafts([1] * k, q)


@pytest.mark.parametrize(("how", "message"), [
    ("shape", r"^head returned q of shape \(3, 10\) with 3 drafts at position 4; "
              r"expected \(3, 64\)$"),
    ("rows", r"^head returned q of shape \(2, 64\) with 3 drafts at position 4; "
             r"expected \(3, 64\)$"),
    ("flat", r"^head returned q of shape \(64,\) with 3 drafts at position 4; "
             r"expected \(3, 64\)$"),
    ("zero", r"^head's q row for slot 0 \(position 4\) is not a distribution with draft 1"),
    ("sum", r"^head's q row for slot 0 \(position 4\) is not a distribution"),
    ("late", r"^head's q row for slot 1 \(position 5\) is not a distribution with draft 1"),
    ("over", r"^head's q row for slot 0 \(position 4\) is not a distribution"),
])
def test_a_head_with_bad_q_rows_is_a_head_contract_error(how, message):
    """q of the wrong shape (columns, too few rows, not 2-D), q not a distribution, or a draft
    q says is impossible: a HeadContractError naming the shape or slot and the position (the
    first draft's, 4, after a 3-token prompt), with committed == emitted."""
    base = ToyBase()
    with pytest.raises(HeadContractError, match=message) as info:
        onebit.run(base, _BadQHead(how), PROMPT, max_tokens=10, k=3, sampling=Sampling(1.0),
                   seed=0)
    assert info.value.pos == (5 if how == "late" else 4)
    assert base.committed == PROMPT + info.value.emitted


def test_a_q_row_off_by_exactly_the_tolerance_is_a_distribution():
    """A q row summing to 1 + Q_SUM_TOLERANCE (exact in float64) is accepted; twice that is
    refused (the case above)."""
    assert float(np.full(64, 1 / 64).sum() + Q_SUM_TOLERANCE) - 1.0 == Q_SUM_TOLERANCE
    result = onebit.run(ToyBase(), _BadQHead("edge"), PROMPT, max_tokens=10, k=3,
                        sampling=Sampling(1.0), seed=0)
    assert len(result.tokens) == 10


def test_q_rows_are_read_as_float64_whatever_array_holds_them():
    """A head may hand q as an object array of Python floats: the loop reads it as float64,
    so the run is the one a float64 q gives (same seed, same text and stats)."""

    class ObjectQ:
        def __init__(self, base):
            self.inner = sampling_head(base, "model")

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def propose(self, *args):
            drafts = self.inner.propose(*args)
            return Drafts(drafts.tokens, drafts.q.astype(object))

    runs = []
    for make in (lambda b: sampling_head(b, "model"), ObjectQ):
        base = ToyBase()
        runs.append(onebit.run(base, make(base), PROMPT, max_tokens=20, k=3,
                               sampling=Sampling(1.0, top_k=8), seed=5))
    assert runs[0].tokens == runs[1].tokens and runs[0].stats == runs[1].stats


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"sampling": 0.7}, "sampling"), ({"sampling": Sampling(), "seed": -2}, "seed"),
    ({"sampling": Sampling(), "seed": 1, "rng": SeededRng(1)}, "not both"),
    ({"sampling": Sampling(), "rng": object()}, "accept"),
])
def test_bad_sampling_arguments_raise_before_the_base_is_touched(kwargs, message):
    """A bad sampling, seed or rng is a ValueError, and the base is never stepped."""
    base = ToyBase()
    with pytest.raises(ValueError, match=message):
        onebit.run(base, None, PROMPT, max_tokens=5, k=2, **kwargs)
    assert base.steps == 0
    with pytest.raises(ValueError, match=message):
        onebit.sample(base, PROMPT, max_tokens=5, **{"sampling": Sampling(), **kwargs})
    assert base.steps == 0


@given(st.sampled_from(FLAVOURS), st.sampled_from(KINDS), st.integers(1, 6),
       st.integers(1, 20), st.integers(0, 2**31))
@settings(max_examples=40)
def test_a_consumer_stop_commits_exactly_what_was_emitted(flavour, kind, k, stop, seed):
    """Wherever the consumer stops a sampled run, j tokens are emitted and j committed."""
    base = ToyBase(vocab_size=16)
    seen = []
    result = onebit.run(base, sampling_head(base, kind, flavour), PROMPT, max_tokens=20, k=k,
                        sampling=Sampling(1.0, top_k=4), seed=seed,
                        on_token=lambda t: seen.append(t) or len(seen) < stop)
    assert len(result.tokens) == len(seen) == min(stop, 20)
    assert base.committed == PROMPT + result.tokens


@given(st.sampled_from(FLAVOURS), st.sampled_from(KINDS), st.integers(1, 4),
       st.floats(0.3, 2.0), st.integers(0, 3), st.sampled_from([1.0, 0.9, 0.6]),
       st.integers(0, 50), st.integers(1, 8))
@settings(max_examples=25)
def test_the_exact_distribution_holds_for_any_knobs(flavour, kind, k, temperature, top_k,
                                                      top_p, seed, rows):
    """For random round kind, head kind, k, temperature, top-k, top-p, toy weights and row
    limit, a 2-token sampled run on a 3-token toy has plain sampling's exact distribution."""
    s = Sampling(temperature, top_k, top_p)
    base = MemoToyBase(vocab_size=3, seed=seed, max_batch_rows=rows)
    d = exact_distribution(onebit.run, base, sampling_head(base, kind, flavour), [2, 0],
                           max_tokens=2, k=k, sampling=s)
    want = plain_distribution(ToyBase(vocab_size=3, seed=seed), [2, 0], max_tokens=2,
                              sampling=s)
    assert_distribution_equivalent(d, want, atol=1e-12)


def test_choose_greedy_and_sampled():
    """choose: argmax with a one-hot q when greedy or without an rng; otherwise a draw from
    warp(logits) returned with exactly that row."""
    logits = np.array([0.1, 2.0, 1.9, -1.0])
    for sampling, rng in ((None, SeededRng(0)), (Sampling(0.0), SeededRng(0)),
                          (Sampling(1.0), None)):
        token, q = choose(logits, sampling, rng)
        assert token == 1 and q.tolist() == [0.0, 1.0, 0.0, 0.0]
    s = Sampling(1.0, top_k=2)
    draws = {choose(logits, s, rng)[0] for rng in [SeededRng(i) for i in range(40)]}
    assert draws == {1, 2}
    np.testing.assert_array_equal(choose(logits, s, SeededRng(0))[1], onebit.warp(logits, s))


@pytest.mark.parametrize(("flavour", "rows", "k", "most"), [
    ("one-pass", 8, 2, 2), ("two-pass", 8, 2, 2),  # k is the limit
    ("one-pass", 2, 4, 1), ("two-pass", 2, 4, 2),  # the batch rows are (t1 rides in one pass)
    ("two-pass", 8, 1, 1),
])
def test_a_sampled_round_asks_the_head_as_a_greedy_one_does(flavour, rows, k, most):
    """Over a 20-token sampled run, the head is asked for between 1 and `most` drafts (never 0:
    a round with no room does not ask), reaching `most`; it is handed t1 (the token at the
    position it is asked about) and, in two passes, the base's hidden row after t1; and the
    base never gets a batch over its row limit."""
    base = ToyBase(vocab_size=16, max_batch_rows=rows)
    head = sampling_head(base, "same", flavour)
    calls = []
    propose = head.propose

    def recording(token, pos, room, hidden):
        calls.append((token, pos, room, hidden))
        return propose(token, pos, room, hidden)

    head.propose = recording
    result = onebit.run(base, head, PROMPT, max_tokens=20, k=k, sampling=Sampling(1.0), seed=3)
    text = PROMPT + result.tokens
    assert min(c[2] for c in calls) >= 1 and max(c[2] for c in calls) == most
    assert all(token == text[pos] for token, pos, _, _ in calls)
    if flavour == "two-pass":
        assert all(h is not None and h.shape == (base.config.hidden,) for *_, h in calls)
    assert not base.over and result.stats.proposed > 0


def test_one_enumeration_per_case_and_a_fresh_cache_enumerates_afresh():
    """S1 and S4 share one enumeration per (loop, scenario) case of a cache; a new cache (each
    pytest session and each contract run makes one, so a forked test process never reuses
    the traces of the code it was forked from) enumerates again, to the same distribution."""
    from pytest_onebit.contract import CaseCache
    from pytest_onebit.sampling.checks import SAMPLING
    from pytest_onebit.sampling.scenarios import SamplingScenario

    s = SamplingScenario("one-pass", "same", k=1, max_tokens=2)
    cache = CaseCache()
    first = cache.case(SAMPLING, onebit.run, s).trace
    assert cache.case(SAMPLING, onebit.run, s).trace is first
    again = CaseCache().case(SAMPLING, onebit.run, s).trace
    assert again is not first and again.speculative.probs == first.speculative.probs


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize(("k", "rows", "tokens"), [(4, 8, 10), (3, 2, 17), (1, 8, 9)])
def test_when_every_draft_is_accepted_the_rounds_are_the_greedy_ones(flavour, k, rows, tokens):
    """With q = p every draft is accepted (min(1, p/q) = 1), so a sampled run has the round
    structure of a greedy run with a perfect head: the same rounds, steps, batches, batch
    rows, drafts proposed and accepted, whatever k, the row limit and the budget allow."""
    base = ToyBase(vocab_size=16, max_batch_rows=rows)
    sampled = onebit.run(base, sampling_head(base, "same", flavour), PROMPT, max_tokens=tokens,
                         k=k, sampling=Sampling(1.0), seed=3)
    oracle = Oracle.from_greedy(ToyBase(vocab_size=16), PROMPT, 40)
    greedy = onebit.run(ToyBase(vocab_size=16, max_batch_rows=rows),
                        perfect_head(oracle, flavour), PROMPT, max_tokens=tokens, k=k)
    assert sampled.stats == greedy.stats and sampled.stats.accepted > 0


class NanAfter(ToyBase):
    """A toy whose steps return a NaN logit once they score position `bad` or later; records
    the position the first poisoned step scores."""

    def __init__(self, bad: int, **config) -> None:
        super().__init__(**config)
        self.bad, self.poisoned = bad, None

    def step(self, token, pos):
        logits = super().step(token, pos)
        if pos + 1 >= self.bad:
            self.poisoned = self.poisoned or pos + 1
            logits = logits.copy()
            logits[2] = np.nan
        return logits


@pytest.mark.parametrize("drafting", [True, False])
def test_a_two_pass_round_names_the_position_its_step_scores(drafting):
    """In a sampled two-pass round, NaN scores from the step of t1 are a BaseContractError
    naming the position they score, whether they judge d0 (a head that drafts) or give the next
    token (a head that proposes nothing)."""
    base = NanAfter(9, vocab_size=16)
    head = sampling_head(base, "same", "two-pass")
    if not drafting:
        head.propose = lambda token, pos, k, hidden: []
    with pytest.raises(BaseContractError) as info:
        onebit.run(base, head, PROMPT, max_tokens=30, k=2, sampling=Sampling(1.0), seed=3)
    assert base.poisoned is not None and base.poisoned >= 9
    assert str(info.value).endswith(f"non-finite logits scoring position {base.poisoned}")
    assert info.value.pos == base.poisoned


def test_a_rejection_with_no_residual_mass_draws_from_p():
    """q may sum to 1 within the loop's tolerance: with p = (0.5, 0.5) and q = (0.5 + 1e-9,
    0.5) draft 0 can be rejected while max(0, p - q) is all zero. The replacement is then drawn
    from p itself (the rejection had probability ~2e-9), never from a 0/0 row."""
    from onebit.loop import _judge

    class Rejects:
        def accept(self, prob):
            self.prob = prob
            return False

        def choice(self, probs):
            self.row = np.asarray(probs)
            return int(np.argmax(probs))

    rng = Rejects()
    p = np.array([0.5, 0.5])
    assert _judge(p, np.array([0.5 + 1e-9, 0.5]), 0, rng) == 0
    assert rng.prob < 1 and rng.row.tolist() == [0.5, 0.5]
    assert _judge(np.array([0.7, 0.3]), np.array([0.2, 0.8]), 1, rng) == 0
    assert rng.prob == 0.3 / 0.8 and rng.row.tolist() == [1.0, 0.0]  # the residual, normalised
