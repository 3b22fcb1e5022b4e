"""WordPiece ("bert") and Unigram ("t5"): llama.cpp's two algorithms on small vocabularies built
here, hostile character maps, and equality with llama.cpp itself (when llama-cpp-python and the
llama.cpp vocabulary files are present)."""

from __future__ import annotations

import json
import random
import re
import struct
import time
from pathlib import Path

import pytest

from onebit.text import unigram, wordpiece
from onebit.text.errors import TokenizerError
from onebit.text.metadata import USER_DEFINED, read_vocab

SPACE = "\u2581"

CORPUS = Path(__file__).parent / "data" / "tokenizer_corpus.jsonl"
KEY = "tokenizer.ggml.precompiled_charsmap"


# vocabularies built in code ----------------------------------------------------------------

def bert_metadata(hf_tokens: list[str], **extra) -> dict:
    """A "bert" vocabulary from a HuggingFace-style WordPiece list, converted as llama.cpp's
    converter does (conversion/bert.py, `phantom`): "[X]" control tokens kept, "##ing"
    continuations stored bare ("ing"), word starts with "▁" ("▁play")."""
    control = [t.startswith("[") and t.endswith("]") for t in hf_tokens]
    tokens = [t if c else t[2:] if t.startswith("##") else SPACE + t
              for t, c in zip(hf_tokens, control, strict=True)]
    return {"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": [3 if c else 1 for c in control],
            "tokenizer.ggml.unknown_token_id": hf_tokens.index("[UNK]"), **extra}


HF_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "unaff", "##able", "##aff", "play",
            "##ing", "##ed", "the", ",", "!", "cafe", "日", "本", "a", "ab", "##bc", "x"]


def t5_metadata(pieces: list[tuple[str, float, int]], **extra) -> dict:
    """A "t5" vocabulary: <pad>, </s>, <unk> (ids 0-2), then (text, score, type) pieces."""
    pieces = [("<pad>", 0.0, 3), ("</s>", 0.0, 3), ("<unk>", 0.0, 2), *pieces]
    return {"tokenizer.ggml.model": "t5",
            "tokenizer.ggml.tokens": [p[0] for p in pieces],
            "tokenizer.ggml.scores": [p[1] for p in pieces],
            "tokenizer.ggml.token_type": [p[2] for p in pieces],
            "tokenizer.ggml.unknown_token_id": 2, "tokenizer.ggml.eos_token_id": 1, **extra}


# Greedy longest-match cuts "▁abc" into "▁ab" + "c" (-1 - 5 = -6); the best sum is
# "▁a" + "bc" (-2 - 1.5 = -3.5).
T5_PIECES = [(SPACE, -3.0, 1), (SPACE + "a", -2.0, 1), (SPACE + "ab", -1.0, 1), ("a", -4.0, 1),
             ("b", -4.0, 1), ("c", -5.0, 1), ("bc", -1.5, 1), ("<x>", -9.0, USER_DEFINED),
             ("y", -3.0, 1), ("é", -2.0, 1), ("fi", -2.0, 1), ("[PAD9]", 0.0, 5)]


def build_charsmap(rules: dict[bytes, bytes]) -> bytes:
    """A precompiled character map of `rules` (key bytes -> replacement bytes) in the layout
    SentencePiece writes and llama.cpp reads: uint32 trie size, XOR double-array trie, then
    NUL-terminated replacements. Node s's children sit at (s ^ BASE[s]) ^ byte, its value
    (when a key ends at s, LEAF) at s ^ BASE[s]. LCHECK holds only the byte, not the parent,
    so no two nodes may share an offset s ^ BASE[s]."""
    trie: dict = {}
    for key, value in rules.items():
        node = trie
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    strings, offsets = bytearray(), {}
    for value in rules.values():
        if value not in offsets:
            offsets[value] = len(strings)
            strings += value + b"\0"
    cells: dict[int, int] = {}
    used, taken = {0}, set()

    def place(node: dict, index: int, label: int) -> None:
        children = sorted(b for b in node if b is not None)
        slots = children + ([0] if None in node else [])
        offset = 1
        while offset in taken or any(offset ^ c in used for c in slots):
            offset += 1
        taken.add(offset)
        used.update(offset ^ c for c in slots)
        cells[index] = ((index ^ offset) << 10) | (0x100 if None in node else 0) | label
        if None in node:
            cells[offset] = 0x80000000 | offsets[node[None]]
        for c in children:
            place(node[c], offset ^ c, c)

    place(trie, 0, 0)
    size = (max(cells) | 0xFF) + 1       # whole blocks of 256, as SentencePiece writes them
    array = [cells.get(i, 0) for i in range(size)]
    return struct.pack(f"<I{len(array)}I", 4 * len(array), *array) + bytes(strings)


