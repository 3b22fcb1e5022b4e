"""`onebit.grammar` through `ProcessedBase`: the grammar as one more knob, held to the same
N-checks as the others. N1: every row's mask is the set of tokens a fresh matcher allows after
that row's own prefix (computed apart, by Python's `re` on the prefix's text); N2: the
processed base keeps B1..B8; N3: a verify whose drafts are rejected leaves the matcher where
the committed text left it. Also: SmolLM2's greedy JSON under a schema, the same with and
without speculation, parses and conforms; bad grammars are refused by name."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onebit.grammar import Grammar, GrammarError
from onebit.processors import MASKED, ProcessedBase, Processors
from pytest_onebit import check_base
from pytest_onebit.doubles.knobs import GRAMMARS, grammar_knobs, toy_tokenizer
from pytest_onebit.doubles.toy import ToyBase

pytest.importorskip("llguidance")
VOCAB = 64
PATTERN = GRAMMARS["grammar"]


def allowed_by_re(text: str) -> set[str]:
    """The characters c for which `text + c` can still grow into a whole match of PATTERN,
    found by Python's own regex engine (apart from llguidance): `text + c` is a prefix of a
    match when some completion of at most 3 more characters matches whole."""
    tok = toy_tokenizer(VOCAB)
    out = set()
    for c in tok.chars:
        head = text + c
        if any(re.fullmatch(PATTERN, head + tail) for tail in _tails(tok.chars)):
            out.add(c)
    return out


def _tails(chars, most=2):
    yield ""
    # the grammar's units are at most three characters long ("f+g" aside, whose f's repeat):
    # a prefix that can grow into a match can do so within two more characters, or by "g"
    for a in "0bdeg":
        yield a
        for b in "g":
            yield a + b


def test_N2_a_grammar_keeps_the_base_contract():
    """N2: ProcessedBase(toy, grammar) passes B1..B8: a verify row's mask is the one stepping
    gives, and commit_verify(n) leaves the matcher exactly where stepping does."""
    check_base(lambda: ProcessedBase(ToyBase(vocab_size=VOCAB, strict=True),
                                     grammar_knobs("grammar"), 3,
                                     tokenizer=toy_tokenizer(VOCAB)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["0", "7", "ab", "cd", "ce", "fg", "ffg"]), min_size=0,
                max_size=6).map("".join), st.integers(0, 3))
def test_N1_each_row_masks_what_its_own_prefix_forbids(text, drafts):
    """N1: stepping a text the grammar allows and verifying its last `drafts` characters again
    as drafts, every row scores MASKED exactly on the tokens that cannot continue its own
    prefix (by Python's re), and keeps the raw score on the rest."""
    tok = toy_tokenizer(VOCAB)
    ids = [tok.chars.index(c) for c in "x" + text]  # "x": the one-token prompt
    drafts = min(drafts, len(ids) - 1)
    committed, extra = ids[:len(ids) - drafts], ids[len(ids) - drafts:]
    base = ProcessedBase(ToyBase(vocab_size=VOCAB), grammar_knobs("grammar"), 1, tokenizer=tok)
    raw = ToyBase(vocab_size=VOCAB)
    rows, raws = [], []
    for pos, t in enumerate(committed):
        rows.append(base.step(t, pos))
        raws.append(raw.step(t, pos))
    if extra:
        rows += list(base.verify(extra, len(committed)))
        raws += list(raw.verify(extra, len(committed)))
    for i, (row, plain) in enumerate(zip(rows, raws, strict=True)):
        prefix = "".join(tok.chars[t] for t in ids[1:i + 1])
        ok = allowed_by_re(prefix)
        want = np.array([plain[t] if tok.chars[t] in ok else MASKED for t in range(VOCAB)])
        np.testing.assert_array_equal(row, want.astype(row.dtype), err_msg=repr(prefix))


def test_N3_rejected_drafts_leave_the_grammar_where_the_commit_left_it():
    """N3: after a verify of drafts the grammar takes ("a", "b") and one it refuses ("a" then
    "a"), of which only the first is kept, the next step's row is exactly the row of a fresh
    processed base stepped on the kept prefix: the matcher was rolled back past every draft."""
    tok = toy_tokenizer(VOCAB)
    a, b, zero = (tok.chars.index(c) for c in "ab0")
    base = ProcessedBase(ToyBase(vocab_size=VOCAB), grammar_knobs("grammar"), 1, tokenizer=tok)
    base.step(zero, 0)
    base.step(zero, 1)
    rows = base.verify([a, b, a, a], 2)
    assert (rows[3] == MASKED).all()  # after "a a": refused, so never read
    base.commit_verify(1)  # "a" kept: now only "b" may follow
    fresh = ProcessedBase(ToyBase(vocab_size=VOCAB), grammar_knobs("grammar"), 1,
                          tokenizer=tok)
    for pos, t in enumerate([zero, zero, a]):
        fresh.step(t, pos)
    got, want = base.step(b, 3), fresh.step(b, 3)
    np.testing.assert_array_equal(got, want)
    assert (got != MASKED).sum() > 1


@pytest.mark.parametrize("make, field", [
    (lambda: Grammar.regex("(unclosed"), "regex"),
    (lambda: Grammar.json_schema({"type": "nonsense-type"}), "json_schema"),
    (lambda: Grammar.json_schema(["not", "an", "object"]), "json_schema"),
    (lambda: Grammar.lark("start: ("), "grammar"),
    (lambda: Grammar.regex("a" * 300_000), "regex"),
])
def test_bad_grammars_are_refused_by_name(make, field):
    """A grammar llguidance cannot compile, a schema that is not an object, or a source past
    the size bound is a GrammarError (a ValueError) naming the field, before any pass."""
    with pytest.raises(GrammarError) as caught:
        make()
    assert caught.value.field == field


def test_a_grammar_on_a_base_without_a_tokenizer_is_refused():
    """A grammar needs to know what the tokens spell: a base with no tokenizer, and none
    given, is refused naming the grammar."""
    from onebit.processors import ProcessorError

    with pytest.raises(ProcessorError, match="tokenizer"):
        ProcessedBase(ToyBase(), Processors(grammar=Grammar.regex("[0-9]*")), 1)


SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 20},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 20},
                "maxItems": 3}},
    "required": ["name", "age", "hobbies"], "additionalProperties": False}


