"""Bad input gets a clear error, and nothing is lost: committed == emitted after any failure."""

import numpy as np
import pytest

import onebit
from onebit import BaseContractError, ContractError, HeadContractError, PartError
from pytest_onebit import Oracle, ToyBase, half_head, perfect_head

PROMPT = [3, 1, 4, 1, 5]


SHARED_CASES = [
    ({"prompt": []}, "prompt is empty"),
    ({"prompt": [3, 64, 1]}, r"prompt\[1\] = 64 is outside the vocabulary \[0, 64\)"),
    ({"prompt": [3, -1]}, r"prompt\[1\] = -1 is outside the vocabulary"),
    ({"prompt": [3, 1.5]}, r"prompt\[1\] must be an integer, got 1.5"),
    ({"prompt": "abc"}, "prompt must be a sequence of token ids"),
    ({"max_tokens": -1}, "max_tokens must be >= 0, got -1"),
    ({"max_tokens": 2.0}, "max_tokens must be an integer"),
]
RUN_ONLY_CASES = [
    ({"k": -2}, "k must be >= 0, got -2"),
    ({"k": True}, "k must be an integer, got True"),
]


@pytest.mark.parametrize(
    ("decode", "kwargs", "message"),
    [("run", *case) for case in SHARED_CASES + RUN_ONLY_CASES]
    + [("greedy", *case) for case in SHARED_CASES],
)
def test_bad_arguments_rejected_before_touching_the_base(decode, kwargs, message):
    """Each bad argument is a ValueError naming the value, raised before the base is touched
    (its committed state and counters are unchanged)."""
    base = ToyBase()
    base.step(7, 0)
    args = {"prompt": PROMPT, "max_tokens": 5, "k": 3} | kwargs
    with pytest.raises(ValueError, match=message):
        if decode == "run":
            onebit.run(base, None, args["prompt"], max_tokens=args["max_tokens"], k=args["k"])
        else:
            onebit.greedy(base, args["prompt"], max_tokens=args["max_tokens"])
    assert (base.committed, base.steps) == ([7], 1)


def test_numpy_integers_are_accepted():
    """Token ids from numpy arrays are ids like any other."""
    result = onebit.run(ToyBase(), None, np.array(PROMPT), max_tokens=np.int64(3), k=np.int32(2))
    assert result.tokens == onebit.greedy(ToyBase(), PROMPT, max_tokens=3).tokens


class OutOfVocabHead:
    """A head that proposes a token past the vocabulary at its third proposal."""

    def __init__(self, oracle, flavour):
        self.inner = perfect_head(oracle, flavour)
        self.calls = 0

    def needs_last_hidden(self):
        return self.inner.needs_last_hidden()

    def propose(self, token, pos, k, hidden):
        self.calls += 1
        drafts = self.inner.propose(token, pos, k, hidden)
        if self.calls == 3:
            drafts[-1] = 999
        return drafts

    def commit_rows(self, tokens, rows, count):
        self.inner.commit_rows(tokens, rows, count)

    def reset(self):
        self.inner.reset()


def consume():
    seen = []
    return seen, lambda t: seen.append(t) or None


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
def test_head_proposing_out_of_vocab_token(flavour):
    """A head's out-of-vocabulary draft is a HeadContractError naming the token, the position
    and the slot; the base has committed exactly what was emitted."""
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, 60)
    base, (seen, on_token) = ToyBase(), consume()
    with pytest.raises(HeadContractError, match=r"head proposed 999 for position \d+ \(slot 3\)"
                       ) as info:
        onebit.run(base, OutOfVocabHead(oracle, flavour), PROMPT, max_tokens=40, k=4,
                   on_token=on_token)
    assert info.value.culprit == "head"
    assert info.value.emitted == seen and seen
    assert base.committed == PROMPT + seen
    # t1 is emitted before a two-pass head drafts, after a one-pass head's batch
    t1_pos = len(PROMPT) + len(seen) - (1 if flavour == "two-pass" else 0)
    assert info.value.pos == t1_pos + 1 + 3


