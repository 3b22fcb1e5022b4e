"""The rng seam: `SeededRng` replays, draws only possible indices, and refuses what is not a
probability; `make_rng` picks the run's rng."""

import numpy as np
import pytest

from onebit import SeededRng
from onebit.sampling import SUM_TOLERANCE, check_distribution, make_rng, one_hot_rows


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
    with pytest.raises(ValueError, match=rf"^accept got probability {prob!r}; it must lie in"):
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

    class HalfRng:  # accept but no choice: the loop would fail at its first draw
        def accept(self, prob):
            return True

    with pytest.raises(ValueError, match=r"^rng must have accept\(prob\) and choice\(probs\)"):
        make_rng(HalfRng(), None)


def test_draws_follow_their_probabilities():
    """Over 4000 seeded draws, accept(0.3) is True about 30% of the time and choice draws each
    index about as often as its probability says (within 0.03; the seed fixes the draws, so
    this is not flaky, and a draw from the wrong law is off by far more)."""
    rng = SeededRng(2024)
    accepted = np.mean([rng.accept(0.3) for _ in range(4000)])
    assert abs(accepted - 0.3) < 0.03
    probs = np.array([0.2, 0.0, 0.5, 0.3])
    counts = np.bincount([rng.choice(probs) for _ in range(4000)], minlength=4) / 4000
    assert counts[1] == 0 and np.abs(counts - probs).max() < 0.03


def test_a_one_entry_row_is_a_distribution():
    """A vocabulary of one: choice([1.0]) is index 0."""
    assert SeededRng(0).choice(np.array([1.0])) == 0


def test_the_sum_tolerance_is_a_sharp_boundary():
    """A row summing to 1 + SUM_TOLERANCE exactly is a distribution; one off by twice that is
    a ValueError naming the sum. (The tolerance is a power of two, so both rows are exact.)"""
    at = np.array([0.5 + SUM_TOLERANCE, 0.5])
    assert float(at.sum()) - 1.0 == SUM_TOLERANCE
    np.testing.assert_array_equal(check_distribution(at), at)
    beyond = np.array([0.5 + 2 * SUM_TOLERANCE, 0.5])
    with pytest.raises(ValueError, match=r"^choice got probabilities summing to 1.0000000018"):
        SeededRng(0).choice(beyond)


def test_check_distribution_gives_float64_and_names_the_fault():
    """An integer one-hot row comes back as float64; a negative entry is named by value and
    index, under the caller's name (`choice` by default)."""
    row = check_distribution(np.array([0, 1, 0]))
    assert row.dtype == np.float64 and row.tolist() == [0.0, 1.0, 0.0]
    with pytest.raises(ValueError, match=r"^choice got probability -0.5 at index 1$"):
        check_distribution(np.array([1.5, -0.5]))
    with pytest.raises(ValueError, match=r"^verify got probability nan at index 0$"):
        check_distribution(np.array([np.nan, 1.0]), "verify")


def test_one_hot_rows():
    """The q rows of deterministic drafts: 1.0 on each drafted token, 0 elsewhere."""
    assert one_hot_rows([2, 0, 2], 3).tolist() == [[0, 0, 1], [1, 0, 0], [0, 0, 1]]
    assert one_hot_rows([], 4).shape == (0, 4)
