"""The RWKV "world" tokenizer (onebit/text/rwkv.py): escapes, longest match, decode, and
hostile vocabularies. tests/text/test_golden_ids.py holds it to llama.cpp's own ids."""

import json
import random
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onebit.text import Tokenizer, rwkv
from onebit.text.errors import TokenizerError
from onebit.text.metadata import MAX_TOKEN_BYTES, read_vocab

DATA = Path(__file__).parent / "data"
CONTROL, UNUSED = 3, 5


def spelled(data: bytes) -> str:
    """`data` as llama.cpp's converter writes an RWKV token."""
    return repr(data)[2:-1]


def metadata(tokens: list[str], types: list[int] | None = None, **keys) -> dict:
    meta = {"tokenizer.ggml.model": "rwkv", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": types or [1] * len(tokens)}
    meta.update({f"tokenizer.ggml.{key}": value for key, value in keys.items()})
    return meta


def tokenizer(words: list[str], **keys) -> Tokenizer:
    """The 256 single bytes (ids 0..255) then `words` (ids 256...), in the converter's
    spelling."""
    tokens = [spelled(bytes([b])) for b in range(256)] + [spelled(w.encode()) for w in words]
    return Tokenizer.from_gguf_metadata(metadata(tokens, **keys))


def corpus() -> list[str]:
    lines = (DATA / "tokenizer_corpus.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


# escapes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("stored, data", [
    ("abc", b"abc"),
    ("\\t\\n\\r", b"\t\n\r"),
    ("\\x00\\x7f\\xff", b"\x00\x7f\xff"),
    ("\\\\", b"\\"),                     # an escaped backslash ...
    ("\\\\x41", b"\\x41"),               # ... is no start of a \x escape after it
    ("\\\\n", b"\\n"),
    ("\\'s", b"'s"),
    ('\\"', b'"'),
    ("\\q\\(", b"q("),                   # before any other character: that character
    ("caf\u00e9", "café".encode()),      # raw UTF-8 is its own bytes
    ("\\\u00e9", "é".encode()),          # and so after a backslash
    ("\\xc3\\xa9", "é".encode()),
])
def test_unescape_reads_llama_cpps_escapes(stored, data):
    """llama.cpp's `llama_unescape_rwkv_token`: \\t \\n \\r, \\xNN, and a backslash before any
    other character stands for that character."""
    assert rwkv.unescape(stored) == data


def test_other_spellings_of_the_made_vocabulary(golden_maker):
    """The bytes make_golden_ids.py says its other spellings stand for (llama.cpp's ids for
    that vocabulary, in the goldens, agree) are the bytes onebit reads in them."""
    for stored, data in golden_maker.RWKV_OTHER_SPELLINGS:
        assert rwkv.unescape(stored) == data, stored


@given(st.binary(max_size=40))
def test_the_converters_spelling_reads_back(data):
    """Every byte string, spelled as the converter spells it (`repr(bytes)[2:-1]`), reads back
    as itself."""
    assert rwkv.unescape(spelled(data)) == data


@given(st.text(alphabet=st.sampled_from("\\xtnr0af9AG'\"é\n"), max_size=12))
def test_any_text_unescapes_or_is_refused_by_name(text):
    """Any token text is either read or refused with a TokenizerError naming the key and the
    index: never another error."""
    try:
        rwkv.unescape(text, 7)
    except TokenizerError as error:
        assert "tokenizer.ggml.tokens[7]" in str(error)


# hostile tokens ----------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [
    "abc\\",         # a lone backslash at the end: llama.cpp drops it
    "\\x",           # \x without digits: dropped
    "\\x4",          # one digit: dropped
    "\\xAB",         # uppercase: llama.cpp computes 'A' - '0' and reads byte 0x22
    "\\xg0",         # not hex
    "\\x-1",
    "ok\\x4\\n",     # the digits run into the next escape
    "\\\\\\",        # an escaped backslash, then a lone one
])
def test_malformed_escape_is_refused_naming_the_token(bad):
    """An escape llama.cpp would read as some other byte, or drop silently, is a TokenizerError
    naming `tokenizer.ggml.tokens[i]`, when the tokenizer is built."""
    tokens = [spelled(bytes([b])) for b in range(256)] + ["fine", bad]
    with pytest.raises(TokenizerError, match=r"tokenizer\.ggml\.tokens\[257\]"):
        Tokenizer.from_gguf_metadata(metadata(tokens))