RULES = {b"A": b"a", b"AB": b"y", b"\t": b" ", "ﬁ".encode(): b"fi", b"\x01": b"",
         "e\u0301".encode(): "é".encode(), b"x": b"XX"}


def tokens_of(encoder, metadata: dict, text: str) -> list[str]:
    tokens = metadata["tokenizer.ggml.tokens"]
    return [tokens[i] for i in encoder.encode(text, first=True)]


# WordPiece ---------------------------------------------------------------------------------

def test_wordpiece_cuts_each_word_into_longest_pieces():
    """Each word, with "▁" put in front, is cut from the left into the longest pieces: the
    HuggingFace "##" continuations are the bare pieces after the first; case is folded."""
    meta = bert_metadata(HF_WORDS)
    enc = wordpiece.build(read_vocab(meta))
    assert tokens_of(enc, meta, "Unaffable PLAYING played") == [
        SPACE + "unaff", "able", SPACE + "play", "ing", SPACE + "play", "ed"]


def test_wordpiece_word_without_a_spelling_is_one_unknown():
    """A word with a place where no piece starts is one [UNK], even when a cut other than the
    greedy one exists ("▁ab" leaves "c"; "▁a" + "bc" is never tried), and only that word."""
    meta = bert_metadata(HF_WORDS)
    enc = wordpiece.build(read_vocab(meta))
    assert tokens_of(enc, meta, "abc the zzz") == ["[UNK]", SPACE + "the", "[UNK]"]
    assert tokens_of(enc, meta, "abc") == ["[UNK]"]


def test_wordpiece_normalizes_like_llama_cpp():
    """Accents stripped (first code point of the NFD), punctuation and CJK ideographs split
    off as words of their own, controls dropped, every kind of whitespace a word break."""
    meta = bert_metadata(HF_WORDS)
    enc = wordpiece.build(read_vocab(meta))
    assert enc.words("Café,日本!\u200b\x00x\u3000THE\u00a0a\tb") == [
        "cafe", ",", "日", "本", "!", "x", "the", "a", "b"]
    assert tokens_of(enc, meta, "CAFÉ, 日本!") == [
        SPACE + "cafe", SPACE + ",", SPACE + "日", SPACE + "本", SPACE + "!"]
    assert enc.encode("", first=True) == [] and enc.encode(" \n\t ", first=False) == []


def test_wordpiece_normalizer_options():
    """`tokenizer.ggml.normalizer.lowercase` off keeps case and, by default, accents;
    `strip_accents` can be set apart from it."""
    keep = wordpiece.build(read_vocab(bert_metadata(
        HF_WORDS, **{"tokenizer.ggml.normalizer.lowercase": False})))
    assert keep.words("Café") == ["Café"]
    strip = wordpiece.build(read_vocab(bert_metadata(HF_WORDS, **{
        "tokenizer.ggml.normalizer.lowercase": False,
        "tokenizer.ggml.normalizer.strip_accents": True})))
    assert strip.words("Café") == ["Cafe"]
    lower = wordpiece.build(read_vocab(bert_metadata(
        HF_WORDS, **{"tokenizer.ggml.normalizer.strip_accents": False})))
    # accents kept; "İ" lowercases to "i" (Unicode's simple mapping; str.lower() gives "i̇")
    assert lower.words("Café İ") == ["café", "i"]


@pytest.mark.parametrize("change, match", [
    ({"tokenizer.ggml.normalizer.lowercase": 1}, "normalizer.lowercase"),
    ({"tokenizer.ggml.normalizer.strip_accents": "yes"}, "strip_accents"),
    ({"tokenizer.ggml.model": "t5", "tokenizer.ggml.scores": [0.0] * len(HF_WORDS)},
     "not 'bert'"),
])
def test_wordpiece_refuses_bad_metadata(change, match):
    """A flag of the wrong type or another vocabulary type is a TokenizerError naming it."""
    with pytest.raises(TokenizerError, match=match):
        wordpiece.build(read_vocab({**bert_metadata(HF_WORDS), **change}))


