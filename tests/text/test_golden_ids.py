"""onebit's tokenizers give llama.cpp's ids, token for token, on every vocabulary type.

The golden ids (data/golden_ids.json.gz) were made by llama.cpp itself through
llama-cpp-python, by data/make_golden_ids.py, on the nineteen vocabulary files of llama.cpp's
corpus (`onebit pull llama.cpp-corpus`): byte-level BPE under eleven pre-tokenizer names and
none, Gemma 4's BPE, SentencePiece BPE (Llama 2, Phi-3, Baichuan), WordPiece (BERT) and
Unigram (T5-style, Nomic BERT MoE). Each string of the corpus (hard Unicode, whitespace runs,
code, digits, special-token text) and each of the vocabulary's own llama.cpp test strings is
checked with add_special and parse_special both off and both on. The test needs the corpus
(it skips with the reason without it) but not llama.cpp.
"""

import gzip
import json
from functools import cache
from pathlib import Path

import pytest

from onebit.text import Tokenizer

DATA = Path(__file__).parent / "data"


@cache
def golden() -> dict:
    with gzip.open(DATA / "golden_ids.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)


def read_metadata(path: Path) -> dict:
    """The file's metadata through onebit's own checked reader (gguf's `contents()` takes
    ten times longer on a 256k vocabulary)."""
    from onebit.gguf.reader import read_metadata as read

    return read(path)[2]


@cache
def tokenizer(models: Path, vocab: str) -> Tokenizer:
    """The vocabulary file's tokenizer, built once for the tests that share it."""
    return Tokenizer.from_gguf_metadata(read_metadata(models / f"ggml-vocab-{vocab}.gguf"))


def mismatches(tok: Tokenizer, texts: list[str], expected: dict) -> list[str]:
    """Every (mode, text) whose ids differ, described with both id lists."""
    found = []
    for mode, on in (("plain", False), ("special", True)):
        for text, ids in zip(texts, expected[mode], strict=True):
            ours = tok.encode(text, add_special_tokens=on, parse_special=on)
            if ours != ids:
                found.append(f"{mode} {text!r}: onebit {ours[:16]} llama.cpp {ids[:16]}")
    return found


def test_golden_ids_are_for_this_corpus():
    """The golden file was made from the corpus as it is now (a changed corpus string needs
    make_golden_ids.py run again), and covers every vocabulary type llama.cpp reads."""
    texts = [json.loads(line) for line in
             (DATA / "tokenizer_corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    assert golden()["corpus"] == texts
    assert len(golden()["vocabs"]) == 19


VOCABS = ["aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm",
          "falcon", "gemma-4", "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt",
          "nomic-bert-moe", "phi-3", "qwen2", "qwen35", "refact", "starcoder"]


#: README line 2 matches one vocabulary of each kind and the commonest BPE ones (about 1 s
#: each); the rest, the two largest (3-5 s each) among them, run in CI's slow step, out of line
#: 2's four minutes. Every pre-tokenizer is still matched in line 2
#: (test_pre_tokenizer_matches_llama_cpp), on GPT-2's vocabulary.
QUICK = ("llama-spm", "llama-bpe", "qwen2", "gpt-2", "phi-3", "bert-bge")
LARGEST = ("command-r", "gemma-4")


@pytest.mark.parametrize("vocab", [v if v in QUICK else pytest.param(v, marks=pytest.mark.slow)
                                   for v in VOCABS])
def test_vocabulary_matches_llama_cpp(vocab, llama_cpp_models):
    """onebit's tokenizer for the vocabulary file gives llama.cpp's ids for every corpus
    string and every one of the file's own test strings, plain and with specials."""
    assert vocab in golden()["vocabs"]
    entry = golden()["vocabs"][vocab]
    tok = tokenizer(llama_cpp_models, vocab)
    bad = mismatches(tok, golden()["corpus"], entry["corpus"])
    bad += mismatches(tok, entry["own"], entry["own_ids"])
    assert not bad, f"{len(bad)} strings differ; first: {bad[:3]}"


@pytest.fixture(scope="module")
def pre_base(llama_cpp_models) -> dict:
    return read_metadata(llama_cpp_models / f"ggml-vocab-{golden()['pre']['base']}.gguf")


@pytest.mark.parametrize("pre", sorted(golden()["pre"]["names"]))
def test_pre_tokenizer_matches_llama_cpp(pre, pre_base):
    """Each pre-tokenizer onebit knows (one name for each distinct behaviour) cuts text as
    llama.cpp cuts it: GPT-2's vocabulary under that name gives llama.cpp's ids."""
    tok = Tokenizer.from_gguf_metadata({**pre_base, "tokenizer.ggml.pre": pre})
    bad = mismatches(tok, golden()["corpus"], golden()["pre"]["names"][pre])
    assert not bad, f"{len(bad)} strings differ; first: {bad[:3]}"


def test_golden_ids_tell_a_wrong_cut(pre_base):
    """The check can fail: GPT-2's vocabulary cut by Llama 3's expression instead of its own
    disagrees with llama.cpp's ids on many corpus strings."""
    tok = Tokenizer.from_gguf_metadata({**pre_base, "tokenizer.ggml.pre": "llama3"})
    assert len(mismatches(tok, golden()["corpus"], golden()["pre"]["names"]["a.x-4.0"])) > 20


@pytest.mark.parametrize("vocab", ["gpt-2", "llama-bpe", "qwen2", "llama-spm", "phi-3",
                                   *(pytest.param(v, marks=pytest.mark.slow) for v in LARGEST)])
def test_decode_gives_the_text_back(vocab, llama_cpp_models):
    """Decoding the ids of any corpus string gives the string back, for the byte-level and
    byte-fallback vocabularies (every character has a spelling): BOS and the space
    SentencePiece puts in front come off again. (With special tokens parsed, SentencePiece
    also puts a space after each one, as llama.cpp does, and decode keeps it, as llama.cpp's
    does: a model's own text after a special token starts as the model wrote it.)"""
    tok = tokenizer(llama_cpp_models, vocab)
    for text in golden()["corpus"]:
        assert tok.decode(tok.encode(text, parse_special=False), skip_special_tokens=True) \
            == text, text
        assert tok.decode(tok.encode(text, add_special_tokens=False, parse_special=False)) \
            == text, text


@pytest.mark.parametrize("vocab", [v for v in VOCABS if v not in ("aquila", "baichuan",
                                                                   "gpt-neox", "nomic-bert-moe")])
def test_vocabulary_matches_huggingface_reference_ids(vocab, llama_cpp_models):
    """llama.cpp's own test strings for the vocabulary (`.inp`) and the ids HuggingFace's
    `tokenizers` gives them (`.out`, made by llama.cpp's converter from the model's
    tokenizer.json): onebit gives those ids on every one. The four vocabularies left out have
    no such files in the corpus."""
    path = llama_cpp_models / f"ggml-vocab-{vocab}.gguf"
    texts = path.with_name(path.name + ".inp").read_text(encoding="utf-8").split(
        "\n__ggml_vocab_test__\n")
    expected = path.with_name(path.name + ".out").read_text(encoding="utf-8").split("\n")
    tok = tokenizer(llama_cpp_models, vocab)
    assert len(texts) <= len(expected)
    for text, ids in zip(texts, expected, strict=False):
        assert tok.encode(text, add_special_tokens=False) == [int(x) for x in ids.split()], text


def test_rwkv_matches_llama_cpp(tmp_path, golden_maker):
    """RWKV "world" (no such file is in llama.cpp's corpus): the vocabulary make_golden_ids.py
    makes (`rwkv_vocab`: the converter's escaped spelling, other spellings of the same bytes,
    overlapping prefixes, special tokens of each type, add_bos/add_eos set, four single bytes
    missing and "<unk>" for them) gives, through onebit, llama.cpp's ids for every corpus string,
    plain and with specials. The ids show llama.cpp doing what onebit's rwkv.py says it does:
    the later of two spellings of the same bytes matched, control tokens typed as text matched
    with special tokens off, "<unk>" for the missing bytes, and no BOS or EOS added. The
    metadata is the file's: written and read back, it is the same."""
    module = golden_maker
    meta = module.rwkv_vocab()
    module.write_rwkv(meta, tmp_path / "rwkv.gguf")
    back = read_metadata(tmp_path / "rwkv.gguf")
    assert {key: back[key] for key in meta} == meta
    expected = golden()["synthetic"]["rwkv"]
    bad = mismatches(Tokenizer.from_gguf_metadata(meta), golden()["corpus"], expected)
    assert not bad, f"{len(bad)} strings differ; first: {bad[:3]}"
    tokens = meta["tokenizer.ggml.tokens"]
    plain = {i for ids in expected["plain"] for i in ids}
    assert {tokens.index(t) for t in ("<unk>", "\\x48\\x65\\x6c\\x6c\\x6f", "\\p\\a\\s\\s",
                                      "<|im_start|>", "<s>")} <= plain
    assert tokens.index("Hello") not in plain and tokens.index("pass") not in plain
    assert -1 not in plain
    assert all(ids[:1] != [0] or text.startswith("<s>")     # "<s>" is BOS and EOS
               for text, ids in zip(golden()["corpus"], expected["special"], strict=True))


def test_rwkv_without_unknown_token_is_refused_where_llama_cpp_gives_minus_one(golden_maker):
    """The same vocabulary with no unknown token: llama.cpp gives -1 (LLAMA_TOKEN_NULL) for a
    byte no token starts with, an id its own llama_decode refuses. onebit refuses exactly those
    strings with a TokenizerError, and gives llama.cpp's ids for all the others."""
    from onebit.text.errors import TokenizerError

    tok = Tokenizer.from_gguf_metadata(golden_maker.rwkv_vocab(unk=False))
    expected = golden()["synthetic"]["rwkv-no-unk"]
    refused = 0
    for mode, on in (("plain", False), ("special", True)):
        for text, ids in zip(golden()["corpus"], expected[mode], strict=True):
            if -1 in ids:
                with pytest.raises(TokenizerError, match="no unknown token"):
                    tok.encode(text, add_special_tokens=on, parse_special=on)
                refused += 1
            else:
                assert tok.encode(text, add_special_tokens=on, parse_special=on) == ids, text
    assert refused > 50
