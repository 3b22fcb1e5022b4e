"""`answer_seeds`: the seeds of n independent answers to one request (onebit.generate_n and
onebit serve's `n` both take theirs from it; N4 in tests/text/test_generate_n.py holds the
answers themselves)."""

from __future__ import annotations

import pytest

from onebit.sampling import answer_seeds


def test_answer_i_draws_from_seed_plus_i():
    """Answer i's seed is seed + i, for every answer and nothing more: one answer is the seed
    itself, and seed 0 counts from 0."""
    assert answer_seeds(7, 3) == [7, 8, 9]
    assert answer_seeds(7, 1) == [7]
    assert answer_seeds(0, 4) == [0, 1, 2, 3]


def test_without_a_seed_each_answer_draws_its_own():
    """No seed: one None per answer (each run then draws a fresh seed of its own)."""
    assert answer_seeds(None, 1) == [None]
    assert answer_seeds(None, 3) == [None, None, None]


@pytest.mark.parametrize("n", [0, -1, True, False, 2.0, "2", None])
def test_an_n_that_is_not_a_positive_integer_is_refused_by_name(n):
    """n must be an int >= 1 (a bool is not a count): a ValueError naming n and the value."""
    with pytest.raises(ValueError, match=rf"n must be an integer >= 1, got {n!r}"):
        answer_seeds(5, n)


@pytest.mark.parametrize("seed", [-1, True, 1.5])
def test_a_bad_seed_is_refused_by_name(seed):
    """A seed SeededRng would refuse is refused here, before any answer runs."""
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        answer_seeds(seed, 2)
