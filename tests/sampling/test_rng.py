"""The rng seam: `SeededRng` replays, draws only possible indices, and refuses what is not a
probability; `make_rng` picks the run's rng."""

import numpy as np
import pytest

from onebit import SeededRng
from onebit.sampling import make_rng


def test_the_same_seed_replays_the_same_draws():
    """Two SeededRng(7) give the same sequence of accept and choice answers."""
    probs = np.array([0.2, 0.0, 0.5, 0.3])
    a, b = SeededRng(7), SeededRng(7)
    draws = [(a.accept(0.4), a.choice(probs)) for _ in range(50)]
    assert draws == [(b.accept(0.4), b.choice(probs)) for _ in range(50)]
    assert len({d for d in draws}) > 1


def test_choice_never_draws_an_impossible_index():
    """Over many draws, an index of probability 0 never comes out, and the others do."""
    rng = SeededRng(1)
    probs = np.array([0.0, 0.7, 0.0, 0.3, 0.0])
    seen = {rng.choice(probs) for _ in range(400)}
    assert seen == {1, 3}


def test_accept_edges():
    """accept(0) is never True, accept(1) always."""
    rng = SeededRng(3)
    assert not any(rng.accept(0.0) for _ in range(100))
    assert all(rng.accept(1.0) for _ in range(100))


def test_no_seed_draws_one_and_keeps_it():
    """SeededRng() draws a seed from the OS and keeps it; SeededRng(that seed) replays it."""
    rng = SeededRng()
    again = SeededRng(rng.seed)
    assert [rng.choice(np.full(5, 0.2)) for _ in range(20)] == \
        [again.choice(np.full(5, 0.2)) for _ in range(20)]


@pytest.mark.parametrize("probs", [[0.5, 0.6], [1.5, -0.5], [np.nan, 1.0], [], [[1.0]]])
def test_choice_refuses_what_is_not_a_distribution(probs):
    """A row that is negative, non-finite, empty, 2-D or does not sum to 1 is a ValueError."""
    with pytest.raises(ValueError, match="choice"):
        SeededRng(0).choice(np.array(probs))


@pytest.mark.parametrize("prob", [-0.1, 1.01, float("nan")])
def test_accept_refuses_a_probability_outside_0_1(prob):
    """accept(prob) needs prob in [0, 1]."""
    with pytest.raises(ValueError, match="accept"):
        SeededRng(0).accept(prob)


@pytest.mark.parametrize("seed", [-1, 1.5, "3", True])
def test_a_bad_seed_is_a_value_error(seed):
    """Seeds are integers >= 0."""
    with pytest.raises(ValueError, match="seed"):
        SeededRng(seed)


def test_make_rng():
    """make_rng: rng if given, else SeededRng(seed); both, or an rng without the two
    methods, is a ValueError."""
    mine = SeededRng(5)
    assert make_rng(mine, None) is mine
    assert make_rng(None, 9).seed == 9
    with pytest.raises(ValueError, match="not both"):
        make_rng(mine, 9)
    with pytest.raises(ValueError, match="accept"):
        make_rng(object(), None)
