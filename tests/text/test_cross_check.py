"""onebit's tokenizer against the peers' on the same GGUF, string by string, exactly.

The corpus (tests/text/data/tokenizer_corpus.jsonl, one JSON string per line) holds code,
whitespace runs, digits, accents, CJK, emoji and ZWJ sequences, right-to-left scripts and
special-token text. For a GGUF file the reference is llama.cpp, whose ids onebit gives on every
string (here on SmolLM2's own file when `llama_cpp` is importable; test_golden_ids.py on
nineteen vocabularies without it). transformers' GGUF tokenizer is the second peer: where it
parts from llama.cpp, the difference is declared below with its cause, exactly (a declared
string that starts agreeing fails, and so does any other string that differs).
"""

import json
import re
from pathlib import Path

import pytest

from onebit.text import Tokenizer

CORPUS = Path(__file__).parent / "data" / "tokenizer_corpus.jsonl"


def corpus() -> list[str]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]


def test_corpus_covers_what_it_claims():
    """The corpus has at least 300 strings and each category the issue names."""
    texts = corpus()
    assert len(texts) >= 300 and len(set(texts)) == len(texts)
    joined = "".join(texts)
    for probe in ["def ", "        ", "3141592653589793", "é", "日本", "한", "👍🏽", "\u200d",
                  "ש", "م", "\u0939\u093f", "Việt", "<|im_start|>", "<|endoftext|>"]:
        assert probe in joined, probe


def _first_mismatch(ours: Tokenizer, peer, texts):
    for text in texts:
        a, b = ours.encode(text), peer.encode(text)
        if a != b:
            return f"encode({text!r}): onebit {a} != peer {b}"
        if ours.decode(a) != peer.decode(b):
            return f"decode of {text!r}: onebit {ours.decode(a)!r} != peer {peer.decode(b)!r}"
        if ours.decode(a, skip_special_tokens=True) != peer.decode(b, skip_special_tokens=True):
            return f"decode(skip_special_tokens) of {text!r} differs"
    return None


# Where transformers' GGUF tokenizer for SmolLM2 parts from llama.cpp's (which onebit follows
# for a GGUF file): transformers applies the HuggingFace pre-tokenizer sequence SmolLM2 was
# trained with, Digits(individual_digits) then ByteLevel, where llama.cpp's "smollm" runs one
# expression pass per step over the whole text.
_DIGITS = ("llama.cpp #7328 (where this was found for the same Digits pre-tokenizer): its "
           "smollm split isolates every \\p{N} character, where the HuggingFace Digits "
           "pre-tokenizer isolates ASCII digits only")
SMOLLM2_TRANSFORMERS_DIFFERS = {
    " \u0663\u0664\u0665": _DIGITS,  # Arabic-Indic digits
    "\u00bd \u00be \u2153": _DIGITS,  # vulgar fractions (Unicode No)
    "1234abc 12345678x \u0661\u0662\u0663\u0664\u0665 \u00bd\u00bd\u00bd\u00bd": _DIGITS,
    # Roman numerals (Unicode Nl)
    "\u216b \u217b \u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341 "
    "\u0391\u0392\u0393 \u03b1\u03b2\u03b3 \u01c5emal": _DIGITS,
    "|\U0001f91d4  \n 1tre1\U0001f469e\u039d _ \u534a": (
        "llama.cpp #7328 (the same emulation): its expressions group the whitespace before a "
        "digit with what follows, where HuggingFace's ByteLevel regex runs on the pieces the "
        "digit split left"),
}


