"""Hostile bases, heads and consumers, at every method and at random rounds: the run ends in
the right answer or in a typed error whose `emitted` is what the base committed."""

from __future__ import annotations

import itertools

import pytest
from fuzzing import TALLY, fuzz_settings
from hostile import FAULTS, FLAVOURS, HEADS, METHODS, RAISES, RETURNS, Case, judge
from hypothesis import given
from hypothesis import strategies as st

import onebit
from onebit import DecodeError, HeadContractError, PartError
from pytest_onebit import ToyBase

ONCE = ("reset", "max_batch_rows", "max_prefill_rows", "needs_last_hidden")


def test_every_raise_in_every_part_and_round_kind(tally):
    """Each exception kind, raised by each method of the base, the head and the consumer on
    its second call (its first for a method called once per run), in one-pass and two-pass
    rounds, plain decode and greedy(): a typed error carrying exactly what was emitted. Each
    return fault (NaN, wrong shape, wrong type) likewise, or the right answer where the
    wrong value is harmless (a tuple of drafts)."""
    judged = 0
    for part, methods in METHODS.items():
        for method, fault, flavour in itertools.product(methods, FAULTS, FLAVOURS):
            at = 1 if method in ONCE else 2  # the first call of a method called once a run
            outcome = judge(Case(part, method, at, fault, flavour, max_tokens=8))
            if outcome != "skip":
                tally("loop: hostile part, every method", outcome)
                judged += 1
    assert judged > 500
    # most faults are reached in a run of 8 tokens (not: verify in plain decode, and such)
    reached = TALLY["loop: hostile part, every method"]
    assert reached["clear error"] + reached["right answer"] > reached["not reached"]


def test_every_raise_is_wrapped_with_emitted_and_cause():
    """For every raise kind in a two-pass round: a PartError naming the head, the original as
    __cause__, pos the next position, emitted the tokens so far, never empty here."""
    for fault in RAISES:
        if fault in ("KeyboardInterrupt", "SystemExit"):
            continue
        case = Case("head", "propose", 4, fault, "two-pass", head="perfect", k=3)
        with pytest.raises(PartError) as info:
            from hostile import PROMPT, Hostile, Oracle
            truth = Oracle.from_greedy(ToyBase(), PROMPT, 40)
            head = Hostile(HEADS["perfect"](truth, "two-pass"), "propose", 4, fault)
            onebit.run(ToyBase(), head, PROMPT, max_tokens=30, k=3)
        error = info.value
        assert error.culprit == "head" and error.__cause__ is head.raised, case
        assert str(error).startswith(f"head.propose() raised {fault}: ")
        assert error.emitted == list(truth.tokens[: len(error.emitted)]) and len(error.emitted) > 3
        assert error.pos == len(PROMPT) + len(error.emitted)


@fuzz_settings(quick=60, long=3000)
@given(
    part=st.sampled_from(sorted(METHODS)),
    data=st.data(),
    at=st.integers(1, 3) | st.integers(1, 30),  # early calls often: once-a-run methods
    fault=st.sampled_from(FAULTS),
    flavour=st.sampled_from(FLAVOURS),
    head=st.sampled_from(sorted(HEADS)),
    k=st.integers(0, 9),
    max_tokens=st.integers(0, 40),
    rows=st.integers(1, 9),
    stop_at=st.none() | st.integers(1, 40),
)
def test_hostile_part_at_a_random_round(tally, part, data, at, fault, flavour, head, k,
                                        max_tokens, rows, stop_at):
    """Any part, any method, any fault, at any call, with any k, budget, batch bound and
    consumer stop: the right answer, or a typed error with emitted == committed."""
    method = data.draw(st.sampled_from(METHODS[part]), label="method")
    case = Case(part, method, at, fault, flavour, head, k, max_tokens, rows, stop_at)
    outcome = judge(case)
    if outcome != "skip":
        tally("loop: hostile part, random round", outcome)


@pytest.mark.parametrize("drafts", [[True], [5, False], [1.0], ["3"], [2**70]])
def test_drafts_that_are_not_token_ids(drafts, tally):
    """A bool, a float, a string or a huge int as a draft is the head's contract error naming
    the value and the slot, never read as a token id (True is not token 1)."""
    class Fixed:
        def needs_last_hidden(self):
            return False

        def propose(self, token, pos, k, hidden):
            return list(drafts)

        def commit_rows(self, tokens, rows, count):
            pass

        def reset(self):
            pass

    base = ToyBase()
    with pytest.raises(HeadContractError, match=r"head proposed .* for position \d+ \(slot "
                       r"\d\), outside the vocabulary"):
        onebit.run(base, Fixed(), [3, 1, 4], max_tokens=5, k=3)
    assert base.committed == [3, 1, 4]
    tally("loop: drafts that are not ids", "clear error")


@pytest.mark.parametrize("answer", ["array", "tuple", "int", "2d", "none"])
def test_propose_answer_types(answer, tally):
    """A head may answer with a list, a tuple, a 1-D array or None (the right answer); an int
    or a 2-D array is the head's contract error naming what it returned."""
    from hostile import PROMPT, Oracle
    truth = Oracle.from_greedy(ToyBase(), PROMPT, 30)
    inner = HEADS["perfect"](truth, "one-pass")

    class Answering:
        def __getattr__(self, name):
            return getattr(inner, name)

        def propose(self, *args):
            return RETURNS[answer](inner.propose(*args))

    if answer in ("int", "2d"):
        with pytest.raises(HeadContractError, match="head.propose returned (int|ndarray) .* "
                           "expected a list of token ids"):
            onebit.run(ToyBase(), Answering(), PROMPT, max_tokens=10, k=3)
        tally("loop: propose answer types", "clear error")
    else:
        result = onebit.run(ToyBase(), Answering(), PROMPT, max_tokens=10, k=3)
        assert result.tokens == list(truth.tokens[:10])
        tally("loop: propose answer types", "right answer")


def test_k_none_is_refused_before_the_base_is_touched(tally):
    """run(k=None) is a ValueError naming k, before the prefill (not a TypeError after it)."""
    base = ToyBase()
    with pytest.raises(ValueError, match="k must be an integer, got None"):
        onebit.run(base, None, [1, 2], max_tokens=3, k=None)
    assert base.steps == 0
    tally("loop: bad arguments", "clear error")


def test_decode_error_is_the_one_thing_to_catch():
    """ContractError and PartError are both DecodeErrors (and RuntimeErrors, as before)."""
    assert issubclass(onebit.ContractError, DecodeError)
    assert issubclass(PartError, DecodeError) and issubclass(DecodeError, RuntimeError)


@pytest.mark.parametrize("flavour", ["run", "greedy"])
@pytest.mark.parametrize("dtype", [bool, complex, object, str])
def test_logits_that_are_not_numbers(flavour, dtype, tally):
    """Logits of bools (argmax picks the first True: token 0), complex numbers, objects or
    strings are the base's contract error naming the dtype, never a text."""
    class OddLogits(ToyBase):
        def step(self, token, pos):
            logits = super().step(token, pos)
            return (logits > 0).astype(dtype) if pos >= 6 else logits

    base = OddLogits()
    with pytest.raises(onebit.BaseContractError, match="logits of dtype .*; expected numbers"
                       ) as info:
        if flavour == "run":
            onebit.run(base, None, [3, 1, 4, 1, 5], max_tokens=6, k=0)
        else:
            onebit.greedy(base, [3, 1, 4, 1, 5], max_tokens=6)
    assert base.committed == [3, 1, 4, 1, 5] + info.value.emitted
    tally("loop: logits that are not numbers", "clear error")
