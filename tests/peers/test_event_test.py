"""The event tests' false alarms, power and sample sizes (pytest_onebit/peers/event_test.py):
each stated figure checked against a direct computation or a simulation with a margin."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_onebit.peers.event_test import (
    OTHER,
    OneSampleEvents,
    TwoSampleEvents,
    binomial_pmf,
)

EXACT = {"a": 0.45, "b": 0.3, "c": 0.2, "d": 0.05}


def test_binomial_pmf_is_the_binomial():
    """The log-factorial pmf equals math.comb's, sums to 1, and is a point mass at p 0 or 1."""
    pmf = binomial_pmf(12, 0.3)
    direct = [math.comb(12, k) * 0.3**k * 0.7 ** (12 - k) for k in range(13)]
    assert np.allclose(pmf, direct, rtol=1e-10, atol=0)
    assert binomial_pmf(5, 0.0)[0] == 1.0 and binomial_pmf(5, 1.0)[5] == 1.0


def test_one_sample_false_alarm_is_at_most_alpha_exactly():
    """Summed over every event, the null's exact probability of a count in the rejection
    region is at most alpha (the union bound the test states)."""
    test = OneSampleEvents(EXACT, delta=0.05, alpha=1e-3, beta=0.01)
    n = test.samples
    total = 0.0
    for p, (lo, hi) in zip(test._p, test._regions(n), strict=True):
        pmf = binomial_pmf(n, p)
        total += pmf[: lo + 1].sum() + (pmf[hi:].sum() if hi <= n else 0.0)
    assert total <= 1e-3


def test_one_sample_n_reaches_the_power_and_is_near_the_smallest():
    """At its n the computed power is >= 1 - beta; 10 % fewer samples fall short, so n is
    not padded; and it is about 3x smaller than the expected-TV bound's n (11556 for four
    outcomes at TV 0.05)."""
    test = OneSampleEvents(EXACT, delta=0.05, alpha=1e-3, beta=0.01)
    n = test.samples
    assert test.power(n) >= 0.99
    assert test.power(int(n * 0.9)) < 0.99
    assert n < 11556 / 2.5


def test_one_sample_catches_a_shift_of_delta_as_often_as_it_says():
    """Samples from Q with TV(Q, P) = 0.1 (mass moved from a to d) are rejected in at least
    95 of 100 runs at 99 % stated power; samples from P itself in none of 100 runs."""
    rng = np.random.default_rng(7)
    test = OneSampleEvents(EXACT, delta=0.1, alpha=1e-3, beta=0.01)
    keys = list(EXACT)
    shifted = np.array([0.35, 0.3, 0.2, 0.15])

    def rejected(probs) -> bool:
        draws = rng.choice(len(keys), size=test.samples, p=probs)
        try:
            test.judge([keys[i] for i in draws], where="sim")
        except AssertionError:
            return True
        return False

    assert sum(rejected(shifted) for _ in range(100)) >= 95
    assert sum(rejected(np.array(list(EXACT.values()))) for _ in range(100)) == 0


def test_one_sample_names_the_event_and_an_impossible_outcome():
    """A failure names the event's outcomes and both frequencies; a sample outside P's
    support fails on its own, named."""
    test = OneSampleEvents({"a": 0.5, "b": 0.5}, delta=0.2)
    with pytest.raises(AssertionError, match=r"P\(\{'a'\}\) is 0.5000 under plain sampling"):
        test.judge(["a"] * test.samples, where="x")
    with pytest.raises(AssertionError, match="sampled 'z', which plain sampling never"):
        test.judge(["a", "b"] * 50 + ["z"], where="x")
    assert test.outcomes[-1] == OTHER


def test_two_sample_false_alarm_and_power_by_simulation():
    """Two samples of one distribution pass (no false alarm in 50 runs at alpha 1e-3); a
    shift of TV 0.1 between them fails in at least 48 of 50 runs at 99 % stated power."""
    rng = np.random.default_rng(3)
    test = TwoSampleEvents(max_outcomes=5, delta=0.1)
    p = np.array([0.45, 0.3, 0.2, 0.05])
    q = np.array([0.35, 0.3, 0.2, 0.15])

    def fails(a, b) -> bool:
        n = test.samples
        pilot = list(rng.choice(4, size=200, p=a))
        try:
            test.judge(list(rng.choice(4, size=n, p=b)), list(rng.choice(4, size=n, p=a)),
                       pilot=pilot, where="sim")
        except AssertionError:
            return True
        return False

    assert sum(fails(p, p) for _ in range(50)) == 0
    assert sum(fails(p, q) for _ in range(50)) >= 48


def test_two_sample_n_is_hoeffdings_and_sharper_than_the_tv_bound():
    """n = (sqrt(ln(2E / alpha)) + sqrt(ln(1 / beta)))^2 / delta^2 with E = 15 events over
    4 outcomes and other: 11478 at TV 0.05, against 30830 for the bound on the empirical TV."""
    test = TwoSampleEvents(max_outcomes=5, delta=0.05)
    assert len(test.events) == 15
    root = (math.sqrt(math.log(30 / 1e-3)) + math.sqrt(math.log(100))) / 0.05
    assert test.samples == math.ceil(root * root) == 11478


@pytest.mark.parametrize("bad", [dict(delta=0.0), dict(alpha=1.0), dict(beta=-0.1)])
def test_bad_rates_are_refused(bad):
    """A rate outside (0, 1) is a ValueError naming the field."""
    field = next(iter(bad))
    kwargs = dict(delta=0.1) | bad
    with pytest.raises(ValueError, match=f"OneSampleEvents.{field}"):
        OneSampleEvents({"a": 1.0}, **kwargs)
    with pytest.raises(ValueError, match=f"TwoSampleEvents.{field}"):
        TwoSampleEvents(max_outcomes=3, **kwargs)


def test_too_many_outcomes_and_a_distribution_that_is_not_one_are_refused():
    """Past 12 outcomes (2047 events) and a P that does not sum to 1: ValueErrors."""
    with pytest.raises(ValueError, match="1..12 outcomes"):
        OneSampleEvents({i: 1 / 13 for i in range(13)}, delta=0.1)
    with pytest.raises(ValueError, match="must sum to 1"):
        OneSampleEvents({"a": 0.5, "b": 0.4}, delta=0.1)