def test_huge_token_is_refused():
    """A token longer than MAX_TOKEN_BYTES characters, or whose bytes are more than
    MAX_RWKV_TOKEN_BYTES, is a TokenizerError naming the token, both through the metadata
    reader and given to rwkv.build directly."""
    for tokens in (["a", "\\x41" * (MAX_TOKEN_BYTES // 4 + 1)],
                   ["a", "A" * (rwkv.MAX_RWKV_TOKEN_BYTES + 1)]):
        with pytest.raises(TokenizerError, match=r"tokenizer\.ggml\.tokens\[1\]"):
            Tokenizer.from_gguf_metadata(metadata(tokens))
        spec = read_vocab(metadata(["a", "b"]))
        object.__setattr__(spec, "tokens", tokens)
        with pytest.raises(TokenizerError, match=r"tokenizer\.ggml\.tokens\[1\]"):
            rwkv.build(spec)


def test_many_long_tokens_are_refused_quickly():
    """Tokens of the largest size each cost the matcher the square of their length: a
    vocabulary of enough of them is refused, naming the key and the longest token, before any
    of it is built."""
    size = rwkv.MAX_RWKV_TOKEN_BYTES
    count = rwkv.MAX_PREFIX_BYTES // (size * (size - 1) // 2) + 1
    tokens = ["a"] + [f"{i:08d}" + "a" * (size - 8) for i in range(count)]
    started = time.perf_counter()
    with pytest.raises(TokenizerError, match=r"'tokenizer\.ggml\.tokens'.*longest token is \[1\]"):
        Tokenizer.from_gguf_metadata(metadata(tokens))
    assert time.perf_counter() - started < 1.0
    assert Tokenizer.from_gguf_metadata(metadata(tokens[:-1])).encode(tokens[1]) == [1]


def test_longest_allowed_token_is_matched():
    """A token of MAX_RWKV_TOKEN_BYTES bytes, spelled in MAX_TOKEN_BYTES characters, is a token
    like any other."""
    size = rwkv.MAX_RWKV_TOKEN_BYTES
    assert len("\\x41" * size) <= MAX_TOKEN_BYTES
    tokens = [spelled(bytes([b])) for b in range(256)] + ["\\x41" * size]
    tok = Tokenizer.from_gguf_metadata(metadata(tokens))
    assert tok.encode("A" * (size + 1)) == [256, ord("A")]


def test_wrong_model_name_is_refused():
    with pytest.raises(TokenizerError, match="not 'rwkv'"):
        rwkv.build(read_vocab({**metadata(["a"]), "tokenizer.ggml.model": "bert"}))


# longest match -----------------------------------------------------------------------------

def test_longest_token_at_each_byte():
    """From each place the longest token the text starts with is taken, and no shorter one is
    preferred for what follows (no lookahead): "abcd" is "abc" + "d" although "ab" + "cd" also
    spells it."""
    tok = tokenizer(["ab", "abc", "cd", "abcde"])
    ab, abc, cd, abcde = 256, 257, 258, 259
    assert tok.encode("abcd") == [abc, ord("d")]
    assert tok.encode("abcde") == [abcde]
    assert tok.encode("abcdab") == [abc, ord("d"), ab]
    assert tok.encode("cdab") == [cd, ab]


def test_walk_past_a_start_that_is_no_token_falls_back():
    """"xyz" is a token and "xy" is not: in "xyq" the walk reaches "xy", finds no token there,
    and the longest token it passed ("x") is taken."""
    tok = tokenizer(["xyz"])
    assert tok.encode("xyz") == [256]
    assert tok.encode("xyq") == [ord("x"), ord("y"), ord("q")]
    assert tok.encode("xy") == [ord("x"), ord("y")]


def test_bytes_not_characters():
    """The match is over UTF-8 bytes: a token may hold part of a character, and a character
    with no token of its own is its bytes."""
    first_two = "\u65e5".encode()[:2]
    tokens = [spelled(bytes([b])) for b in range(256)] + [spelled("日本".encode()),
                                                          spelled(first_two)]
    tok = Tokenizer.from_gguf_metadata(metadata(tokens))
    assert tok.encode("日本") == [256]
    assert tok.encode("日x") == [257, "日".encode()[2], ord("x")]
    assert tok.encode("é") == list("é".encode())


def test_later_spelling_of_the_same_bytes_wins():
    """Two tokens with the same bytes, spelled differently: the later id is matched, as
    llama.cpp's trie keeps the last id written into it."""
    tokens = [spelled(bytes([b])) for b in range(256)] + ["ab", "\\x61\\x62", "\\a\\b"]
    assert Tokenizer.from_gguf_metadata(metadata(tokens)).encode("ab") == [258]


def test_every_token_is_matched_whatever_its_type():
    """Control and unused tokens are in the match too: "<s>" and "[PAD300]" typed into the
    text with special tokens off are those tokens (llama.cpp's trie holds every token)."""
    tokens = ["<s>"] + [spelled(bytes([b])) for b in range(256)] + ["[PAD257]"]
    types = [CONTROL] + [1] * 256 + [UNUSED]
    tok = Tokenizer.from_gguf_metadata(metadata(tokens, types, bos_token_id=0, eos_token_id=0))
    assert tok.encode("<s>x[PAD257]", add_special_tokens=False, parse_special=False) == \
        [0, 1 + ord("x"), 257]
    assert tok.encode("<s>x", parse_special=True) == [0, 1 + ord("x")]


def test_no_bos_or_eos_whatever_the_file_says():
    """llama.cpp's RWKV tokenize adds neither BOS nor EOS, even where the file asks for them."""
    tokens = ["<s>"] + [spelled(bytes([b])) for b in range(256)]
    tok = Tokenizer.from_gguf_metadata(metadata(
        tokens, [CONTROL] + [1] * 256, bos_token_id=0, eos_token_id=0, add_bos_token=True,
        add_eos_token=True))
    assert tok.encode("a") == [1 + ord("a")]
    assert tok.bos_token_id == 0 and tok.eos_token_id == 0


# bytes without a token ---------------------------------------------------------------------

def _without(missing: set[int], words: list[str], **keys) -> Tokenizer:
    tokens = ["<unk>"] + [spelled(bytes([b])) for b in range(256) if b not in missing]
    tokens += [spelled(w.encode()) for w in words]
    return Tokenizer.from_gguf_metadata(metadata(tokens, [2] + [1] * (len(tokens) - 1), **keys))


def test_byte_without_token_is_the_unknown_token():
    """A byte no token starts with is the unknown token, and the cut goes on at the next byte
    (llama.cpp's session)."""
    tok = _without({ord("~"), 0xE4}, [], unknown_token_id=0)
    tilde_free = {b: i for i, b in enumerate(b for b in range(256) if b not in (0x7E, 0xE4))}
    assert tok.encode("a~b") == [1 + tilde_free[ord("a")], 0, 1 + tilde_free[ord("b")]]
    assert tok.encode("中") == [0] + [1 + tilde_free[b] for b in "中".encode()[1:]]


def test_byte_without_token_and_no_unknown_token_is_refused():
    """Without an unknown token llama.cpp puts -1 in the ids (which its llama_decode refuses);
    onebit refuses the text with a TokenizerError saying which byte."""
    tok = _without({ord("~")}, [])
    assert tok.encode("ab")
    with pytest.raises(TokenizerError, match="0x7e"):
        tok.encode("a~b")


def test_start_of_a_longer_token_that_is_no_token_is_unknown():
    """"a" starts "ab" but is no token, and the text goes on with "c": llama.cpp's session
    restarts the stretch there forever; onebit takes "a" as a byte with no token."""
    tok = _without({ord("a")}, ["ab"], unknown_token_id=0)
    ab = len(tok) - 1
    c = tok.encode("c")[0]
    assert tok.encode("abac") == [ab, 0, c]
    with pytest.raises(TokenizerError):
        _without({ord("a")}, ["ab"]).encode("ac")


# decode ------------------------------------------------------------------------------------

def test_decode_gives_the_unescaped_bytes():
    """Decoding joins the tokens' unescaped bytes (llama.cpp's `token_to_piece` for RWKV), so
    any text comes back; a control token is dropped with skip_special_tokens, and "\\n\\n" kept
    though the file names it EOT (a normal token: llama.cpp keeps it too)."""
    words = ["\n\n", "\\n", "caf\u00e9", "  ", "\t\t"]
    tokens = ["<s>"] + [spelled(bytes([b])) for b in range(256)] + [spelled(w.encode())
                                                                   for w in words]
    eot = tokens.index("\\n\\n")
    tok = Tokenizer.from_gguf_metadata(metadata(tokens, [CONTROL] + [1] * (len(tokens) - 1),
                                                bos_token_id=0, eos_token_id=0,
                                                eot_token_id=eot))
    for text in corpus():
        ids = tok.encode(text)
        assert tok.decode(ids) == text
    assert tok.token_bytes(tokens.index("caf\\xc3\\xa9")) == "café".encode()
    assert tok.decode([0, eot, 1 + ord("x")], skip_special_tokens=True) == "\n\nx"
    assert tok.decode([0, 1 + ord("x")]) == "<s>x"
    assert eot in tok.stop_ids


# speed -------------------------------------------------------------------------------------

def _world_like(n: int = 65_536) -> list[str]:
    """A vocabulary the size and make of RWKV world's: the 256 single bytes, then words of
    ASCII, Latin, Cyrillic and CJK text from 2 to 16 bytes, in the converter's spelling."""
    rng = random.Random(65)
    alphabets = ["etaoinshrdlu     ", "éèàüößç", "приветмир", "的一是不了人我在有他这"]
    seen = {bytes([b]) for b in range(256)}
    tokens = [spelled(bytes([b])) for b in range(256)]
    while len(tokens) < n:
        letters = alphabets[rng.randrange(4)]
        data = "".join(rng.choice(letters) for _ in range(rng.randint(2, 6))).encode()
        if data not in seen:
            seen.add(data)
            tokens.append(spelled(data))
    return tokens


def test_a_world_like_vocabulary_round_trips_mixed_text():
    """A 65k world-like vocabulary (with eight times the escapes of the real one) builds, and
    1000 characters of mixed corpus text come back from their ids. (Speed is measured, not
    asserted: it builds in 0.3 to 0.45 s here and encodes the text in under 0.5 ms.)"""
    tok = Tokenizer.from_gguf_metadata(metadata(_world_like()))
    text = "".join(corpus())[:1000]
    assert tok.decode(tok.encode(text)) == text
