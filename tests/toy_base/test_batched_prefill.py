"""The loop's batched prefill on the toy: the prompt goes through verify + commit_verify in
batches of the base's prefill width, the head gets every prompt row in order, the prefill is
counted apart from the decode, and a base that misbehaves mid-prefill is named by position
with nothing committed lost."""

import numpy as np
import pytest

import onebit
from onebit import BaseContractError, Fallback, Sampling
from pytest_onebit import Oracle, ToyBase, half_head, perfect_head

LONG = [(7 * i + 3) % 64 for i in range(19)]
N = 12


def prefill_calls(base, prompt):
    return [call for call in base.calls if call[1] < len(prompt)]


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
@pytest.mark.parametrize(("prompt_len", "rows", "prefill"), [
    (1, 8, None), (8, 8, None), (19, 8, None), (19, 4, 16), (19, 4, 2), (19, 1, None),
])
def test_prefill_batches_and_rows(flavour, prompt_len, rows, prefill):
    """A prompt of 1, 8 or 19 tokens goes through ceil(P / W) verifies of W rows (W the
    declared max_prefill_rows(), wider or narrower than the verify width, else
    max_batch_rows()), each committed whole, before the first decode pass; the head gets the
    P rows stepping gives, in one call; the text is greedy()'s; the stats count the prefill
    apart from the decode."""
    prompt = LONG[:prompt_len]
    oracle = Oracle.from_greedy(ToyBase(), prompt, N + 16)
    base = ToyBase(max_batch_rows=rows, max_prefill_rows=prefill)
    head = half_head(oracle, flavour)
    result = onebit.run(base, head, prompt, max_tokens=N, k=3)
    assert result.tokens == onebit.greedy(ToyBase(), prompt, max_tokens=N).tokens
    width = prefill or rows
    expected = [("verify", at, min(width, prompt_len - at)) for at in range(0, prompt_len, width)]
    assert base.calls[: len(expected)] == expected == prefill_calls(base, prompt)
    assert head.commit_calls[0] == prompt_len
    assert np.array_equal(np.stack(head.committed_rows[:prompt_len]), base.rows_of(prompt))
    s = result.stats
    assert (s.prefill_steps, s.prefill_batches, s.prefill_rows) == (0, len(expected), prompt_len)
    steps, batches, batch_rows = base.passes_from(prompt_len)
    assert (s.steps, s.batches, s.batch_rows) == (steps, batches, batch_rows)
    assert s.passes_per_token == (steps + batches) / N


def test_a_base_without_max_prefill_rows_prefills_at_its_verify_width():
    """max_prefill_rows() is optional: a base without it (here a wrapper that forwards only
    the protocol) prefills in batches of max_batch_rows()."""

    class Plain:
        def __init__(self):
            self.toy = ToyBase(max_batch_rows=3)
            self.vocab_size = self.toy.vocab_size

        def __getattr__(self, name):
            if name == "max_prefill_rows":
                raise AttributeError(name)
            return getattr(self.toy, name)

    base = Plain()
    result = onebit.run(base, None, LONG, max_tokens=4, k=0)
    assert [rows for _, _, rows in prefill_calls(base.toy, LONG)] == [3] * 6 + [1]
    assert result.stats.prefill_batches == 7


@pytest.mark.parametrize("value", [0, -3, 2.5, True, "8", None])
def test_bad_prefill_width_is_the_bases_contract_error(value):
    """A max_prefill_rows() that is not an integer >= 1 is a BaseContractError naming it,
    raised before the prompt reaches the base."""

    class Odd(ToyBase):
        def max_prefill_rows(self):
            return value

    base = Odd()
    with pytest.raises(BaseContractError, match=r"base\.max_prefill_rows\(\)") as info:
        onebit.run(base, None, LONG, max_tokens=4, k=2)
    assert info.value.emitted == [] and base.consumed == 0