@pytest.mark.slow
def test_smollm2_answers_inside_a_schema_the_same_with_and_without_speculation():
    """SmolLM2 asked for a person as JSON under a schema: the greedy answer parses, conforms
    to the schema (jsonschema), ends because the JSON is complete, and is token for token the
    same with prompt lookup (k 4) and with the default head as without a head."""
    import jsonschema

    import onebit
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model

    model = load_text_model(skip_unless_cached("smollm2"), kernel="int8")
    knobs = Processors(grammar=Grammar.json_schema(SCHEMA))
    prompt = "Describe a made-up person as JSON with a name, an age and some hobbies."
    runs = {head: onebit.generate(model, prompt, max_tokens=120, head=head, k=k,
                                  processors=knobs)
            for head, k in (("none", None), ("ngram", 4), ("auto", None))}
    plain = runs["none"]
    value = json.loads(plain.text)
    jsonschema.validate(value, SCHEMA)
    assert plain.stopped_on is not None  # the grammar ended it, not the budget
    for head, run in runs.items():
        assert run.result.tokens == plain.result.tokens, head


def test_reads_tells_a_beginning_inside_the_grammar_from_text_outside_it():
    """`Grammar.reads(text)`, the grammar walked byte by byte: a whole conforming answer is
    inside and complete, the same answer cut anywhere is inside and not complete (llama-server
    spaces its keys on lines of their own), prose or a key the schema does not have is outside
    from where it leaves; a non-string is a GrammarError naming it."""
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16}},
              "required": ["city"], "additionalProperties": False}
    grammar = Grammar.json_schema(schema)
    whole = '{\n    "city": "Santabaracia"\n}'
    assert grammar.reads(whole) == (True, True)
    for cut in range(1, len(whole)):
        assert grammar.reads(whole[:cut]) == (True, False), whole[:cut]
    assert grammar.reads("Sure! Here it is:") == (False, False)
    assert grammar.reads('{"town": "Rome"}') == (False, False)
    assert grammar.reads('{"city": "a name much longer than sixteen"}')[0] is False
    with pytest.raises(GrammarError, match="text must be a string"):
        grammar.reads(b"{}")
