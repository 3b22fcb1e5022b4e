"""WordPiece (GGUF `tokenizer.ggml.model` = "bert"), as llama.cpp runs it.

The reference is llama.cpp's `llm_tokenizer_wpm_session` (src/llama-vocab.cpp, build 11434).
It is BERT's WordPiece with the GGUF converter's spelling of the vocabulary: a piece that opens a
word is stored with a leading "▁" ("▁hello"), a continuation piece bare ("ing"; HuggingFace
writes it "##ing"). Encoding a stretch of text is:

1. Normalize and split (`WordPieceEncoder.words`), code point by code point:
   - with `strip_accents`, each code point is replaced by the *first* code point of its NFD
     decomposition (llama.cpp's table is built that way: "é" -> "e", "한" -> "ᄒ"; this is not
     full NFD, whose marks would follow);
   - whitespace ends the current word;
   - NUL, U+FFFD and control code points (categories Cc, Cf, Co, Cs) are dropped, and so are
     accent marks (M*) under `strip_accents`;
   - punctuation (P*), ASCII symbols (S* below U+007F) and CJK ideographs are words of their own;
   - anything else, lowercased under `lowercase`, is appended to the current word.
2. Each word, with "▁" put in front, is cut greedily from the left into the longest pieces of
   the vocabulary. A word with a place where no piece starts becomes one unknown token.

Two options come from the file: `tokenizer.ggml.normalizer.lowercase` (default true) and
`tokenizer.ggml.normalizer.strip_accents` (default: the value of lowercase). llama.cpp puts no
space prefix and uses no `first`: every stretch of text is tokenized alike.

Where llama.cpp differs from HuggingFace's BertTokenizer, this follows llama.cpp: no limit on
a word's length (HF: 100 characters, then unknown), the first-code-point "NFD" above (a Hangul
syllable keeps only its first jamo; HF keeps all three), and the lowercasing, which is
Unicode's simple one-to-one case mapping ("İ" -> "i"; str.lower() gives "i̇").

Unicode data: llama.cpp's tables (src/unicode-data.cpp) are Unicode 15.1; Python's
`unicodedata` is the Python's own version (14.0 for 3.11, 15.0 for 3.12, 15.1 for 3.13). The
general categories agree except for the code points assigned in 15.0 and 15.1, which
`_UNICODE_15_1` lists; the lowercase and first-of-NFD maps agree for every code point
(tests/text/test_wordpiece_unigram.py checks all three against llama.cpp's tables, code point by
code point, when the llama.cpp source is present). Under a Python whose Unicode is newer than
15.1 (3.14: Unicode 16.0), code points first assigned after 15.1 would be classified (and
lowercased) by the newer Unicode where llama.cpp still calls them unassigned.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_right

from onebit.text.errors import TokenizerError
from onebit.text.metadata import BYTE, VocabSpec, read_flag

SPACE = "\u2581"           # the converter's word-start mark
_DEFAULT_UNK = 100         # llama.cpp's default unknown id for a "bert" vocabulary

# What a code point does to the word being built.
_WORD, _SPLIT, _DROP, _ALONE = 0, 1, 2, 3

# llama.cpp's whitespace (unicode-data.cpp, `unicode_set_whitespace`: Unicode's White_Space).
# Not str.isspace(), which also counts U+001C..U+001F.
_WHITESPACE = frozenset(
    [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
     0x202F, 0x205F, 0x3000])

# Code points that Unicode 15.0 and 15.1 assigned, which Python 3.11's Unicode 14.0 still calls
# unassigned, with their category letter (inclusive ranges; the difference between llama.cpp's
# tables and unicodedata 14.0, every code point checked).
_UNICODE_15_1 = [
    (0x0CF3, 0x0CF3, "M"), (0x0ECE, 0x0ECE, "M"), (0x2FFC, 0x2FFF, "S"), (0x31EF, 0x31EF, "S"),
    (0x10EFD, 0x10EFF, "M"), (0x1123F, 0x11240, "L"), (0x11241, 0x11241, "M"),
    (0x11B00, 0x11B09, "P"), (0x11F00, 0x11F01, "M"), (0x11F02, 0x11F02, "L"),
    (0x11F03, 0x11F03, "M"), (0x11F04, 0x11F10, "L"), (0x11F12, 0x11F33, "L"),
    (0x11F34, 0x11F3A, "M"), (0x11F3E, 0x11F42, "M"), (0x11F43, 0x11F4F, "P"),
    (0x11F50, 0x11F59, "N"), (0x1342F, 0x1342F, "L"), (0x13439, 0x1343F, "C"),
    (0x13440, 0x13440, "M"), (0x13441, 0x13446, "L"), (0x13447, 0x13455, "M"),
    (0x1B132, 0x1B132, "L"), (0x1B155, 0x1B155, "L"), (0x1D2C0, 0x1D2D3, "N"),
    (0x1DF25, 0x1DF2A, "L"), (0x1E030, 0x1E06D, "L"), (0x1E08F, 0x1E08F, "M"),
    (0x1E4D0, 0x1E4EB, "L"), (0x1E4EC, 0x1E4EF, "M"), (0x1E4F0, 0x1E4F9, "N"),
    (0x1F6DC, 0x1F6DC, "S"), (0x1F774, 0x1F776, "S"), (0x1F77B, 0x1F77F, "S"),
    (0x1F7D9, 0x1F7D9, "S"), (0x1FA75, 0x1FA77, "S"), (0x1FA87, 0x1FA88, "S"),
    (0x1FAAD, 0x1FAAF, "S"), (0x1FABB, 0x1FABD, "S"), (0x1FABF, 0x1FABF, "S"),
    (0x1FACE, 0x1FACF, "S"), (0x1FADA, 0x1FADB, "S"), (0x1FAE8, 0x1FAE8, "S"),
    (0x1FAF7, 0x1FAF8, "S"), (0x2B739, 0x2B739, "L"), (0x2EBF0, 0x2EE5D, "L"),
    (0x31350, 0x323AF, "L"),
]
_NEW_STARTS = [start for start, _, _ in _UNICODE_15_1]


def category(cp: int) -> str:
    """The one-letter Unicode general category of `cp` as llama.cpp's tables have it (L, M, N,
    P, S, Z, C; "Cn" unassigned code points give "U")."""
    i = bisect_right(_NEW_STARTS, cp) - 1
    if i >= 0 and cp <= _UNICODE_15_1[i][1]:
        return _UNICODE_15_1[i][2]
    full = unicodedata.category(chr(cp))
    return "U" if full == "Cn" else full[0]


def is_cjk_ideograph(cp: int) -> bool:
    """llama.cpp's `is_chinese_char`: the CJK ideograph blocks BERT splits one by one (with
    HuggingFace's 0x2B920 for the start of Extension E, where Unicode says 0x2B820)."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F
            or 0x2B920 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def simple_lower(ch: str) -> str:
    """Unicode's simple (one code point) lowercase mapping, llama.cpp's `unicode_tolower`.
    Python's str.lower() is the full mapping; the two differ only where the full one is longer,
    and of those only U+0130 "İ" has a simple mapping ("i")."""
    if ch == "\u0130":
        return "i"
    low = ch.lower()
    return low if len(low) == 1 else ch