class FaultyPrefill(ToyBase):
    """A toy whose `call`-th verify (a prefill batch) returns `fault`."""

    def __init__(self, call, fault, **config):
        super().__init__(**config)
        self.call, self.fault, self.verifies = call, fault, 0

    def reset(self):
        super().reset()
        self.verifies = 0

    def verify(self, tokens, pos):
        logits = super().verify(tokens, pos)
        self.verifies += 1
        if self.verifies != self.call:
            return logits
        if self.fault == "nan":
            logits = logits.copy()
            logits[2, 5] = np.nan
        if self.fault == "short":
            logits = logits[:-1]
        return logits

    def last_hidden_rows(self):
        rows = super().last_hidden_rows()
        if self.verifies == self.call and self.fault == "few":
            return rows[:-1]
        if self.verifies == self.call and self.fault == "wide":
            return np.concatenate([rows, rows[:, :1]], axis=1)
        return rows


@pytest.mark.parametrize(("fault", "message", "pos", "kept"), [
    ("nan", r"non-finite logits in row 2, scoring position 11$", 11, 8),
    ("short", r"verify of 8 rows at position 8 returned logits of shape \(7, 64\)", 8, 8),
    ("few", r"has shape \(7, 16\) after committing 8 rows; it must have at least 8 rows "
            r"\(positions 8\.\.15\)", 15, 16),
    ("wide", r"hidden rows for prompt position 8 have shape \(17,\)", 8, 19),
])
def test_a_fault_in_the_second_prefill_batch(fault, message, pos, kept):
    """A second prefill batch (positions 8..15 of a 19-token prompt) with a NaN, too few
    logits rows, too few hidden rows, or hidden rows of another width: a BaseContractError
    naming the position, nothing emitted, and the base holding only whole batches of the
    prompt: a batch with bad logits is dropped, one with too few rows was committed, and rows
    of another width show when the prompt's rows are joined, after the last batch."""
    oracle = Oracle.from_greedy(ToyBase(), LONG, 30)
    base = FaultyPrefill(2, fault)
    with pytest.raises(BaseContractError, match=message) as info:
        onebit.run(base, perfect_head(oracle), LONG, max_tokens=5, k=3)
    assert (info.value.pos, info.value.emitted, info.value.culprit) == (pos, [], "base")
    assert base.committed == LONG[:kept]


def test_a_measured_fallback_steps_the_last_prompt_token():
    """Under a measured fallback the prefill batches the first P - 1 tokens and steps the last
    (a step's time is the unit the policy charges rounds in): the text and the head's rows
    are unchanged, and the stats say so (one prefill step)."""
    oracle = Oracle.from_greedy(ToyBase(), LONG, 30)
    base, head = ToyBase(), perfect_head(oracle)
    result = onebit.run(base, head, LONG, max_tokens=N, k=3,
                        fallback=Fallback(measured=True))
    assert result.tokens == list(oracle.tokens[:N])
    assert prefill_calls(base, LONG) == [("verify", 0, 8), ("verify", 8, 8), ("verify", 16, 2),
                                         ("step", 18, 1)]
    s = result.stats
    assert (s.prefill_steps, s.prefill_batches, s.prefill_rows) == (1, 3, 18)
    assert np.array_equal(np.stack(head.committed_rows[:len(LONG)]), base.rows_of(LONG))
    one = ToyBase()
    onebit.run(one, None, LONG[:1], max_tokens=2, k=0, fallback=Fallback(measured=True))
    assert prefill_calls(one, LONG[:1]) == [("step", 0, 1)]


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
def test_sampled_runs_prefill_in_batches(flavour):
    """A sampled run prefills the same way (and replays with its seed); its t1 is drawn from
    the last prefill row's scores, as sample()'s is from its last prompt step, so the first
    token of both is the same draw."""
    oracle = Oracle.from_greedy(ToyBase(), LONG, 30)
    runs = []
    for _ in range(2):
        base = ToyBase(max_batch_rows=4, max_prefill_rows=16)
        result = onebit.run(base, half_head(oracle, flavour), LONG, max_tokens=N, k=3,
                            sampling=Sampling(0.8), seed=5)
        assert prefill_calls(base, LONG) == [("verify", 0, 16), ("verify", 16, 3)]
        assert base.committed == LONG + result.tokens
        runs.append(result.tokens)
    assert runs[0] == runs[1]
    plain = onebit.sample(ToyBase(), LONG, max_tokens=N, sampling=Sampling(0.8), seed=5)
    assert runs[0][0] == plain.tokens[0]  # the first draw of the same rng, the same scores
