"""`onebit.processors`: the knobs a request sends, as a base wrapper that processes every row
with its own prefix's state. Held here to N1 (every row, stepped or verified, is an
independent from-scratch formula of its own prefix), N2 (a processed base keeps the base
contract: its verify rows equal stepping, its partial commits are exact) and N3 (a rejected
draft leaves nothing), and to refusals that name the knob. The loop and sampling contracts
hold the loop on the processed toy (their `knobs-` scenarios); `mutants/knobs/` is killed by
these."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from onebit.processors import MASKED, ProcessedBase, ProcessorError, Processors
from pytest_onebit import check_base
from pytest_onebit.doubles.knobs import KNOBS
from pytest_onebit.doubles.toy import ToyBase

VOCAB = 16


@pytest.mark.parametrize("name", sorted(KNOBS))
def test_N2_processed_base_keeps_the_base_contract(name):
    """N2: ProcessedBase(toy, knobs) passes B1..B8: a verify row is exactly the row a step of the
    same prefix gives (its drafts before it in the penalty history, its min_tokens count), and
    commit_verify(n) leaves exactly stepping's state (a rejected draft leaves nothing)."""
    check_base(lambda: ProcessedBase(ToyBase(vocab_size=64, strict=True), KNOBS[name], 3))


def reference_row(raw, history, prompt_len, p: Processors):
    """The knobs applied from scratch to one row, written apart from onebit.processors: the
    row scores the position after `history`."""
    out = [float(x) for x in raw]
    generated = history[prompt_len:]
    if p.repetition_penalty != 1.0:
        for t in set(history):
            out[t] = out[t] / p.repetition_penalty if out[t] > 0 else \
                out[t] * p.repetition_penalty
    for t in set(generated):
        c = generated.count(t)
        out[t] -= p.frequency_penalty * c + p.presence_penalty
    for t, b in p.logit_bias.items():
        out[t] += b
    if len(generated) < p.min_tokens:
        for t in p.held:
            out[t] = MASKED
    return np.array(out)


knob_sets = st.builds(
    Processors,
    presence_penalty=st.floats(-2, 2), frequency_penalty=st.floats(-2, 2),
    repetition_penalty=st.floats(0.1, 3),
    logit_bias=st.dictionaries(st.integers(0, VOCAB - 1), st.floats(-100, 100), max_size=4),
    min_tokens=st.integers(0, 8), held=st.frozensets(st.integers(0, VOCAB - 1), max_size=3))


@given(knob_sets, st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=14),
       st.integers(1, 6), st.integers(0, 4))
def test_N1_every_row_is_the_from_scratch_formula(knobs, tokens, prompt_len, drafts):
    """N1: stepping a history and then verifying a few more tokens, every processed row equals
    the knobs applied from scratch to the raw row of its own prefix (to 1e-12: the order of
    float64 additions may differ)."""
    prompt_len = min(prompt_len, len(tokens))
    raw_base = ToyBase(vocab_size=VOCAB)
    base = ProcessedBase(ToyBase(vocab_size=VOCAB), knobs, prompt_len)
    committed, extra = tokens[:len(tokens) - drafts] or tokens[:1], tokens[len(tokens) - drafts:]
    for pos, t in enumerate(committed):
        got = base.step(t, pos)
        want = reference_row(raw_base.step(t, pos), committed[:pos + 1], prompt_len, knobs)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    if extra:
        rows = base.verify(extra, len(committed))
        raw = raw_base.verify(extra, len(committed))
        for i in range(len(extra)):
            want = reference_row(raw[i], committed + extra[:i + 1], prompt_len, knobs)
            np.testing.assert_allclose(rows[i], want, rtol=0, atol=1e-12)


def test_N3_a_rejected_draft_leaves_nothing():
    """N3: after a verify of three drafts of which one is kept, the next row is exactly the row a
    fresh processed base gives when stepped on the kept prefix."""
    knobs = KNOBS["all"]
    base = ProcessedBase(ToyBase(vocab_size=64), knobs, 2)
    for pos, t in enumerate([5, 6, 2, 2]):
        base.step(t, pos)
    base.verify([2, 4, 4], 4)
    base.commit_verify(1)
    fresh = ProcessedBase(ToyBase(vocab_size=64), knobs, 2)
    for pos, t in enumerate([5, 6, 2, 2, 2]):
        fresh.step(t, pos)
    np.testing.assert_array_equal(base.step(9, 5), fresh.step(9, 5))


@pytest.mark.parametrize("fields, name, message", [
    ({"presence_penalty": 3}, "presence_penalty", "must be in [-2, 2]"),
    ({"frequency_penalty": float("nan")}, "frequency_penalty", "must be a number"),
    ({"repetition_penalty": 0}, "repetition_penalty", "must be > 0"),
    ({"logit_bias": {-1: 1.0}}, "logit_bias[-1]", "a token id must be an integer >= 0"),
    ({"logit_bias": {3: 101}}, "logit_bias[3]", "must be in [-100, 100]"),
    ({"logit_bias": {i: 1.0 for i in range(301)}}, "logit_bias", "at most 300"),
    ({"min_tokens": -1}, "min_tokens", "must be an integer >= 0"),
    ({"logit_bias": [1, 2]}, "logit_bias", "must map token ids"),
])
def test_bad_knobs_are_refused_naming_the_knob(fields, name, message):
    """Each knob out of range is a ProcessorError (a ValueError) whose field names it."""
    with pytest.raises(ProcessorError) as caught:
        Processors(**fields)
    assert caught.value.field == name and message in str(caught.value)


def test_a_bias_outside_the_vocabulary_is_refused_before_any_pass():
    """A bias on token 64 of a 64-token base is refused when the wrapper is made."""
    with pytest.raises(ProcessorError, match=r"token 64 is outside the vocabulary \[0, 64\)"):
        ProcessedBase(ToyBase(vocab_size=64), Processors(logit_bias={64: 1.0}), 1)


def test_no_knob_leaves_the_rows_untouched():
    """Processors() changes nothing: the wrapper hands back the base's own rows."""
    base, plain = ProcessedBase(ToyBase(), Processors(), 2), ToyBase()
    assert not Processors().active
    np.testing.assert_array_equal(base.step(3, 0), plain.step(3, 0))