def nfd_first(ch: str) -> str:
    """The first code point of `ch`'s canonical decomposition: llama.cpp's
    `unicode_cpts_normalize_nfd`, one code point in, one out."""
    return unicodedata.normalize("NFD", ch)[0]


class WordPieceEncoder:
    """The `FragmentEncoder` of a WordPiece vocabulary (see the module docstring)."""

    def __init__(self, tokens: list[str], *, unk_id: int | None, lowercase: bool,
                 strip_accents: bool) -> None:
        self._ids = _token_ids(tokens)
        self._max_len = max(map(len, self._ids))
        self._unk_id = unk_id
        self._lowercase = lowercase
        self._strip_accents = strip_accents
        # (kind, text to append) of each character met so far: the Unicode look-ups are the
        # costly part of normalizing, and a text repeats few distinct characters.
        self._seen: dict[str, tuple[int, str]] = {}

    # normalizing ---------------------------------------------------------------------------

    def _classify(self, ch: str) -> tuple[int, str]:
        """What llama.cpp's `preprocess` does with the character `ch` (see the module
        docstring): (_WORD, text) appends, (_ALONE, text) is a word of its own, _SPLIT ends the
        word, _DROP vanishes."""
        if self._strip_accents:
            ch = nfd_first(ch)
        cp = ord(ch)
        if cp in _WHITESPACE:
            return _SPLIT, ""
        cat = category(cp)
        if cp == 0 or cp == 0xFFFD or cat == "C":
            return _DROP, ""
        if self._strip_accents and cat == "M":
            return _DROP, ""
        text = simple_lower(ch) if self._lowercase else ch
        if cat == "P" or (cp < 0x7F and cat == "S") or is_cjk_ideograph(cp):
            return _ALONE, text
        return _WORD, text

    def words(self, text: str) -> list[str]:
        """The normalized words of `text`, llama.cpp's `preprocess`."""
        seen = self._seen
        words: list[str] = []
        word: list[str] = []
        for ch in text:
            found = seen.get(ch)
            if found is None:
                found = seen[ch] = self._classify(ch)
            kind, piece = found
            if kind == _WORD:
                word.append(piece)
            elif kind == _SPLIT:
                if word:
                    words.append("".join(word))
                    word = []
            elif kind == _ALONE:
                if word:
                    words.append("".join(word))
                    word = []
                words.append(piece)
        if word:
            words.append("".join(word))
        return words

    # cutting -------------------------------------------------------------------------------

    def _word_ids(self, word: str) -> list[int] | None:
        """The greedy longest-first cut of "▁" + `word`, or None where some place starts no
        piece (llama.cpp then gives the whole word as one unknown token)."""
        ids = self._ids
        text = SPACE + word
        n = len(text)
        out: list[int] = []
        i = 0
        while i < n:
            for j in range(min(n, i + self._max_len), i, -1):
                found = ids.get(text[i:j])
                if found is not None:
                    out.append(found)
                    i = j
                    break
            else:
                return None
        return out

    def encode(self, text: str, *, first: bool = True) -> list[int]:
        """The ids of `text` (a stretch with no special token). `first` changes nothing:
        llama.cpp's WordPiece puts no space prefix anywhere."""
        out: list[int] = []
        for word in self.words(text):
            ids = self._word_ids(word)
            if ids is None:
                if self._unk_id is None:
                    raise TokenizerError(
                        f"WordPiece cannot spell {word!r} and the vocabulary has no unknown "
                        "token ('tokenizer.ggml.unknown_token_id')")
                out.append(self._unk_id)
            else:
                out.extend(ids)
        return out


