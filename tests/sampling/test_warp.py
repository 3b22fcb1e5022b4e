"""`onebit.Sampling` and `onebit.warp`: logits to probabilities, temperature then top-k then
top-p, ties broken by token id."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from onebit import Sampling, warp


def test_greedy_is_one_hot_at_the_lowest_argmax():
    """Temperature 0 (and None) put all mass on the argmax, the lowest id among ties."""
    logits = np.array([1.0, 3.0, 3.0, -2.0])
    for sampling in (None, Sampling(0.0), Sampling(0.0, top_k=1, top_p=0.5)):
        assert warp(logits, sampling).tolist() == [0.0, 1.0, 0.0, 0.0]


def test_temperature_scales_the_softmax():
    """At temperature T the probabilities are softmax(logits / T), in float64."""
    logits = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    for t in (0.5, 1.0, 3.0):
        z = logits.astype(np.float64) / t
        want = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        got = warp(logits, Sampling(t))
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


def test_top_k_keeps_the_k_best_and_breaks_ties_by_id():
    """top_k keeps the k highest scores; of equal scores at the cut, the lower id stays."""
    logits = np.array([2.0, 5.0, 2.0, 2.0, 1.0])
    p = warp(logits, Sampling(1.0, top_k=2))
    assert np.flatnonzero(p).tolist() == [0, 1]
    assert p.sum() == pytest.approx(1.0, abs=1e-15)
    p3 = warp(logits, Sampling(1.0, top_k=3))
    assert np.flatnonzero(p3).tolist() == [0, 1, 2]


def test_top_p_keeps_the_smallest_set_reaching_p():
    """top_p keeps the most likely tokens until their mass reaches top_p, then renormalises."""
    probs = np.array([0.1, 0.5, 0.25, 0.15])
    logits = np.log(probs)
    assert np.flatnonzero(warp(logits, Sampling(1.0, top_p=0.5))).tolist() == [1]
    assert np.flatnonzero(warp(logits, Sampling(1.0, top_p=0.6))).tolist() == [1, 2]
    kept = warp(logits, Sampling(1.0, top_p=0.8))
    assert np.flatnonzero(kept).tolist() == [1, 2, 3]
    np.testing.assert_allclose(kept[[1, 2, 3]], np.array([0.5, 0.25, 0.15]) / 0.9, rtol=1e-14)


def test_top_k_applies_before_top_p():
    """top-p measures mass after top-k has renormalised: [0.4, 0.3, 0.3] cut to 2 is
    [4/7, 3/7], and top_p = 0.5 then keeps one token."""
    logits = np.log(np.array([0.4, 0.3, 0.3]))
    p = warp(logits, Sampling(1.0, top_k=2, top_p=0.5))
    assert p.tolist() == [1.0, 0.0, 0.0]


def test_a_tiny_temperature_does_not_overflow():
    """A temperature near 0 gives (nearly) one-hot probabilities, never NaN."""
    p = warp(np.array([1.0, 1.5, -3.0]), Sampling(1e-300))
    assert p.tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize(("knobs", "message"), [
    ({"temperature": -1.0}, "temperature"), ({"temperature": float("nan")}, "temperature"),
    ({"temperature": True}, "temperature"), ({"top_k": -1}, "top_k"), ({"top_k": 1.5}, "top_k"),
    ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p"),
    ({"top_k": True}, "top_k"), ({"top_k": "2"}, "top_k"), ({"top_p": True}, "top_p"),
    ({"top_p": "0.5"}, "top_p"),
])
def test_bad_sampling_is_a_value_error_naming_the_knob(knobs, message):
    """Each bad knob raises ValueError naming it and the value: `Sampling.<knob> must be ...,
    got <value>` (a bool is no number here, a string is no number at all)."""
    (knob, value), = knobs.items()
    with pytest.raises(ValueError, match=rf"^Sampling\.{message} must be .*, got {value!r}$"):
        Sampling(**knobs)


def test_knobs_are_stored_as_plain_python_numbers():
    """Sampling(1, np.int64(2), 1) keeps temperature 1.0 and top_p 1.0 as floats and top_k 2
    as an int, so two equal samplings compare and hash equal however they were spelled."""
    s = Sampling(1, top_k=np.int64(2), top_p=1)
    assert (type(s.temperature), type(s.top_k), type(s.top_p)) == (float, int, float)
    assert s == Sampling(1.0, 2, 1.0) and hash(s) == hash(Sampling(1.0, 2, 1.0))


@pytest.mark.parametrize("logits", [np.array([]), np.zeros((2, 2)), np.array([0.0, np.nan])])
def test_bad_logits_are_a_value_error(logits):
    """Empty, 2-D or non-finite logits are refused."""
    with pytest.raises(ValueError, match="warp"):
        warp(logits, Sampling(1.0))


@given(
    st.lists(st.integers(-4, 4), min_size=1, max_size=12),
    st.floats(0.05, 5.0), st.integers(0, 14), st.floats(0.01, 1.0),
)
def test_warp_is_a_distribution_over_the_best_tokens(scores, temperature, top_k, top_p):
    """For any logits and knobs: a distribution summing to 1, at most top_k tokens, and every
    kept token ranks (score, then lower id) above every dropped one."""
    logits = np.array(scores, dtype=np.float64)
    p = warp(logits, Sampling(temperature, top_k, top_p))
    assert abs(p.sum() - 1.0) < 1e-12 and (p >= 0).all()
    kept = set(np.flatnonzero(p).tolist())
    if top_k:
        assert len(kept) <= top_k
    rank = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    assert set(rank[: len(kept)]) == kept


def test_ties_rank_by_id_in_a_large_vocabulary():
    """With 40 tokens scoring the same (past the size where numpy's default sort is an
    insertion sort), top-k 5 keeps exactly tokens 0..4, each 1/5."""
    p = warp(np.zeros(40), Sampling(1.0, top_k=5))
    assert np.flatnonzero(p).tolist() == [0, 1, 2, 3, 4] and p[0] == 0.2
    scores = np.tile([1.0, 3.0, 2.0, 3.0], 10)  # 3.0 at 1, 3, 5, ...: keep the lowest ids
    assert np.flatnonzero(warp(scores, Sampling(1.0, top_k=7))).tolist() == [1, 3, 5, 7, 9, 11, 13]


def test_warp_is_quiet_under_strict_floating_point_errors():
    """Overflow (a gap of 2 at temperature 1e-308) and underflow (exp(-800)) are expected in
    the warp and stay silent even under np.errstate(all="raise"): one-hot answers, no error."""
    with np.errstate(all="raise"):
        assert warp(np.array([0.0, -2.0]), Sampling(1e-308)).tolist() == [1.0, 0.0]
        assert warp(np.array([0.0, -800.0]), Sampling(1.0)).tolist() == [1.0, 0.0]


def test_a_non_finite_logit_is_named_by_token_and_value():
    """The first non-finite logit is named: its token id and its value."""
    with pytest.raises(ValueError, match=r"^warp got a non-finite logit at token 2: inf$"):
        warp(np.array([0.0, 1.0, np.inf, np.nan]), Sampling())


def test_top_p_one_keeps_a_token_too_small_to_move_the_running_mass():
    """top_p = 1.0 means no nucleus cut: a token with probability e^-39 (about 1e-17, too
    small to change a running sum that has already reached 1.0 in float64) keeps exactly its
    softmax probability. A cut applied at top_p = 1.0 would drop it, since the running mass
    reaches 1.0 at the first token."""
    logits = np.array([0.0, -39.0])
    p = warp(logits, Sampling(1.0, top_p=1.0))
    assert p[1] == np.exp(-39.0) / (1.0 + np.exp(-39.0))
    assert p[1] > 0.0 and np.cumsum([p[0]])[0] == 1.0