def test_wordpiece_refuses_duplicates_and_byte_tokens():
    """llama.cpp refuses a vocabulary with two tokens of the same text (an assertion at load),
    and cannot decode a byte token in a WordPiece vocabulary (it aborts): both are errors."""
    meta = bert_metadata(HF_WORDS + ["the"])
    with pytest.raises(TokenizerError, match="twice"):
        wordpiece.build(read_vocab(meta))
    meta = bert_metadata(HF_WORDS)
    meta["tokenizer.ggml.token_type"][-1] = 6
    with pytest.raises(TokenizerError, match="token_type"):
        wordpiece.build(read_vocab(meta))


def test_wordpiece_without_unknown_token_fails_only_when_needed():
    """With no unknown token in range (llama.cpp's default 100 is outside a small vocabulary),
    spelled words still encode and an unspellable one is a TokenizerError, not id -1."""
    meta = bert_metadata(HF_WORDS)
    del meta["tokenizer.ggml.unknown_token_id"]
    enc = wordpiece.build(read_vocab(meta))
    assert tokens_of(enc, meta, "the") == [SPACE + "the"]
    with pytest.raises(TokenizerError, match="unknown"):
        enc.encode("zzz", first=True)


def _llama_unicode_tables(path: Path):
    src = path.read_text()

    def numbers(name: str) -> list[int]:
        start = src.index(name)
        return [int(x, 16) for x in re.findall(r"0x([0-9A-Fa-f]+)", src[start:src.index("};",
                                                                                      start)])]
    flags = numbers("unicode_ranges_flags")
    whitespace = set(numbers("unicode_set_whitespace"))
    lower = numbers("unicode_map_lowercase")
    nfd = numbers("unicode_ranges_nfd")
    return (list(zip(flags[0::2], flags[1::2], strict=True)), whitespace,
            dict(zip(lower[0::2], lower[1::2], strict=True)),
            list(zip(nfd[0::3], nfd[1::3], nfd[2::3], strict=True)))


def test_wordpiece_unicode_data_equals_llama_cpp_tables(llama_cpp_models):
    """For every code point, the category class, whitespace, lowercase and first-of-NFD that
    wordpiece.py takes from Python's unicodedata (with its Unicode 15.1 additions) equal
    llama.cpp's own tables (src/unicode-data.cpp)."""
    path = llama_cpp_models.parent / "src" / "unicode-data.cpp"
    ranges, whitespace, lower, nfd = _llama_unicode_tables(path)
    letter = {0x01: "U", 0x02: "N", 0x04: "L", 0x08: "Z", 0x10: "M", 0x20: "P", 0x40: "S",
              0x80: "C"}
    assert whitespace == wordpiece._WHITESPACE
    for (start, flags), (end, _) in zip(ranges, ranges[1:], strict=False):
        want = letter[flags & 0xFF]
        for cp in range(start, end):
            assert wordpiece.category(cp) == want, hex(cp)
    for cp in range(0x110000):
        ch = chr(cp)
        assert ord(wordpiece.simple_lower(ch)) == lower.get(cp, cp), hex(cp)
    first = {}
    for start, last, target in nfd:
        for cp in range(start, last + 1):
            first[cp] = target
    for cp in range(0x110000):
        assert ord(wordpiece.nfd_first(chr(cp))) == first.get(cp, cp), hex(cp)


# Unigram -----------------------------------------------------------------------------------

def test_unigram_takes_the_best_scoring_segmentation_not_the_greedy_one():
    """The segmentation with the highest score sum wins ("▁a" + "bc" = -3.5) over the greedy
    longest-first one ("▁ab" + "c" = -6)."""
    meta = t5_metadata(T5_PIECES, **{"tokenizer.ggml.add_space_prefix": True})
    enc = unigram.build(read_vocab(meta))
    assert tokens_of(enc, meta, "abc") == [SPACE + "a", "bc"]


def test_unigram_unknown_characters_merge_into_one_unknown():
    """A character with no one-character piece is the unknown token; a run of them is one."""
    meta = t5_metadata(T5_PIECES, **{"tokenizer.ggml.add_space_prefix": True})
    enc = unigram.build(read_vocab(meta))
    assert tokens_of(enc, meta, "a无无无c") == [SPACE + "a", "<unk>", "c"]
    assert tokens_of(enc, meta, "无 无") == [SPACE, "<unk>", SPACE, "<unk>"]