class FaultyBase(ToyBase):
    """A toy base that corrupts its output on the n-th call of one kind (step or verify)."""

    def __init__(self, kind, call, fault, **config):
        super().__init__(**config)
        self.kind, self.call, self.fault = kind, call, fault
        self.seen = 0

    def _maybe(self, kind, logits):
        if kind != self.kind:
            return logits
        self.seen += 1
        if self.seen != self.call:
            return logits
        if self.fault == "nan":  # in the last row only, so the row must be found
            logits = logits.copy()
            logits[(-1, 3) if logits.ndim == 2 else 3] = np.nan
            return logits
        if self.fault == "shape":
            return logits[..., :-1]
        raise RuntimeError(f"device lost during {kind}")

    def step(self, token, pos):
        return self._maybe("step", super().step(token, pos))

    def verify(self, tokens, pos):
        return self._maybe("verify", super().verify(tokens, pos))

    def reset(self):
        super().reset()
        self.seen = 0


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
@pytest.mark.parametrize(
    ("kind", "fault", "error", "message"),
    [
        ("verify", "nan", BaseContractError, r"non-finite logits in row \d, scoring position"),
        ("verify", "shape", BaseContractError, r"returned logits of shape \(\d+, 63\)"),
        ("verify", "raise", RuntimeError, "device lost during verify"),
        ("step", "nan", BaseContractError, r"non-finite logits scoring position \d+"),
        ("step", "shape", BaseContractError, r"logits of shape \(63,\) scoring position"),
    ],
)
def test_base_failing_mid_run(flavour, kind, fault, error, message):
    """A base that returns NaN or misshapen logits, or raises, mid-round: the error names the
    position; what the base committed is exactly what was emitted (a bad batch is dropped,
    a stepped token is emitted before the bad logits are read)."""
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, 60)
    # a one-row base makes the one-pass loop step, so its step faults are reached too
    rows = 8 if kind == "verify" else 1
    base = FaultyBase(kind, 3 if kind == "verify" else 8, fault, max_batch_rows=rows)
    seen, on_token = consume()
    with pytest.raises(error, match=message) as info:
        onebit.run(base, half_head(oracle, flavour), PROMPT, max_tokens=40, k=4,
                   on_token=on_token)
    if isinstance(info.value, ContractError):
        assert info.value.emitted == seen
        assert info.value.culprit == "base"
        _, pos, rows = base.calls[-1]  # the faulty pass; row i scores position pos + i + 1
        scored = pos + rows if fault == "nan" else pos + 1
        assert info.value.pos == (scored if fault == "nan" or kind == "step" else pos)
        if fault == "nan":
            assert f"scoring position {scored}" in str(info.value)
        if kind == "verify" and fault == "nan":
            assert f"row {rows - 1}," in str(info.value)
    if fault == "raise":
        base.commit_verify(0)  # the loop could not; a real base drops the batch itself
    assert base.committed == PROMPT + seen
    assert len(seen) > 0


def test_greedy_reports_bad_logits_with_position():
    """greedy() holds the base to the same logits contract, naming the position."""
    base = FaultyBase("step", 9, "nan")
    with pytest.raises(BaseContractError, match="scoring position 9") as info:
        onebit.greedy(base, PROMPT, max_tokens=20)
    assert base.committed == PROMPT + info.value.emitted


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
def test_consumer_raising_keeps_committed_equal_emitted(flavour):
    """If on_token raises inside a round, the token it was handed counts as emitted and is
    committed, and nothing after it is."""
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, 60)
    base, seen = ToyBase(), []

    def on_token(t):
        seen.append(t)
        if len(seen) == 10:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        onebit.run(base, perfect_head(oracle, flavour), PROMPT, max_tokens=40, k=7,
                   on_token=on_token)
    assert base.committed == PROMPT + seen


def test_head_raising_in_propose_keeps_state():
    """A head that raises while drafting leaves the base with exactly what was emitted."""
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, 60)
    head = perfect_head(oracle)
    calls = []

    def propose(token, pos, k, hidden):
        calls.append(pos)
        if len(calls) == 3:
            raise RuntimeError("draft model crashed")
        return perfect_head(oracle).propose(token, pos, k, hidden)

    head.propose = propose
    base, (seen, on_token) = ToyBase(), consume()
    with pytest.raises(RuntimeError, match="draft model crashed"):
        onebit.run(base, head, PROMPT, max_tokens=40, k=7, on_token=on_token)
    assert base.committed == PROMPT + seen and len(seen) == 16


def test_zero_row_base_is_a_contract_error():
    """max_batch_rows() below 1 is the base's contract error, reported before decoding."""

    class ZeroRows(ToyBase):
        def max_batch_rows(self):
            return 0

    with pytest.raises(BaseContractError, match=r"max_batch_rows\(\) is 0"):
        onebit.run(ZeroRows(), None, PROMPT, max_tokens=3, k=2)


