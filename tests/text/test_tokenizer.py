"""The tokenizer built from GGUF metadata: ids, special tokens, BOS/EOS, and refusals."""

import pytest

from onebit.text import Tokenizer, TokenizerError


def test_smollm2_round_trip_and_specials(smollm2_tokenizer):
    """SmolLM2's ids for a chat line are the ones its vocabulary fixes (`<|im_start|>` is 1,
    `<|im_end|>` 2, as the file's token list says), special-token text in the input is parsed as
    the special token, no BOS is added (the file says add_bos_token false), and decode returns
    the text; skip_special_tokens drops exactly the specials."""
    tok = smollm2_tokenizer
    ids = tok.encode("<|im_start|>user\nhi<|im_end|>")
    assert ids == [1, 4093, 198, 6004, 2]
    assert tok.encode("hi", add_special_tokens=True) == tok.encode("hi", add_special_tokens=False)
    assert tok.decode(ids) == "<|im_start|>user\nhi<|im_end|>"
    assert tok.decode(ids, skip_special_tokens=True) == "user\nhi"
    assert (tok.bos_token_id, tok.eos_token_id, tok.bos_token) == (1, 2, "<|im_start|>")
    assert tok.stop_ids == {2}
    assert tok.vocab_size == 49152


def test_spm_recovers_merges_and_adds_bos(spm_metadata):
    """A SentencePiece vocabulary with scores but no merges: "hello" becomes the single best
    piece "▁hello" (the merges were recovered from the scores), BOS is added by default as
    llama.cpp does for this model, a character outside the vocabulary falls back to its UTF-8
    byte pieces, and decode strips the space SentencePiece put in front."""
    tok = Tokenizer.from_gguf_metadata(spm_metadata())
    hello = tok.token_to_id("\u2581hello")
    assert tok.encode("hello") == [1, hello]
    ids = tok.encode("hello é", add_special_tokens=False)
    assert ids[0] == hello
    assert ids[-2:] == [3 + 0xC3, 3 + 0xA9]          # é is C3 A9, as <0xC3> <0xA9>
    assert tok.decode(ids) == "hello é"
    assert tok.decode([1, *ids], skip_special_tokens=True) == "hello é"
    no_bos = Tokenizer.from_gguf_metadata(spm_metadata(**{"tokenizer.ggml.add_bos_token": False}))
    assert no_bos.encode("hello") == [hello]


def test_user_defined_tokens_match_whole(spm_metadata):
    """A USER_DEFINED token (type 4, like `<think>`) is matched whole in the text but is not
    special: skip_special_tokens keeps it."""
    md = spm_metadata()
    md["tokenizer.ggml.tokens"] = [*md["tokenizer.ggml.tokens"], "<think>"]
    md["tokenizer.ggml.token_type"] = [*md["tokenizer.ggml.token_type"], 4]
    md["tokenizer.ggml.scores"] = [*md["tokenizer.ggml.scores"], 0.0]
    tok = Tokenizer.from_gguf_metadata(md)
    think = len(md["tokenizer.ggml.tokens"]) - 1
    ids = tok.encode("<think>abc", add_special_tokens=False)
    assert ids[0] == think
    assert "<think>" in tok.decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("change, named", [
    ({"tokenizer.ggml.model": "wordpiece"}, "tokenizer.ggml.model"),
    ({"tokenizer.ggml.tokens": None}, "tokenizer.ggml.tokens"),
    ({"tokenizer.ggml.tokens": []}, "tokenizer.ggml.tokens"),
    ({"tokenizer.ggml.tokens": ["a", 3]}, "tokenizer.ggml.tokens[1]"),
    ({"tokenizer.ggml.scores": [0.0]}, "tokenizer.ggml.scores"),
    ({"tokenizer.ggml.token_type": [1, 2]}, "tokenizer.ggml.token_type"),
    ({"tokenizer.ggml.eos_token_id": 10**6}, "tokenizer.ggml.eos_token_id"),
    ({"tokenizer.ggml.bos_token_id": "1"}, "tokenizer.ggml.bos_token_id"),
    ({"tokenizer.ggml.add_bos_token": 1}, "tokenizer.ggml.add_bos_token"),
])
def test_bad_metadata_is_refused_by_key(spm_metadata, change, named):
    """Missing or malformed tokenizer metadata is a TokenizerError naming the key, never an
    IndexError or a tokenizer built on garbage."""
    md = spm_metadata(**change)
    md = {k: v for k, v in md.items() if v is not None}
    with pytest.raises(TokenizerError, match=named.replace("[", r"\[").replace("]", r"\]")):
        Tokenizer.from_gguf_metadata(md)


def test_bpe_refusals():
    """A byte-level vocabulary with an unknown pre-tokenizer name, or a merge naming a token the
    vocabulary lacks, is refused by name (a guessed split would give other ids silently)."""
    md = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b", "ab"],
          "tokenizer.ggml.merges": ["a b"], "tokenizer.ggml.pre": "mystery"}
    with pytest.raises(TokenizerError, match="'mystery'"):
        Tokenizer.from_gguf_metadata(md)
    md.update({"tokenizer.ggml.pre": "gpt-2", "tokenizer.ggml.merges": ["a c"]})
    with pytest.raises(TokenizerError, match=r"merges\[0\]"):
        Tokenizer.from_gguf_metadata(md)
    md.update({"tokenizer.ggml.merges": ["a b"]})
    assert Tokenizer.from_gguf_metadata(md).encode("ab") == [2]


def test_from_file_round_trip(smollm2_tokenizer, tmp_path):
    """`from_file` on a tokenizer.json (here SmolLM2's pipeline saved by the library) with a
    tokenizer_config for BOS/EOS gives the same ids and text as the GGUF-built tokenizer."""
    path = tmp_path / "tokenizer.json"
    smollm2_tokenizer.save_json(path)
    tok = Tokenizer.from_file(path, config={"bos_token": "<|im_start|>",
                                            "eos_token": {"content": "<|im_end|>"}})
    text = "<|im_start|>user\nCafé ☕ 123<|im_end|>"
    assert tok.encode(text) == smollm2_tokenizer.encode(text)
    assert tok.decode(tok.encode(text)) == text
    assert (tok.bos_token_id, tok.eos_token_id) == (1, 2)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(TokenizerError, match="bad.json"):
        Tokenizer.from_file(bad)