def test_unigram_space_options():
    """Spaces are "▁"; add_space_prefix (llama.cpp's default for "t5": off) puts one before the
    first non-space; remove_extra_whitespaces drops spaces at the ends and merges runs, and then
    every word starts with "▁"."""
    def normalized(**flags) -> str:
        meta = t5_metadata(T5_PIECES, **{f"tokenizer.ggml.{k}": v for k, v in flags.items()})
        return unigram.build(read_vocab(meta)).normalize("  a  b ")

    assert normalized() == "▁▁a▁▁b▁"
    assert normalized(add_space_prefix=True) == "▁▁▁a▁▁b▁"
    assert normalized(remove_extra_whitespaces=True) == "▁a▁b"
    assert normalized(add_space_prefix=True, remove_extra_whitespaces=True) == "▁a▁b"


def test_unigram_character_map_longest_match():
    """The character map replaces the longest key at each place ("AB" before "A"), may delete
    ("\\x01") or expand ("ﬁ" -> "fi"), and only where no user-defined token starts."""
    meta = t5_metadata(T5_PIECES, **{KEY: list(build_charsmap(RULES)),
                                     "tokenizer.ggml.add_space_prefix": True})
    enc = unigram.build(read_vocab(meta))
    assert enc.normalize("ABA\tﬁ\x01e\u0301") == "▁ya▁fié"
    # "<x" starts the user-defined "<x>": llama.cpp keeps it unmapped, as far as it follows
    # the token ("<x" of "<xa"), though "<x" is no token ("x" -> "XX" elsewhere)
    assert enc.normalize("<xa x") == "▁<xa▁XX"


def test_unigram_user_defined_pieces_score_zero_and_unused_pieces_match():
    """User-defined pieces take part in the segmentation at score 0; unused pieces (type 5)
    take part with their score; control pieces never."""
    meta = t5_metadata(T5_PIECES)
    enc = unigram.build(read_vocab(meta))
    assert tokens_of(enc, meta, "<x>[PAD9]</s>") == ["<x>", "[PAD9]", "<unk>"]


def test_unigram_int8_charsmap_equals_uint8():
    """GGUF may store the map as int8: negative values are the same bytes."""
    data = build_charsmap(RULES)
    signed = [b - 256 if b > 127 else b for b in data]
    one = unigram.build(read_vocab(t5_metadata(T5_PIECES, **{KEY: list(data)})))
    two = unigram.build(read_vocab(t5_metadata(T5_PIECES, **{KEY: signed})))
    assert one.normalize("ﬁAB\t") == two.normalize("ﬁAB\t") == "fiy▁"


@pytest.mark.parametrize("change, match", [
    ({"tokenizer.ggml.remove_extra_whitespaces": "true"}, "remove_extra_whitespaces"),
    ({"tokenizer.ggml.add_space_prefix": 0}, "add_space_prefix"),
    ({"tokenizer.ggml.model": "bert"}, "not 't5'"),
])
def test_unigram_refuses_bad_metadata(change, match):
    """A flag of the wrong type or another vocabulary type is a TokenizerError naming it."""
    with pytest.raises(TokenizerError, match=match):
        unigram.build(read_vocab({**t5_metadata(T5_PIECES), **change}))


def _damaged_maps() -> list[tuple[str, object]]:
    good = build_charsmap(RULES)
    return [
        ("empty", []),
        ("three bytes", [1, 2, 3]),
        ("huge declared size", list(b"\xff\xff\xff\xff" + good[4:])),
        ("size leaving no strings", list((len(good) - 4).to_bytes(4, "little") + good[4:])),
        ("not a byte", list(good[:-1]) + [300]),
        ("below int8", [-129] + list(good[1:])),
        ("a string in the list", ["x"] + list(good[1:])),
        ("a bool in the list", [True] + list(good[1:])),
        ("a str", "charsmap"),
        ("a float", 1.5),
    ]


@pytest.mark.parametrize("name, value", _damaged_maps(), ids=[n for n, _ in _damaged_maps()])
def test_damaged_charsmap_is_refused_quickly(name, value):
    """A character map whose header, size or element type is wrong is a TokenizerError naming
    the key when the tokenizer is built, in well under a second (a declared size of 4 GiB
    allocates nothing): never an IndexError, never a hang."""
    meta = t5_metadata(T5_PIECES, **{KEY: value})
    started = time.perf_counter()
    with pytest.raises(TokenizerError, match="precompiled_charsmap"):
        unigram.build(read_vocab(meta))
    assert time.perf_counter() - started < 1.0