def test_bad_logits_after_prefill_name_the_first_decode_position():
    """Bad logits from the last prompt token (the last row of the prefill batch) are reported
    at position P, the first token the run would choose, with nothing emitted, and the bad
    batch is not committed."""
    base = FaultyBase("verify", 1, "nan")
    with pytest.raises(BaseContractError, match=f"scoring position {len(PROMPT)}$") as info:
        onebit.run(base, None, PROMPT, max_tokens=5, k=2)
    assert (info.value.pos, info.value.emitted) == (len(PROMPT), [])
    assert base.committed == []


def test_exact_messages():
    """The messages read exactly as documented (no stray text around them)."""
    with pytest.raises(ValueError) as info:
        onebit.run(ToyBase(), None, [], max_tokens=1, k=1)
    assert str(info.value) == "prompt is empty: a decode needs at least one prompt token"
    with pytest.raises(ValueError) as info:
        onebit.greedy(ToyBase(), "hello", max_tokens=1)
    assert str(info.value) == "prompt must be a sequence of token ids, got str"


class FixedDraftHead:
    """A one-pass head that always proposes the same drafts, whatever it is asked."""

    def __init__(self, drafts):
        self.drafts = drafts

    def needs_last_hidden(self):
        return False

    def propose(self, token, pos, k, hidden):
        return list(self.drafts)

    def commit_rows(self, tokens, rows, count):
        pass

    def reset(self):
        pass


@pytest.mark.parametrize("draft", [64, -1, 1.5, "7", None])
def test_head_drafts_that_are_not_vocabulary_ids(draft):
    """A draft equal to the vocabulary size, negative, or not an integer at all is the head's
    contract error, naming the draft and its position; nothing is committed for the round."""
    base = ToyBase()
    with pytest.raises(HeadContractError) as info:
        onebit.run(base, FixedDraftHead([5, draft]), PROMPT, max_tokens=8, k=4)
    assert str(info.value) == (f"head proposed {draft!r} for position {len(PROMPT) + 2} "
                               "(slot 1), outside the vocabulary [0, 64)")
    assert info.value.pos == len(PROMPT) + 2
    assert base.committed == PROMPT


