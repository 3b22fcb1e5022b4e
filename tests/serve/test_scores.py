"""`ScoredBase`: the log-probabilities of emitted tokens come from the row that chose each,
whatever mix of prefill, steps and verify blocks the loop ran (the toy base, no model)."""

from __future__ import annotations

import numpy as np
import pytest

import onebit
from onebit.serve.scores import ScoredBase, log_softmax
from pytest_onebit.doubles.heads import Oracle, OracleHead
from pytest_onebit.doubles.toy import ToyBase

PROMPT = [3, 1, 4, 1, 5]
N = 12


def plain_logprobs(prompt, n):
    """The reference: step the toy greedily by hand and read each chosen row."""
    base = ToyBase()
    base.reset()
    rows = base.verify(prompt, 0)
    base.commit_verify(len(prompt))
    row, out = rows[-1], []
    for i in range(n):
        token = int(np.argmax(row))
        out.append((token, float(log_softmax(row)[token])))
        row = base.step(token, len(prompt) + i)
    return out


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
@pytest.mark.parametrize("verify_last", [False, True])
@pytest.mark.parametrize("right", ["all", "half", "none"])
def test_logprobs_equal_the_choosing_rows(flavour, verify_last, right):
    """With drafts all right, right at even slots, or all wrong (so blocks are accepted whole,
    cut, or rejected), the recorded (token, logprob) of every emitted token equals stepping
    plain greedy by hand, and there is one entry per emitted token."""
    rule = {"all": lambda pos, slot, k: True, "half": lambda pos, slot, k: slot % 2 == 0,
            "none": lambda pos, slot, k: False}[right]
    base = ScoredBase(ToyBase(verify_last=verify_last), start=len(PROMPT), top=2)
    head = OracleHead(Oracle.from_greedy(ToyBase(), PROMPT, N + 8), rule, flavour=flavour,
                      name=right)
    result = onebit.run(base, head, PROMPT, max_tokens=N, k=3)
    got = [(e.token, e.logprob) for e in base.logprobs]
    assert [t for t, _ in got] == result.tokens
    want = plain_logprobs(PROMPT, N)
    assert [t for t, _ in got] == [t for t, _ in want]
    np.testing.assert_allclose([lp for _, lp in got], [lp for _, lp in want], rtol=0, atol=0)
    assert all(len(e.top) == 2 and e.top[0][0] == e.token for e in base.logprobs)


def test_a_consumer_stop_inside_a_block_ends_the_entries_there():
    """The loop commits exactly what it emitted when the consumer stops mid-block, and the
    entries end with the stopping token."""
    base = ScoredBase(ToyBase(), start=len(PROMPT))
    head = OracleHead(Oracle.from_greedy(ToyBase(), PROMPT, 20), lambda p, s, k: True,
                      flavour="one-pass", name="perfect")
    seen = []

    def stop_at_three(token):
        seen.append(token)
        return False if len(seen) == 3 else None

    result = onebit.run(base, head, PROMPT, max_tokens=10, k=4, on_token=stop_at_three)
    assert len(result.tokens) == 3
    assert [e.token for e in base.logprobs] == result.tokens


def test_top_ids_equal_a_full_stable_sort_ties_included():
    """`top_ids` (a partition) gives exactly the full stable sort's first N ids, likeliest
    first and ties to the lower id, on rows full of ties and on random rows, for N from 0 to
    the whole row."""
    import numpy as np

    from onebit.serve.scores import top_ids

    rng = np.random.default_rng(0)
    rows = [rng.standard_normal(50), rng.integers(0, 4, 50).astype(float),
            np.zeros(50), np.r_[np.ones(10), np.zeros(40)]]
    for row in rows:
        full = np.lexsort((np.arange(row.size), -row))
        for n in (0, 1, 2, 5, 10, 11, 49, 50, 60):
            assert list(top_ids(row, n)) == list(full[:n]), (n, row[:12])