def test_oversized_charsmap_is_refused(monkeypatch):
    """A map larger than the limit is refused before it is copied."""
    monkeypatch.setattr(unigram, "MAX_CHARSMAP_BYTES", 64)
    meta = t5_metadata(T5_PIECES, **{KEY: list(build_charsmap(RULES)) + [0] * 100})
    with pytest.raises(TokenizerError, match="limit"):
        unigram.build(read_vocab(meta))


def _patched(data: bytes, index: int, value: int) -> list[int]:
    """`data` with trie node `index` set to `value`."""
    out = bytearray(data)
    out[4 + 4 * index:8 + 4 * index] = value.to_bytes(4, "little")
    return list(out)


def test_charsmap_links_out_of_range_fail_at_encode():
    """Trie links and replacement offsets that point outside the map: llama.cpp throws when a
    text leads there; here it is a TokenizerError naming the key."""
    good = build_charsmap({b"A": b"a"})
    nodes = struct.unpack_from(f"<{(len(good) - 5) // 4}I", good, 4)
    root_offset = nodes[0] >> 10
    child = root_offset ^ ord("A")
    value_at = child ^ (nodes[child] >> 10)
    cases = {   # name: (map, whether a text without "A" avoids the damage)
        "BASE past the end": (_patched(good, child, (0x1FFFFF << 10) | 0x100 | ord("A")), True),
        "offset past the strings": (_patched(good, value_at, 0x80000000 | 999), True),
        "string without NUL": (list(good[:-1]) + [ord("z")], True),
        "root BASE past the end": (_patched(good, 0, 0x1FFFFF << 10), False),
    }
    for name, (value, avoidable) in cases.items():
        enc = unigram.build(read_vocab(t5_metadata(T5_PIECES, **{KEY: value})))
        with pytest.raises(TokenizerError, match="precompiled_charsmap"):
            enc.encode("bA", first=True)
        if avoidable:
            assert enc.encode("b", first=True) == [7], name
        else:
            with pytest.raises(TokenizerError, match="precompiled_charsmap"):
                enc.encode("b", first=True)


def test_randomly_damaged_charsmaps_fail_cleanly():
    """Random byte changes to a valid map: every build and encode either works or raises a
    TokenizerError naming the key, in bounded time."""
    good = build_charsmap(RULES)
    rng = random.Random(35)
    started = time.perf_counter()
    for _ in range(300):
        data = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            enc = unigram.build(read_vocab(t5_metadata(T5_PIECES, **{KEY: list(data)})))
            enc.encode("ABA\tﬁ\x01e\u0301 x<xy>" + "".join(map(chr, range(1, 0x80))),
                       first=True)
        except TokenizerError as error:
            assert "precompiled_charsmap" in str(error)
    assert time.perf_counter() - started < 10.0


# llama.cpp itself --------------------------------------------------------------------------

def _llama_cpp():
    try:
        import llama_cpp
    except ImportError as error:     # pytest.importorskip would hide why
        pytest.skip(f"llama_cpp is not importable: {error}")
    return llama_cpp


def _write_gguf(path: Path, metadata: dict) -> None:
    """A vocabulary-only GGUF llama.cpp loads: the tokenizer keys and a few model keys."""
    gguf = pytest.importorskip("gguf")
    types = gguf.GGUFValueType
    writer = gguf.GGUFWriter(str(path), "bert")
    for key, value in {"bert.block_count": 1, "bert.context_length": 64,
                       "bert.embedding_length": 8, "bert.feed_forward_length": 8,
                       "bert.attention.head_count": 1}.items():
        writer.add_uint32(key, value)
    writer.add_float32("bert.attention.layer_norm_epsilon", 1e-5)
    for key, value in metadata.items():
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            sub = {"tokenizer.ggml.tokens": types.STRING, "tokenizer.ggml.scores": types.FLOAT32,
                   "tokenizer.ggml.token_type": types.INT32, KEY: types.UINT8}[key]
            writer.add_key_value(key, list(value), types.ARRAY, sub_type=sub)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()


def _user_defined(metadata: dict) -> list[tuple[str, int]]:
    """(text, id) of the user-defined tokens, the longest first."""
    found = {t: i for i, (t, k) in enumerate(zip(metadata["tokenizer.ggml.tokens"],
                                                 metadata["tokenizer.ggml.token_type"],
                                                 strict=True))
             if k == USER_DEFINED and t}
    return sorted(found.items(), key=lambda item: len(item[0]), reverse=True)


