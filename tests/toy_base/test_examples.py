"""The contract's headline numbers, written out as plain examples a reader can check by hand."""

import numpy as np
import pytest

import onebit
from pytest_onebit import Oracle, ToyBase, garbage_head, half_head, perfect_head

PROMPT = [3, 1, 4, 1, 5]
N = 40


def spec(head_factory, flavour, *, k, n=N, rows=8, on_token=None):
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, n + 16)
    base = ToyBase(max_batch_rows=rows)
    head = head_factory(oracle, flavour)
    result = onebit.run(base, head, PROMPT, max_tokens=n, k=k, on_token=on_token)
    return result, base, head


@pytest.mark.parametrize(
    ("flavour", "k", "passes_per_token", "steps", "batches"),
    [("one-pass", 7, 0.125, 0, 5), ("two-pass", 7, 0.25, 5, 5),
     ("one-pass", 12, 0.125, 0, 5), ("one-pass", 1, 0.5, 0, 20), ("one-pass", 2, 0.35, 1, 13)],
)
def test_perfect_head_pass_law(flavour, k, passes_per_token, steps, batches):
    """I7 by the numbers: at k = 7 on an 8-row base a perfect one-pass head costs 0.125 base
    passes per token and a two-pass head 0.25; k = 12 is clamped to 7 rows of drafts."""
    result, base, _ = spec(perfect_head, flavour, k=k)
    assert result.tokens == onebit.greedy(ToyBase(), PROMPT, max_tokens=N).tokens
    assert (result.stats.steps, result.stats.batches) == (steps, batches)
    assert result.stats.passes_per_token == passes_per_token
    assert max(rows for kind, _, rows in base.calls if kind == "verify") <= 8


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
@pytest.mark.parametrize("k", [1, 4, 7, 12])
def test_garbage_head_costs_plain_decode(flavour, k):
    """I8: a head that is always wrong costs exactly one base pass per token, and a two-pass
    loop never runs a batch for drafts its step already rejected."""
    result, base, _ = spec(garbage_head, flavour, k=k)
    assert result.stats.passes_per_token == 1.0
    assert result.stats.accepted == 0
    if flavour == "two-pass":
        assert base.passes_from(len(PROMPT))[1] == 0  # no batch after the prompt


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
@pytest.mark.parametrize("head_factory", [perfect_head, garbage_head, half_head])
def test_consumer_stop_on_sixth_token(flavour, head_factory):
    """I10: stopping on the 6th token leaves 6 emitted and 6 committed, whatever the round."""
    seen = []
    result, base, head = spec(head_factory, flavour, k=7,
                              on_token=lambda t: seen.append(t) or len(seen) < 6)
    assert len(result.tokens) == len(seen) == 6
    assert result.stopped
    assert base.committed == PROMPT + result.tokens
    assert head.committed_tokens == PROMPT + result.tokens


def test_one_row_base_gives_plain_steps():
    """I11: on a base that verifies one row at a time, the one-pass loop makes plain steps
    only, and the head still sees every committed row."""
    result, base, head = spec(perfect_head, "one-pass", k=7, rows=1)
    assert (base.passes_from(len(PROMPT))[1], result.stats.steps) == (0, N)
    assert head.committed_tokens == PROMPT + result.tokens
    assert result.tokens == onebit.greedy(ToyBase(), PROMPT, max_tokens=N).tokens


def test_one_pass_head_drafts_from_committed_rows_only():
    """I6 / I5: a one-pass head gets no hidden, and sees every committed token once, in
    order, t1 first in each round."""
    result, _, head = spec(half_head, "one-pass", k=4)
    assert all(p.hidden is None for p in head.proposals)
    assert head.committed_tokens == PROMPT + result.tokens
    assert head.commit_calls[0] == len(PROMPT)


def test_head_none_is_plain_decode():
    """head=None is plain decode: one step per token, the same text as greedy()."""
    base = ToyBase()
    result = onebit.run(base, None, PROMPT, max_tokens=N, k=7)
    assert result.tokens == onebit.greedy(ToyBase(), PROMPT, max_tokens=N).tokens
    assert (result.stats.steps, result.stats.batches) == (N, 0)


@pytest.mark.parametrize("max_tokens", [0, 1, 2, 9])
def test_small_budgets(max_tokens):
    """I9: tiny budgets emit exactly max_tokens and never ask for drafts past the budget."""
    result, base, head = spec(perfect_head, "one-pass", k=7, n=max_tokens)
    assert len(result.tokens) == max_tokens
    assert all(p.pos + p.k < len(PROMPT) + max_tokens for p in head.proposals)
    assert base.consumed == len(PROMPT) + max_tokens


def test_greedy_leaves_base_ready_for_one_more_step():
    """greedy() runs every emitted token through the base, so the base's committed sequence
    is prompt + emitted and the next step continues where decoding stopped."""
    base = ToyBase()
    result = onebit.greedy(base, PROMPT, max_tokens=10)
    assert base.committed == PROMPT + result.tokens
    longer = onebit.greedy(ToyBase(), PROMPT, max_tokens=11).tokens
    assert longer[:10] == result.tokens
    next_logits = base.logits_of(base.last_hidden())  # what the last step returned
    assert longer[10] == int(np.argmax(next_logits))


def test_stats_report_costs():
    """RunStats exposes the counters and the derived ratios the tools print."""
    result, _, _ = spec(half_head, "one-pass", k=4, n=37)
    s = result.stats
    assert s.emitted == 37
    assert (s.prefill_steps, s.prefill_batches, s.prefill_rows) == (0, 1, len(PROMPT))
    assert s.prefill_passes == 1
    assert s.passes == s.steps + s.batches
    assert s.tokens_per_pass == pytest.approx(37 / s.passes)
    assert 0 < s.acceptance_rate <= 1
