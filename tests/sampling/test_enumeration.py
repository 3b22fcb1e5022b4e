"""The exact-distribution harness: the enumerating rng, exact and plain distributions, and the
assertion that compares them."""

import numpy as np
import pytest

import onebit
from onebit import Sampling
from pytest_onebit.doubles.toy import ToyBase
from pytest_onebit.sampling.enumeration import (
    NondeterministicRun,
    ScriptedRng,
    assert_distribution_equivalent,
    distance,
    distribution_of,
    plain_distribution,
    sample_distribution,
)


def test_enumeration_of_a_known_process_is_exact():
    """Flip a 0.3 coin; on heads draw from [0.5, 0.25, 0.25], on tails emit 9: every path is
    visited once and the probabilities are the products of the branch weights."""

    def play(rng):
        if rng.accept(0.3):
            return [rng.choice(np.array([0.5, 0.25, 0.25]))]
        return [9]

    d = distribution_of(play)
    assert d.leaves == 4
    assert d.probs == pytest.approx({(0,): 0.15, (1,): 0.075, (2,): 0.075, (9,): 0.7},
                                    abs=1e-15)


def test_branches_of_weight_zero_are_not_taken():
    """accept(1.0) has one branch and choice skips zero entries: the tree has no dead leaves."""

    def play(rng):
        return [int(rng.accept(1.0)), rng.choice(np.array([0.0, 1.0, 0.0]))]

    d = distribution_of(play)
    assert d.leaves == 1 and d.probs == {(1, 1): 1.0}


def test_weights_are_not_renormalised():
    """An unnormalised row is enumerated as given, so the lost mass shows."""
    d = distribution_of(lambda rng: [rng.choice(np.array([0.25, 0.25]))])
    assert d.mass == pytest.approx(0.5)


def test_a_run_that_is_not_a_function_of_its_rng_is_caught():
    """A process whose calls change between replays of the same answers is refused."""
    calls = iter(range(100))

    def play(rng):
        n = next(calls)
        return [rng.choice(np.full(2 + (n % 2), 1 / (2 + (n % 2))))]

    with pytest.raises(NondeterministicRun):
        distribution_of(play)


@pytest.mark.parametrize("bad", [np.array([0.5, -0.1, 0.6]), np.array([np.nan, 1.0]),
                                 np.zeros(3)])
def test_scripted_choice_refuses_what_no_rng_can_draw(bad):
    """Negative, NaN or all-zero rows are a ValueError, not a silent branch."""
    with pytest.raises(ValueError, match="ScriptedRng.choice"):
        ScriptedRng().choice(bad)


def test_plain_distribution_is_a_distribution():
    """plain sampling's exact distribution covers vocab^n sequences and sums to 1."""
    d = plain_distribution(ToyBase(vocab_size=4), [1, 2], max_tokens=3, sampling=Sampling(1.0))
    assert len(d.probs) == 64 and d.mass == pytest.approx(1.0, abs=1e-14)
    top = plain_distribution(ToyBase(vocab_size=4), [1, 2], max_tokens=3,
                             sampling=Sampling(1.0, top_k=2))
    assert len(top.probs) == 8


@pytest.mark.parametrize("sampling", [Sampling(1.0), Sampling(0.6, top_k=3),
                                      Sampling(1.4, top_p=0.7), Sampling(0.0)])
def test_the_plain_sampling_reference_has_the_target_distribution(sampling):
    """onebit.sample, enumerated through its rng, gives exactly prod p(t_i | prefix)."""
    base = ToyBase(vocab_size=4)
    a = sample_distribution(onebit.sample, base, [3, 0], max_tokens=3, sampling=sampling)
    b = plain_distribution(ToyBase(vocab_size=4), [3, 0], max_tokens=3, sampling=sampling)
    assert_distribution_equivalent(a, b, atol=1e-15, names=("sample()", "plain"))


def test_the_failure_names_the_sequence_the_probabilities_and_the_parting_prefix():
    """Two distributions that agree on the first token and part on the second: the message
    names the sequence of largest difference, both probabilities, and the prefix [0]."""
    a = {(0, 0): 0.25, (0, 1): 0.25, (1, 0): 0.5}
    b = {(0, 0): 0.40, (0, 1): 0.10, (1, 0): 0.5}
    with pytest.raises(AssertionError) as info:
        assert_distribution_equivalent(a, b)
    message = str(info.value)
    assert "differ by 1.500e-01" in message and "[0, 0]" in message
    assert "0.25" in message and "0.4" in message
    assert "after prefix [0]: P(0 | prefix) = 0.5 vs 0.8" in message
    assert distance(a, b) == (pytest.approx(0.15), (0, 0))


def test_equal_distributions_pass_and_nan_fails():
    """Within atol passes; a NaN probability is as far apart as can be."""
    assert_distribution_equivalent({(1,): 0.5, (2,): 0.5}, {(1,): 0.5 + 1e-13, (2,): 0.5})
    with pytest.raises(AssertionError, match="differ by inf"):
        assert_distribution_equivalent({(1,): float("nan")}, {(1,): 1.0})