def _token_ids(tokens: list[str]) -> dict[str, int]:
    """Text -> id of every token. llama.cpp names an empty token "[EMPTY_<id>]" and refuses a
    vocabulary where two tokens have the same text; so does this."""
    ids: dict[str, int] = {}
    for i, text in enumerate(tokens):
        text = text or f"[EMPTY_{i}]"
        other = ids.setdefault(text, i)
        if other != i:
            raise TokenizerError(f"GGUF metadata 'tokenizer.ggml.tokens' has {text!r} twice "
                                 f"(ids {other} and {i})")
    return ids


def build(spec: VocabSpec) -> WordPieceEncoder:
    """The WordPiece encoder of a "bert" vocabulary; `TokenizerError` naming the key when the
    metadata does not describe one."""
    if spec.model != "bert":
        raise TokenizerError(f"GGUF metadata 'tokenizer.ggml.model' is {spec.model!r}, "
                             "not 'bert' (WordPiece)")
    for i, kind in enumerate(spec.token_types):
        if kind == BYTE:
            raise TokenizerError(
                f"GGUF metadata tokenizer.ggml.token_type[{i}] is 6 (byte): llama.cpp cannot "
                "decode a byte token in a WordPiece vocabulary (it aborts at load)")
    metadata = spec.metadata or {}
    lowercase = read_flag(metadata, "tokenizer.ggml.normalizer.lowercase", True)
    strip_accents = read_flag(metadata, "tokenizer.ggml.normalizer.strip_accents", lowercase)
    unk_id = spec.special_ids.get("unk")
    if unk_id is None and len(spec.tokens) > _DEFAULT_UNK:
        unk_id = _DEFAULT_UNK        # llama.cpp's default, kept when inside the vocabulary
    return WordPieceEncoder(spec.tokens, unk_id=unk_id, lowercase=lowercase,
                            strip_accents=strip_accents)