@pytest.mark.slow  # transformers' tokenizer on the corpus (4 s)
def test_smollm2_against_transformers(smollm2_path, smollm2_tokenizer):
    """Every corpus string but the declared ones encodes to the same ids (BOS, special tokens
    and all) and decodes to the same text, with and without the special tokens, as
    transformers' tokenizer built from SmolLM2's GGUF; each declared one still differs."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    peer = transformers.AutoTokenizer.from_pretrained(str(smollm2_path.parent),
                                                      gguf_file=smollm2_path.name)
    texts = corpus()
    assert set(SMOLLM2_TRANSFORMERS_DIFFERS) <= set(texts)
    assert _first_mismatch(smollm2_tokenizer, peer,
                           [t for t in texts if t not in SMOLLM2_TRANSFORMERS_DIFFERS]) is None
    for text in SMOLLM2_TRANSFORMERS_DIFFERS:
        assert smollm2_tokenizer.encode(text) != peer.encode(text), f"stale: {text!r}"
    assert (peer.bos_token_id, peer.eos_token_id) == (smollm2_tokenizer.bos_token_id,
                                                      smollm2_tokenizer.eos_token_id)


@pytest.mark.slow  # transformers' tokenizer on the corpus (4 s)
def test_corpus_tells_a_wrong_split(smollm2_path, smollm2_metadata):
    """The cross-check can fail: SmolLM2's vocabulary cut by Llama 3's split instead of its
    own disagrees with transformers on some corpus string (digit runs, whitespace)."""
    transformers = pytest.importorskip("transformers")
    peer = transformers.AutoTokenizer.from_pretrained(str(smollm2_path.parent),
                                                      gguf_file=smollm2_path.name)
    wrong = Tokenizer.from_gguf_metadata({**smollm2_metadata, "tokenizer.ggml.pre": "llama3"})
    assert _first_mismatch(wrong, peer, corpus()) is not None


def _write_gguf(path: Path, metadata: dict) -> None:
    """A GGUF holding only tokenizer metadata (and the llama fields a config reader wants)."""
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(64)
    writer.add_embedding_length(8)
    writer.add_block_count(1)
    writer.add_feed_forward_length(16)
    writer.add_head_count(1)
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model(metadata["tokenizer.ggml.model"])
    writer.add_token_list(metadata["tokenizer.ggml.tokens"])
    writer.add_token_scores(metadata["tokenizer.ggml.scores"])
    writer.add_token_types(metadata["tokenizer.ggml.token_type"])
    writer.add_bos_token_id(metadata["tokenizer.ggml.bos_token_id"])
    writer.add_eos_token_id(metadata["tokenizer.ggml.eos_token_id"])
    writer.add_unk_token_id(metadata["tokenizer.ggml.unknown_token_id"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _space_after_a_cut(text: str) -> bool:
    """A stretch of text that opens the input or follows a special token starts with a space."""
    return any(part.startswith(" ") for part in ["", *re.split(r"<s>|</s>|<unk>", text)][1:]
               if part)


def test_sentencepiece_against_llama_cpp_and_transformers(tmp_path, spm_metadata,
                                                          gguf_metadata):
    """A SentencePiece vocabulary (scores, byte pieces, no merges) written to a GGUF: onebit
    gives llama.cpp's ids on the whole corpus (when llama_cpp is importable), and
    transformers' on exactly the strings where no stretch of text starts with a space: there
    llama.cpp (and onebit) put "▁" in front as everywhere else ("▁▁" for " "), while
    transformers' Metaspace with prepend_scheme "first" does not (its GGUF converter; the
    issue's `' '` gives `[29871]` there and `[259]` in llama.cpp on Llama 2's vocabulary)."""
    transformers = pytest.importorskip("transformers")
    _write_gguf(tmp_path / "spm.gguf", spm_metadata())
    ours = Tokenizer.from_gguf_metadata(gguf_metadata(tmp_path / "spm.gguf"))
    texts = corpus()
    try:
        import llama_cpp
    except ImportError:
        pass
    else:
        llm = llama_cpp.Llama(model_path=str(tmp_path / "spm.gguf"), vocab_only=True,
                              verbose=False)
        for text in texts:
            assert ours.encode(text) == llm.tokenize(text.encode(), add_bos=True,
                                                     special=True), text
    peer = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="spm.gguf")
    differs = {text for text in texts if ours.encode(text) != peer.encode(text)}
    assert differs == {text for text in texts if _space_after_a_cut(text)}
    assert _first_mismatch(ours, peer, [t for t in texts if t not in differs]) is None


def test_smollm2_against_llama_cpp(smollm2_path, smollm2_tokenizer):
    """The same corpus through llama.cpp's own tokenizer on SmolLM2's file (the `bench`
    extra), plain and with specials: the same ids for every string."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama_cpp is not installed (the "
                                    "`bench` extra builds it); the llama.cpp arm needs it")
    llm = llama_cpp.Llama(model_path=str(smollm2_path), vocab_only=True, verbose=False)
    for text in corpus():
        for on in (False, True):
            theirs = llm.tokenize(text.encode("utf-8"), add_bos=on, special=on)
            assert smollm2_tokenizer.encode(text, add_special_tokens=on,
                                            parse_special=on) == theirs, (text, on)
