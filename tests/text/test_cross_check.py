"""onebit's tokenizer against the peers' on the same GGUF, string by string, exactly.

The corpus (tests/text/data/tokenizer_corpus.jsonl, one JSON string per line) holds code,
whitespace runs, digits, accents, CJK, emoji and ZWJ sequences, right-to-left scripts and
special-token text. The peer is transformers' GGUF tokenizer (`AutoTokenizer.from_pretrained(
dir, gguf_file=name)`); llama.cpp's is the second arm when `llama_cpp` is importable.
"""

import json
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
    for probe in ["def ", "        ", "12345", "é", "日本", "한", "👍🏽", "\u200d", "ש", "م",
                  "<|im_start|>", "<|endoftext|>"]:
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


def test_smollm2_against_transformers(smollm2_path, smollm2_tokenizer):
    """Every corpus string encodes to the same ids (BOS, special tokens and all) and decodes
    to the same text, with and without the special tokens, as transformers' tokenizer built
    from SmolLM2's GGUF."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    peer = transformers.AutoTokenizer.from_pretrained(str(smollm2_path.parent),
                                                      gguf_file=smollm2_path.name)
    assert _first_mismatch(smollm2_tokenizer, peer, corpus()) is None
    assert (peer.bos_token_id, peer.eos_token_id) == (smollm2_tokenizer.bos_token_id,
                                                      smollm2_tokenizer.eos_token_id)


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


def test_sentencepiece_against_transformers(tmp_path, spm_metadata, gguf_metadata):
    """A SentencePiece vocabulary (scores, byte pieces, no merges) written to a GGUF and read
    back by both: the same ids and text on the whole corpus (most characters fall back to
    bytes here, which exercises the fallback and the leading-space rule)."""
    transformers = pytest.importorskip("transformers")
    _write_gguf(tmp_path / "spm.gguf", spm_metadata())
    ours = Tokenizer.from_gguf_metadata(gguf_metadata(tmp_path / "spm.gguf"))
    peer = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="spm.gguf")
    assert _first_mismatch(ours, peer, corpus()) is None


# Where llama.cpp's tokenizer is known to part from the one SmolLM2 was trained with (the
# HuggingFace pre-tokenizer sequence Digits(individual_digits) then ByteLevel, which onebit and
# transformers both follow): llama.cpp runs one regex for the whole sequence. Declared here with
# the upstream thread as the reason, never loosened: any other string must match exactly, and
# a declared string that starts matching fails the test (the declaration is stale).
_DIGITS = ("llama.cpp #7328 (where this was found for the same Digits pre-tokenizer): its "
           "smollm split isolates every \\p{N} character, where the HuggingFace Digits "
           "pre-tokenizer isolates ASCII digits only")
LLAMA_CPP_DIVERGES = {
    " \u0663\u0664\u0665": _DIGITS,  # Arabic-Indic digits
    "\u00bd \u00be \u2153": _DIGITS,  # vulgar fractions (Unicode No)
    "|\U0001f91d4  \n 1tre1\U0001f469e\u039d _ \u534a": (
        "llama.cpp #7328 (the same emulation): its one regex groups the whitespace before a "
        "digit with what follows, where HuggingFace's ByteLevel regex runs on the pieces the "
        "digit split left"),
}


def test_smollm2_against_llama_cpp(smollm2_path, smollm2_tokenizer):
    """The same corpus through llama.cpp's own tokenizer (the `bench` extra): ids exactly for
    every string but the declared divergences, and each declared one still diverges."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama_cpp is not installed (the "
                                    "`bench` extra builds it); the llama.cpp arm needs it")
    llm = llama_cpp.Llama(model_path=str(smollm2_path), vocab_only=True, verbose=False)
    texts = corpus()
    assert set(LLAMA_CPP_DIVERGES) <= set(texts)
    for text in texts:
        theirs = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        ours = smollm2_tokenizer.encode(text, add_special_tokens=False)
        if text in LLAMA_CPP_DIVERGES:
            assert ours != theirs, f"stale declaration, now equal: {text!r}"
        else:
            assert ours == theirs, text