class ShortRowsBase(ToyBase):
    """A base whose last_hidden_rows() breaks its contract: too few rows, or one flat row."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def last_hidden_rows(self):
        rows = super().last_hidden_rows()
        return rows[:0] if self.kind == "short" else rows.reshape(-1)


@pytest.mark.parametrize("kind", ["short", "flat"])
def test_base_with_too_few_hidden_rows(kind):
    """A base whose last_hidden_rows() cannot cover the committed rows is named, with the
    shape it returned; what it committed still equals what was emitted."""
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, 30)
    base, (seen, on_token) = ShortRowsBase(kind), consume()
    with pytest.raises(BaseContractError, match=r"base.last_hidden_rows\(\) has shape \([\d, ]*\)"
                       r" after committing \d rows; it must have at least \d rows"):
        onebit.run(base, perfect_head(oracle), PROMPT, max_tokens=20, k=3, on_token=on_token)
    assert base.committed == PROMPT + seen


def test_narrow_hidden_rows_are_fine():
    """A base whose hidden rows are narrower than the batch is still a legal base (the row
    count, not the width, is what must cover the committed rows)."""
    oracle = Oracle.from_greedy(ToyBase(hidden=2), PROMPT, 40)
    result = onebit.run(ToyBase(hidden=2), perfect_head(oracle), PROMPT, max_tokens=24, k=7)
    assert result.tokens == list(oracle.tokens[:24])


def test_greedy_stats_and_stop():
    """greedy() counts like a loop that only steps: N steps, N rounds, N emitted, P prefill;
    a consumer stop sets `stopped` and ends right after that token."""
    result = onebit.greedy(ToyBase(), PROMPT, max_tokens=12)
    s = result.stats
    assert (s.steps, s.rounds, s.emitted, s.batches, s.prefill_steps) == (12, 12, 12, 0, 5)
    assert result.stopped is False
    stopped = onebit.greedy(ToyBase(), PROMPT, max_tokens=12, on_token=lambda t: False)
    assert stopped.stopped is True and len(stopped.tokens) == 1


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
def test_a_part_raising_is_a_part_error_with_culprit_position_and_emitted(flavour):
    """A base whose verify raises mid-run: a PartError whose message names the call and the
    original, culprit "base", pos the next position the run would emit (prompt + emitted),
    emitted what the consumer saw, and the original as __cause__."""
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, 60)
    base = FaultyBase("verify", 3, "raise")
    seen, on_token = consume()
    with pytest.raises(PartError) as info:
        onebit.run(base, half_head(oracle, flavour), PROMPT, max_tokens=40, k=4,
                   on_token=on_token)
    error = info.value
    assert str(error) == "base.verify() raised RuntimeError: device lost during verify"
    assert (error.culprit, error.pos, error.emitted) == ("base", len(PROMPT) + len(seen), seen)
    assert isinstance(error.__cause__, RuntimeError) and seen


# The reference and the loop settle a stop each with their own code (they share none), so each
# is held on its own: a plain decode through `run` goes through the loop's `_settled`.
DECODERS = {
    "greedy": lambda base, max_tokens, on_token: onebit.greedy(
        base, PROMPT, max_tokens=max_tokens, on_token=on_token),
    "run": lambda base, max_tokens, on_token: onebit.run(
        base, None, PROMPT, max_tokens=max_tokens, k=1, on_token=on_token),
}


@pytest.mark.parametrize("decode", sorted(DECODERS))
def test_an_interrupt_keeps_its_type_and_carries_what_was_emitted(decode):
    """A KeyboardInterrupt from the consumer is not wrapped; it gets .emitted, a copy of the
    tokens emitted (the one it interrupted included), from the reference and the loop alike."""
    seen = []

    def on_token(token):
        seen.append(token)
        if len(seen) == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        DECODERS[decode](ToyBase(), 20, on_token)
    assert info.value.emitted == seen and len(seen) == 6


@pytest.mark.parametrize("decode", sorted(DECODERS))
def test_an_exception_that_takes_no_attributes_passes_through_unchanged(decode):
    """A BaseException whose `emitted` cannot be set (a read-only property) is re-raised as it
    is: neither the reference nor the loop replaces it with an AttributeError of its own."""

    class Halt(BaseException):
        emitted = property(lambda self: "its own")

    def on_token(token):
        raise Halt

    with pytest.raises(Halt) as info:
        DECODERS[decode](ToyBase(), 5, on_token)
    assert info.value.emitted == "its own"


def test_a_fault_of_the_loop_itself_is_a_part_error_blaming_the_loop():
    """What the loop raises of its own (not a DecodeError) is settled as a PartError: culprit
    "loop", the type and message of the original, the position, and a copy of emitted."""
    from onebit.loop import _settled

    emitted = [7, 8]
    settled = _settled(ValueError("bad row"), emitted, 9)
    assert isinstance(settled, PartError)
    assert str(settled) == "the loop raised ValueError: bad row"
    assert (settled.culprit, settled.pos, settled.emitted) == ("loop", 9, [7, 8])
    assert settled.emitted is not emitted
    own = BaseContractError("scores", pos=4)
    assert _settled(own, emitted, 9) is own and (own.pos, own.emitted) == (4, [7, 8])


@pytest.mark.parametrize(("answer", "shown"), [
    (7, "int 7"),
    (np.arange(40).reshape(4, 10),
     "ndarray array([[ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [10, 11, 12, 13, ..."),
    ("a" * 58, "str '" + "a" * 58 + "'"),  # a repr of 60 characters is shown whole
    ("a" * 59, "str '" + "a" * 56 + "..."),  # 61 are cut to 57 and "..."
])
def test_a_head_answer_that_is_no_list_is_shown_on_one_short_line(answer, shown):
    """A head whose propose returns an int, a 2-D array or a string: HeadContractError showing
    the value on one line, cut when longer than 60 characters, and the position it was
    drafting for."""

    class Answers:
        def needs_last_hidden(self):
            return False

        def reset(self):
            pass

        def propose(self, token, pos, k, hidden):
            return answer

        def commit_rows(self, tokens, rows, count):
            pass

    with pytest.raises(HeadContractError) as info:
        onebit.run(ToyBase(), Answers(), PROMPT, max_tokens=5, k=3)
    assert str(info.value) == (f"head.propose returned {shown} for position {len(PROMPT) + 1};"
                               " expected a list of token ids")
