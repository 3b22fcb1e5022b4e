"""The toy base itself: a harness is only as sharp as the base it runs on."""

import numpy as np
import pytest

import onebit
from pytest_onebit import ToyBase
from pytest_onebit.doubles.toy import MEMO_WIDTH

PROMPT = [3, 1, 4, 1, 5]

# Pinned from onebit.greedy on ToyBase() (seed 0); the toy is a hash, so any change to it,
# or a toy that degenerates to constants, shows here first.
GOLDEN = [40, 47, 26, 15, 37, 14, 29, 21, 29, 16, 4, 13, 2, 60, 0, 56, 33, 59, 2, 43]


def test_greedy_golden_sequence():
    """The toy's greedy continuation is pinned and not degenerate (many distinct tokens)."""
    tokens = onebit.greedy(ToyBase(), PROMPT, max_tokens=20).tokens
    assert tokens == GOLDEN
    assert len(set(tokens)) >= 15


@pytest.mark.parametrize("change", ["drop", "repeat", "swap", "shift"])
def test_history_sensitivity(change):
    """A dropped, repeated, swapped or misplaced token changes the next choice and the state,
    so a loop that makes any of these mistakes cannot hide it."""
    history = [7, 2, 9, 4, 11, 6]
    good = ToyBase()
    for pos, t in enumerate(history):
        logits = good.step(t, pos)
    bad = ToyBase()
    if change == "drop":
        seq, positions = history[:3] + history[4:], range(5)
    elif change == "repeat":
        seq, positions = history[:4] + history[3:], range(7)
    elif change == "swap":
        seq, positions = history[:2] + [history[3], history[2]] + history[4:], range(6)
    else:
        seq, positions = history, [0, 1, 2, 4, 5, 6]
    for pos, t in zip(positions, seq, strict=True):
        bad_logits = bad.step(t, pos)
    assert bad.state != good.state
    assert not np.array_equal(bad_logits, logits)


@pytest.mark.parametrize("shape", ["prefix", "batch"])
def test_verify_rows_equal_stepping(shape):
    """verify() scores every row bit-identically to stepping, commit_verify(n) leaves the
    state of stepping n tokens, and last_hidden_rows() has the promised shape."""
    tokens = [5, 9, 1, 30, 2]
    stepped = ToyBase(rows_shape=shape)
    stepped.step(8, 0)
    want = [stepped.step(t, 1 + i) for i, t in enumerate(tokens)]
    want_rows = stepped.rows_of([8, *tokens])[1:]
    batched = ToyBase(rows_shape=shape)
    batched.step(8, 0)
    got = batched.verify(tokens, 1)
    assert np.array_equal(got, np.stack(want))
    batched.commit_verify(3)
    assert batched.committed == [8, *tokens[:3]]
    assert batched.state == stepped.replay([8, *tokens[:3]]).state
    rows = batched.last_hidden_rows()
    assert rows.shape == ((3 if shape == "prefix" else 5), 16)
    assert np.array_equal(rows[:3], want_rows[:3])
    assert np.array_equal(batched.last_hidden(), want_rows[2])


def test_counters_and_misuse():
    """The toy counts passes, rows, consumed tokens, wrong positions, over-wide batches and a
    pass that skips commit_verify, instead of silently going along."""
    base = ToyBase(max_batch_rows=2)
    base.step(1, 0)
    base.step(2, 5)  # wrong position
    base.verify([1, 2, 3], 2)  # three rows on a two-row base
    base.step(4, 2)  # the batch was never committed
    base.commit_verify(1)  # nothing pending
    assert (base.steps, base.batches, base.batch_rows, base.consumed) == (3, 1, 3, 3)
    assert base.bad_pos == 1 and base.misplaced == ["step at position 5 with 1 committed"]
    assert base.over == 1
    assert len(base.misuse) == 2


def test_commit_verify_out_of_range_raises():
    """Committing more rows than the batch had is the caller's bug, reported as such."""
    base = ToyBase()
    base.step(1, 0)
    base.verify([2, 3], 1)
    with pytest.raises(onebit.ContractError, match="commit_verify\\(3\\) on a batch of 2"):
        base.commit_verify(3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"vocab_size": 1}, "vocab_size"), ({"max_batch_rows": 0}, "max_batch_rows"),
     ({"rows_shape": "ragged"}, "rows_shape"), ({"hidden": 0}, "hidden")],
)
def test_bad_toy_config(kwargs, message):
    """A toy configured out of range says which setting is wrong."""
    with pytest.raises(ValueError, match=message):
        ToyBase(**kwargs)


def test_toy_is_a_base_model():
    """The toy satisfies the BaseModel protocol (structurally)."""
    assert isinstance(ToyBase(), onebit.BaseModel)


def test_fixtures_build_fresh_parts(onebit_toy_base, onebit_oracle, onebit_perfect_head,
                                    onebit_plain_decode):
    """The plugin's factories make independent parts: a perfect head built from the oracle
    drives onebit.run to greedy's text."""
    truth = onebit_oracle(onebit_toy_base(), PROMPT, 30)
    head = onebit_perfect_head(truth, "two-pass")
    result = onebit.run(onebit_toy_base(), head, PROMPT, max_tokens=20, k=4)
    assert result.tokens == onebit_plain_decode(PROMPT, 20).tokens == GOLDEN


@pytest.mark.parametrize("hidden", [16, MEMO_WIDTH + 1])
def test_hidden_rows_are_fresh_however_they_are_remembered(hidden):
    """hidden_of hands out a writeable row of its own each time, equal to the row the hash
    gives: writing into one (as a careless loop might) changes neither what the toy shows next
    nor what another toy of the same width shows, for rows it remembers and rows it does not."""
    toy, other = ToyBase(hidden=hidden), ToyBase(hidden=hidden)
    row = toy.hidden_of(12345)
    want = row.copy()
    assert row.flags.writeable and row.shape == (hidden,)
    row[:] = 7.0
    assert np.array_equal(toy.hidden_of(12345), want)
    assert np.array_equal(other.hidden_of(12345), want)
    assert toy.hidden_of(12345) is not toy.hidden_of(12345)
