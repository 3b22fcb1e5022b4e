"""The sampling test's sample size and threshold, from its stated power."""

from __future__ import annotations

import math

import pytest

from pytest_onebit.peers.stats import Power, assert_distribution


def test_sample_size_meets_the_power_bound():
    """The derived n is the smallest whose bound delta >= sqrt(m/n) + tails holds."""
    power = Power(delta=0.02, alpha=1e-3, beta=0.01, outcomes=4)
    n = power.samples

    def bound(k: int) -> float:
        return (math.sqrt(4 / k) + math.sqrt(math.log(1e3) / (2 * k))
                + math.sqrt(math.log(1e2) / (2 * k)))

    assert bound(n) <= 0.02 < bound(n - 1)


def test_rejects_an_output_plain_sampling_never_gives():
    """A sample outside the exact support fails whatever the distance."""
    power = Power(delta=0.5, alpha=1e-3, beta=0.01, outcomes=2)
    with pytest.raises(AssertionError, match="never produces"):
        assert_distribution([(0,)] * 99 + [(5,)], {(0,): 0.5, (1,): 0.5}, power, where="x")


def test_bad_power_is_refused():
    """A power outside (0, 1) is a ValueError naming the field."""
    with pytest.raises(ValueError, match="Power.beta"):
        Power(delta=0.1, alpha=1e-3, beta=1.5, outcomes=2)
