"""Prompt lookup: which match it picks, what it copies, and what it reads from the loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from onebit.heads import NgramHead
from onebit.heads.ngram import lookup


def test_longest_suffix_wins_over_a_more_recent_shorter_one():
    """The last 3 tokens (1 2 3) occurred at the start; the last 1 (3) occurred more recently
    (before 9). The 3-gram match is taken: the drafts are what followed 1 2 3."""
    text = [1, 2, 3, 4, 5, 3, 9, 1, 2, 3]
    assert lookup(text, 3, 2) == [4, 5]


def test_most_recent_match_of_the_same_length_wins():
    """1 2 was followed by 7 first and by 8 later: the later continuation is proposed."""
    assert lookup([1, 2, 7, 0, 1, 2, 8, 0, 1, 2], 2, 1) == [8]


def test_falls_back_to_shorter_ngrams_then_to_nothing():
    """No earlier 2-gram (5 6) but an earlier 6: its continuation; no earlier token at all:
    no drafts; a text of one token has nothing to match."""
    assert lookup([6, 1, 2, 5, 6], 2, 3) == [1, 2, 5]
    assert lookup([1, 2, 3, 4], 3, 4) == []
    assert lookup([7], 3, 4) == []


def test_copy_continues_a_short_period_past_the_text_end():
    """A period shorter than k: the copy runs into the drafts it already made, so the drafts
    keep the period (a b a b ... -> a b a b a)."""
    assert lookup([5, 1, 2, 1, 2, 1, 2], 3, 5) == [1, 2, 1, 2, 1]
    assert lookup([4, 4, 4], 3, 4) == [4, 4, 4, 4]


def test_k_caps_the_drafts():
    """k = 0 gives nothing; k caps the copy."""
    assert lookup([1, 2, 3, 1, 2], 2, 0) == []
    assert lookup([1, 2, 3, 9, 9, 1, 2], 2, 2) == [3, 9]


@given(st.lists(st.integers(0, 5), min_size=1, max_size=12), st.integers(1, 6),
       st.integers(0, 3), st.integers(1, 8))
def test_periodic_text_is_continued_exactly(pattern, repeats, longer, k):
    """On text made of a pattern repeated at least twice, with n at least the pattern's length
    (so the suffix fixes the phase), the drafts are exactly the pattern's continuation,
    whatever k."""
    p = len(pattern)
    text = pattern * (repeats + 1)
    drafts = lookup(text, p + longer, k)
    assert drafts == [text[(len(text) + j) % p] for j in range(k)]


@given(st.lists(st.integers(0, 3), max_size=30), st.integers(1, 4), st.integers(1, 6))
def test_drafts_are_a_copy_of_what_followed_an_earlier_match(text, n, k):
    """Whatever the text, the drafts are empty or there is an earlier occurrence i of some
    suffix of length m <= n whose continuation (extended by the drafts) they are."""
    drafts = lookup(text, n, k)
    if not drafts:
        return
    seq = text + drafts
    end = len(text)
    assert len(drafts) == k
    assert any(
        seq[i : i + m] == text[end - m :] and seq[i + m : i + m + k] == drafts
        for m in range(1, n + 1)
        for i in range(end - m)
    )


def test_head_reads_committed_text_and_t1_in_either_round_kind():
    """One-pass: t1 is not committed yet and is appended; two-pass: t1 is the last committed
    token at pos and is not counted twice. Both propose the same drafts, capped by both the
    head's k and the loop's."""
    one, two = NgramHead(n=2, k=3), NgramHead(n=2, k=3, two_pass=True)
    rows = np.zeros((6, 4))
    one.commit_rows([1, 2, 3, 4, 1, 9], rows, 5)  # the 9 is past count: not committed
    assert one.text == [1, 2, 3, 4, 1]
    two.commit_rows([1, 2, 3, 4, 1, 2], rows, 6)
    assert not one.needs_last_hidden() and two.needs_last_hidden()
    assert one.propose(2, 5, 8, None) == two.propose(2, 5, 8, rows[0]) == [3, 4, 1]
    assert one.propose(2, 5, 2, None) == [3, 4]
    one.reset()
    assert one.text == [] and one.propose(2, 0, 4, None) == []


@pytest.mark.parametrize("bad", [0, -1, True, 2.0])
def test_bad_parameters_are_rejected(bad):
    """n and k must be integers >= 1."""
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        NgramHead(n=bad)
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        NgramHead(k=bad)