def _ours(encoder, user_defined: list[tuple[str, int]], text: str) -> list[int]:
    """onebit's ids of `text`, with llama.cpp's first pass as it runs with special=False: the
    texts of user-defined tokens (the longest first) are cut out as their ids, and each
    stretch between goes to the encoder."""
    parts: list[str | int] = [text]
    for token, token_id in user_defined:
        cut: list[str | int] = []
        for part in parts:
            if isinstance(part, int):
                cut.append(part)
                continue
            for k, piece in enumerate(part.split(token)):
                if k:
                    cut.append(token_id)
                if piece:
                    cut.append(piece)
        parts = cut
    out: list[int] = []
    first = True
    for part in parts:
        if isinstance(part, int):
            out.append(part)
            first = True
        else:
            out.extend(encoder.encode(part, first=first))
            first = False
    return out


SMALL_TEXTS = ["abc", "  a  b ", "Unaffable PLAYING played", "abc the zzz", "CAFÉ, 日本!",
               "a无无无c", "ABA\tﬁ\x01e\u0301 x", "<xa x", "<x>[PAD9]</s>", "<x><x y", "",
               "éé fi", "\u00a0x\u3000y\n", "İ ǅ"]


@pytest.mark.parametrize("metadata", [
    bert_metadata(HF_WORDS),
    bert_metadata(HF_WORDS, **{"tokenizer.ggml.normalizer.lowercase": False}),
    t5_metadata(T5_PIECES),
    t5_metadata(T5_PIECES, **{"tokenizer.ggml.add_space_prefix": True, KEY: build_charsmap(RULES)}),
    t5_metadata(T5_PIECES, **{"tokenizer.ggml.remove_extra_whitespaces": True,
                              KEY: build_charsmap(RULES)}),
], ids=["bert", "bert-cased", "t5", "t5-prefix-charsmap", "t5-merge-charsmap"])
def test_small_vocabularies_equal_llama_cpp(tmp_path, metadata):
    """The small vocabularies above, written as GGUF files and loaded by llama.cpp, give the
    same ids as onebit on texts that reach every rule tested above (the unknown runs, the
    space options, the character map, the user-defined prefix quirk)."""
    llama_cpp = _llama_cpp()
    path = tmp_path / "vocab.gguf"
    _write_gguf(path, metadata)
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    module = wordpiece if metadata["tokenizer.ggml.model"] == "bert" else unigram
    enc = module.build(read_vocab(metadata))
    user_defined = _user_defined(metadata)
    for text in SMALL_TEXTS:
        want = llm.tokenize(text.encode(), add_bos=False, special=False)
        assert _ours(enc, user_defined, text) == want, text


def _real_vocab(name: str, models: Path):
    path = models / name
    from onebit.gguf.reader import read_metadata

    return path, read_metadata(path)[2]


@pytest.mark.parametrize("name, module", [("ggml-vocab-bert-bge.gguf", wordpiece),
                                          ("ggml-vocab-nomic-bert-moe.gguf", unigram)])
def test_corpus_equals_llama_cpp(name, module, llama_cpp_models):
    """Every 8th string of the tokenizer corpus (code, whitespace runs, accents, CJK, emoji,
    special-token text), tokenized by onebit and by llama.cpp with the same file, gives the same
    ids (test_golden_ids.py holds every string, without llama.cpp installed)."""
    llama_cpp = _llama_cpp()
    path, metadata = _real_vocab(name, llama_cpp_models)
    enc = module.build(read_vocab(metadata))
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line) for line in lines[::8] if line.strip()]
    user_defined = _user_defined(metadata)
    for text in texts:
        want = llm.tokenize(text.encode(), add_bos=False, special=False)
        assert _ours(enc, user_defined, text) == want, text


def test_bert_matches_huggingface_reference_ids(llama_cpp_models):
    """llama.cpp's test file for bert-bge (ggml-vocab-bert-bge.gguf.inp/.out: inputs and the
    ids HuggingFace's tokenizer gives them) is matched in full."""
    path, metadata = _real_vocab("ggml-vocab-bert-bge.gguf", llama_cpp_models)
    inputs = Path(f"{path}.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    outputs = Path(f"{path}.out").read_text(encoding="utf-8").split("\n")
    enc = wordpiece.build(read_vocab(metadata))
    user_defined = _user_defined(metadata)
    assert len(inputs) <= len(outputs)
    for text, ids in zip(inputs, outputs, strict=False):
        assert _ours(enc, user_defined, text) == [int(x) for x in ids.split()], text
