"""The black-box checks read counted passes as onebit's pass laws do."""

from __future__ import annotations

import pytest

from pytest_onebit.peers.judge import (
    assert_law,
    assert_law_predicted,
    predicted_passes,
    split_passes,
)


def test_first_pass_counts_its_drafts_and_the_prefill_token():
    """Widths [12, 5, 5, 5] after an 8-token prompt are four batches (k = 4, 20 tokens)."""
    assert split_passes([12, 5, 5, 5], 8) == (0, 4)
    assert_law([12, 5, 5, 5], prompt_len=8, emitted=20, k=4, head="perfect", where="x")


def test_one_pass_too_many_fails_the_perfect_law():
    """A perfect draft that costs a pass more than ceil(N / (k + 1)) fails I7."""
    with pytest.raises(AssertionError, match="one-pass"):
        assert_law([11, 4, 4, 4, 4, 2], prompt_len=8, emitted=20, k=4, head="perfect",
                   where="x")


def test_half_law_follows_the_acceptance_rule():
    """Drafts right at even positions from an even start: every round of k = 1 keeps its
    draft, so 20 tokens take 10 passes; from an odd start the first round keeps none."""
    even = lambda pos: pos % 2 == 0  # noqa: E731
    assert predicted_passes(20, 1, even, 8) == 10
    assert predicted_passes(20, 1, even, 9) == 11
    with pytest.raises(AssertionError, match="expected 10"):
        assert_law_predicted([9] + [2] * 10, emitted=20, k=1, right=even, start=8, where="x")
