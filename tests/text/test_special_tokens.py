"""The first pass of a GGUF tokenizer: special tokens cut out of text as llama.cpp cuts them,
and what a file may not hold. Small vocabularies made in code, each rule on its own."""

import pytest

from onebit.text import Tokenizer, TokenizerError
from onebit.text.metadata import read_vocab
from onebit.text.special import (
    ATTR_CONTROL,
    ATTR_NORMAL,
    ATTR_USER_DEFINED,
    SpecialToken,
    partition,
    token_attributes,
)


def test_longer_tokens_are_cut_first_wherever_they_are():
    """llama.cpp looks for each special token in turn, the longest first, over the whole text:
    in "xab" with "ab" (longer, found first) and "x" the cut is x | ab, and in "abc" with
    "abc" and "ab" the longer wins although both start at the same place; in "xabc" with
    "abc" and "xa", "abc" is cut first and "xa" is never found (an alternation scanning left
    to right would take "xa")."""
    ab, x = SpecialToken(1, "ab", False), SpecialToken(2, "x", False)
    assert partition("xab", [ab, x], True) == [2, 1]
    abc = SpecialToken(3, "abc", False)
    assert partition("abcab", [abc, ab], True) == [3, 1]
    xa = SpecialToken(4, "xa", False)
    assert partition("xabc", [abc, xa], True) == ["x", 3]
    assert partition("zabz", [ab], True) == ["z", 1, "z"]


def test_parse_special_off_keeps_control_text_but_cuts_user_defined():
    """With parse_special off a CONTROL token's text stays text (a user typing
    `<|im_start|>` does not open a turn), while a USER_DEFINED one (`<think>`) is still cut."""
    control, user = SpecialToken(5, "<|c|>", False), SpecialToken(6, "<think>", True)
    assert partition("a<|c|>b<think>", [control, user], False) == ["a<|c|>b", 6]
    assert partition("a<|c|>b<think>", [control, user], True) == ["a", 5, "b", 6]


def test_strip_flags_eat_c_whitespace_beside_the_token():
    """An LSTRIP token eats the whitespace before it and an RSTRIP one the whitespace after
    it, C's isspace (space, tab, newlines, vertical tab, form feed), not a no-break space."""
    mask = SpecialToken(7, "<mask>", False, lstrip=True)
    assert partition("a \t<mask> b", [mask], True) == ["a", 7, " b"]
    end = SpecialToken(8, "<|end|>", False, rstrip=True)
    assert partition("x<|end|>\n\n y", [end], True) == ["x", 8, "y"]
    assert partition("x<|end|>\u00a0y", [end], True) == ["x", 8, "\u00a0y"]


def _vocab(tokens, types, **extra):
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
            "tokenizer.ggml.merges": [], **extra}


def test_text_rules_make_control_tokens_of_turn_ends():
    """A turn-end text typed NORMAL in the file (`<|endoftext|>`, `</s>`) is a control token,
    as llama.cpp makes it; gpt-oss's channel marker stays text the model writes; and Gemma
    4's normal word `</s>` stays normal."""
    spec = read_vocab(_vocab(["a", "<|endoftext|>", "</s>", "<|channel|>"], [1, 1, 1, 3]))
    attrs = token_attributes(spec)
    assert attrs[1] & ATTR_CONTROL and attrs[2] & ATTR_CONTROL
    assert attrs[3] == ATTR_USER_DEFINED
    gemma = read_vocab(_vocab(["a", "</s>", "<|tool_response>"], [1, 1, 3]))
    assert token_attributes(gemma)[1] == ATTR_NORMAL


def test_phi3_tokens_eat_the_space_after_them():
    """A file named Phi-3 gets llama.cpp's rule: its special tokens eat the whitespace after
    them (so "<|user|>\\n hi" cuts as <|user|> then "hi"), except <s>."""
    md = {"general.name": "Phi3", "general.architecture": "llama",
          "tokenizer.ggml.model": "llama",
          "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "<|user|>", "\u2581hi", "\u2581h",
                                    "\u2581", "h", "i"],
          "tokenizer.ggml.token_type": [2, 3, 3, 4, 1, 1, 1, 1, 1],
          "tokenizer.ggml.scores": [0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0]}
    tok = Tokenizer.from_gguf_metadata(md)
    assert tok.encode("<|user|>\n hi", add_special_tokens=False) == [3, 4]
    assert tok.encode("<s> hi", add_special_tokens=False) == [1, 6, 4]     # "▁" "▁hi"
    assert tok.encode("<|user|> hi", add_special_tokens=False) == [3, 4]
    plain = Tokenizer.from_gguf_metadata({**md, "general.name": "Llama"})
    assert plain.encode("<|user|> hi", add_special_tokens=False) == [3, 6, 4]


@pytest.mark.parametrize("change, says", [
    ({"tokenizer.ggml.pre": "mmbert"}, "code of its own|own code"),
    ({"tokenizer.ggml.pre": "gpt2"}, "does not know"),
    ({"tokenizer.ggml.model": "plamo2"}, "tokenizer.ggml.model"),
    ({"tokenizer.ggml.tokens": ["a", "b", "a"]}, "twice, at 0 and 2"),
])
def test_what_is_refused_is_named(change, says):
    """A pre-tokenizer llama.cpp cuts with code of its own, a name llama.cpp does not know
    ("gpt2" is not "gpt-2"), a type onebit does not build and a token list holding a text
    twice (llama.cpp refuses that file too) are TokenizerErrors naming what is wrong."""
    md = _vocab(["a", "b", "ab"], [1, 1, 1], **{"tokenizer.ggml.merges": ["a b"]})
    md.update(change)
    md["tokenizer.ggml.token_type"] = [1] * len(md["tokenizer.ggml.tokens"])
    with pytest.raises(TokenizerError, match=says):
        Tokenizer.from_gguf_metadata(md)


def test_sentencepiece_ties_go_to_the_leftmost_pair(spm_metadata):
    """The SentencePiece pass joins, among pairs whose join scores the same, the leftmost:
    two spaces are "▁▁▁" with the space in front, which becomes "▁▁" "▁", where joining the
    rightmost pair first (a plausible slip, and what a merge list ranked by score can do)
    gives "▁" "▁▁"."""
    tok = Tokenizer.from_gguf_metadata(spm_metadata())
    double, single = tok.token_to_id("\u2581\u2581"), tok.token_to_id("\u2581")
    assert tok.encode("  ", add_special_tokens=False) == [double, single]
    assert tok.encode("   ", add_special_tokens=False) == [double, double]
