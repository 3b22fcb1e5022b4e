"""The assertions fail with messages that point at the first difference, not a list dump."""

import numpy as np
import pytest

from pytest_onebit import (
    assert_logits_match,
    assert_pass_law,
    assert_plain_decode_equivalent,
    assert_rows_in_order,
    assert_tokens_equal,
    describe_divergence,
    pass_law,
    relative_l1,
)
from pytest_onebit.doubles.toy import ToyBase


def test_divergence_message_shows_index_and_context():
    """The message names the first diverging index and shows three tokens either side,
    with the diverging cells bracketed, not a 200-token dump."""
    expected = list(range(200))
    actual = expected[:117] + [999] + expected[118:]
    message = describe_divergence(actual, expected)
    assert message.splitlines() == [
        "tokens differ from greedy at index 117 (run has 200, greedy has 200)",
        "  index   114  115  116  >117<  118  119  120",
        "  run     114  115  116  [999]  118  119  120",
        "  greedy  114  115  116  [117]  118  119  120",
    ]


def test_divergence_at_a_length_difference():
    """A run that stops early diverges where the shorter list ends; the missing cell is '-'."""
    message = describe_divergence([5, 6, 7], [5, 6, 7, 8])
    first = message.splitlines()[0]
    assert first == "tokens differ from greedy at index 3 (run has 3, greedy has 4)"
    assert "[-]" in message.splitlines()[2] and "[8]" in message.splitlines()[3]


def test_equal_lists_have_no_divergence():
    """Equal lists pass silently."""
    assert describe_divergence([1, 2], [1, 2]) is None
    assert_tokens_equal([1, 2], [1, 2])


def test_helpers_hide_their_frames(pytester):
    """A failing helper's traceback ends in the user's test, not inside pytest_onebit."""
    pytester.makepyfile(
        """
        from pytest_onebit import assert_tokens_equal

        def test_user():
            assert_tokens_equal([1, 2, 3], [1, 9, 3])
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "tokens differ from greedy at index 1" in text
    assert "assertions.py" not in text


def test_plain_decode_equivalence_checks_the_base_too():
    """With the base it ran on, equivalence also means the base committed prompt + emitted
    and holds the state of stepping them."""
    base = ToyBase()
    for pos, t in enumerate([1, 2, 3, 4]):
        base.step(t, pos)
    assert_plain_decode_equivalent([3, 4], [3, 4], base=base, prompt=[1, 2])
    with pytest.raises(AssertionError, match="committed tokens differ from prompt \\+ emitted "
                                             "at index 3"):
        assert_plain_decode_equivalent([3, 5], [3, 5], base=base, prompt=[1, 2])


@pytest.mark.parametrize(
    ("two_pass", "n", "k", "rows", "steps", "batches"),
    [(False, 40, 7, 8, 0, 5), (False, 9, 7, 8, 1, 1), (False, 10, 0, 8, 10, 0),
     (False, 10, 5, 1, 10, 0), (True, 40, 7, 8, 5, 5), (True, 37, 8, 8, 5, 4),
     (True, 6, 0, 8, 6, 0), (True, 5, 3, 1, 3, 2)],
)
def test_pass_law_table(two_pass, n, k, rows, steps, batches):
    """The pass law's exact step and batch counts, worked by hand: e.g. one-pass N = 9, k = 7
    is one batch of 8 then one plain step; two-pass N = 37, k = 8 is five rounds of which the
    last emits t1 alone (no batch)."""
    law = pass_law(emitted=n, k=k, max_batch_rows=rows, two_pass=two_pass)
    assert (law.steps, law.batches) == (steps, batches)
    assert_pass_law(steps=steps, batches=batches, emitted=n, k=k, max_batch_rows=rows,
                    two_pass=two_pass)


def test_pass_law_failure_names_the_rule():
    """A run off its law is told the rule, the expected and the counted passes."""
    with pytest.raises(AssertionError, match=r"one-pass: ceil\(40 / \(7 \+ 1\)\) passes.*"
                                             r"expected 0 steps \+ 5 batches = 5 passes, "
                                             r"got 0 steps \+ 6 batches"):
        assert_pass_law(steps=0, batches=6, emitted=40, k=7, max_batch_rows=8, two_pass=False)
    with pytest.raises(AssertionError, match="garbage: one decode pass per emitted token"):
        assert_pass_law(steps=20, batches=1, emitted=20, k=4, max_batch_rows=8, two_pass=True,
                        head="garbage")


def test_rows_in_order_points_at_the_bad_row():
    """A head handed the wrong row for a position is told which position."""
    rows = np.arange(12.0).reshape(4, 3)
    assert_rows_in_order([1, 2, 3, 4], list(rows), [1, 2, 3, 4], rows)
    bad = rows.copy()
    bad[2, 1] += 0.5
    with pytest.raises(AssertionError, match="row for position 2 differs.*0.5"):
        assert_rows_in_order([1, 2, 3, 4], list(bad), [1, 2, 3, 4], rows)


def test_logits_match_bit_identical_and_within_budget():
    """rel_l1 = 0 demands bit-identical logits; a budget allows that much relative L1 error,
    and the message locates the largest difference."""
    b = np.array([[1.0, -2.0, 3.0], [0.5, 0.25, -4.0]])
    assert_logits_match(b.copy(), b)
    a = b.copy()
    a[1, 2] = np.nextafter(-4.0, 0.0)
    with pytest.raises(AssertionError, match=r"largest difference .* at index \(1, 2\)"):
        assert_logits_match(a, b)
    assert relative_l1(a, b) < 1e-15
    assert_logits_match(a, b, rel_l1=1e-12)
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_logits_match(a[0], b)
