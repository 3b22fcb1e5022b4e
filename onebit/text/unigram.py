"""SentencePiece Unigram (GGUF `tokenizer.ggml.model` = "t5"), as llama.cpp runs it.

The reference is llama.cpp's `llm_tokenizer_ugm` / `llm_tokenizer_ugm_session`
(src/llama-vocab.cpp, build 11434). Encoding a stretch of text is two steps, both on its UTF-8
bytes, as llama.cpp does them:

1. Normalize (`Normalizer`). From each place in the text, the first of these that applies:
   - if the text there starts like a user-defined token, the longest such start is kept as it
     is. (llama.cpp walks a trie of the user-defined tokens and takes the depth it reached,
     whether or not a whole token ends there; so does this);
   - else the longest key of the precompiled character map (`CharsMap`, SentencePiece's
     compiled normalization rules, e.g. NFKC) found there is replaced by its replacement;
   - else one UTF-8 character is kept (an invalid byte becomes U+FFFD).
   Then spaces: every " " is written "▁"; with `tokenizer.ggml.add_space_prefix` a "▁" goes
   before the first non-space character; with `tokenizer.ggml.remove_extra_whitespaces` spaces
   at both ends are dropped and each run of them inside is one "▁" (and every word then starts
   with "▁", the first included, whatever add_space_prefix says). llama.cpp has no GGUF key
   for SentencePiece's escape_whitespaces (always on) or treat_whitespace_as_suffix (off).
2. Segment (`UnigramEncoder._viterbi`): the segmentation into pieces with the highest sum of
   piece scores, found by dynamic programming over the normalized bytes, stepping one UTF-8
   character at a time. Pieces are the normal, user-defined (score 0) and unused tokens. A
   character where no single-character piece starts may also be the unknown token, at the
   lowest normal score minus 10. On equal sums the segmentation whose last piece starts first
   wins. Consecutive unknown tokens are merged into one.

Sums are doubles over the 32-bit scores, the unknown penalty 32-bit arithmetic, as in llama.cpp
(so the result matches HuggingFace's SentencePiece-based tokenizer too).

llama.cpp puts the space prefix before every stretch of text (the text between special tokens),
not only the first: `first` changes nothing here.

The character map is file data. Every index into it is checked: a map whose header, trie or
replacement strings point outside it is a `TokenizerError` naming
`tokenizer.ggml.precompiled_charsmap`, at build time for the header, at encode time for a trie
node or replacement the text leads to (as llama.cpp, which throws there; the walk is one step
per input byte, so no map can make it loop).
"""

from __future__ import annotations

import re
import sys
from array import array
from itertools import chain

import numpy as np

from onebit.text.errors import TokenizerError
from onebit.text.metadata import NORMAL, UNUSED, USER_DEFINED, VocabSpec, read_flag

SPACE = "\u2581".encode()
_REPLACEMENT_CHAR = "\ufffd".encode()
_DEFAULT_UNK = 2             # llama.cpp's default unknown id for a "t5" vocabulary
_UNKNOWN_PENALTY = np.float32(10.0)
_LOWEST = -sys.float_info.max
CHARSMAP_KEY = "tokenizer.ggml.precompiled_charsmap"
MAX_CHARSMAP_BYTES = 64 * 1024 * 1024     # real maps are about 240 kB
# Pieces up to this many bytes are looked up directly; longer ones through the table of the
# lengths of the pieces that start with the same bytes (see UnigramEncoder.__init__).
_SHORT = 3
_SHORT_LENGTHS = tuple(range(1, _SHORT + 1))

# The number of bytes llama.cpp's `unicode_len_utf8` gives a UTF-8 sequence from its first byte
# (a continuation byte counts as one).
_UTF8_LEN = bytes(1 if b < 0xC0 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4 for b in range(256))


def _bad_map(why: str) -> TokenizerError:
    return TokenizerError(f"GGUF metadata {CHARSMAP_KEY!r} is damaged: {why}")


def _utf8_char(data: bytes, i: int) -> int:
    """The length of the UTF-8 character at `data[i]`, 0 where llama.cpp's
    `unicode_cpt_from_utf8` refuses it (a stray continuation byte, a cut sequence, a lead byte
    of 0xF8 and up). Like llama.cpp it checks the continuation bytes only, not overlong forms
    or surrogates."""
    lead = data[i]
    if lead < 0x80:
        return 1
    if lead < 0xC0 or lead >= 0xF8:
        return 0
    width = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    if i + width > len(data):
        return 0
    for k in range(i + 1, i + width):
        if data[k] & 0xC0 != 0x80:
            return 0
    return width


class CharsMap:
    """SentencePiece's precompiled character map, as llama.cpp reads it.

    Layout: a little-endian uint32 `n`, then `n` bytes of trie (an XOR-compressed compact double
    array: 32-bit nodes, the child of node s for byte c at s ^ BASE[s] ^ c), then NUL-terminated
    replacement strings, which the trie's leaves index by offset. A node packs BASE in bits
    10-30 (shifted left by 8 more when bit 9 is set), LEAF in bit 8, and LCHECK (the byte that
    leads to it) in bits 0-7; a value node has bit 31 set and the offset in bits 0-30."""

    def __init__(self, data: bytes) -> None:
        if len(data) < 4:
            raise _bad_map(f"{len(data)} bytes, too short for its 4-byte header")
        blob = int.from_bytes(data[:4], "little")
        if blob + 4 >= len(data):
            raise _bad_map(f"the header declares {blob} bytes of trie, but the map has "
                           f"{len(data) - 4} bytes after it and needs replacement strings too")
        nodes = array("I")
        if nodes.itemsize != 4:              # never on the platforms numpy supports
            nodes = array("L")
        nodes.frombytes(data[4:4 + blob - blob % 4])
        if sys.byteorder == "big":
            nodes.byteswap()
        self._nodes = nodes
        self._replacements = data[4 + blob:]
        self._cache: dict[int, bytes] = {}
        self._root = self._base(0) if nodes else 0

    def _node(self, index: int) -> int:
        if index >= len(self._nodes):
            raise _bad_map(f"a trie link points at node {index} of {len(self._nodes)}")
        return self._nodes[index]

    def _base(self, index: int) -> int:
        packed = self._node(index)
        return (packed >> 10) << ((packed & 0x200) >> 6)

    def ascii_plain(self, byte: int) -> str | None:
        """Whether the ASCII `byte` is kept as it is wherever it stands ("always"), only where
        an ASCII byte or the end follows it ("before ascii": all keys that start with it go on
        with a non-ASCII byte, as "A" + U+030A -> "Å"), or may start a key (None; also where
        the trie is damaged there, so that the walk meets the damage and reports it)."""
        nodes = self._nodes
        if not nodes or byte == 0:
            return "always"
        index = self._root ^ byte
        if index >= len(nodes):
            return None
        packed = nodes[index]
        if packed & 0x800000FF != byte:
            return "always"
        if packed & 0x100:                        # the byte alone is a key
            return None
        index ^= (packed >> 10) << ((packed & 0x200) >> 6)
        for follow in range(1, 0x80):
            child = index ^ follow
            if child >= len(nodes) or nodes[child] & 0x800000FF == follow:
                return None
        return "before ascii"

    def longest(self, data: bytes, start: int) -> tuple[int, bytes]:
        """(length, replacement) of the longest key at `data[start:]`; (0, b"") if none."""
        if not self._nodes:
            return 0, b""
        index = self._root
        found, offset = 0, 0
        for pos in range(start, len(data)):
            byte = data[pos]
            if byte == 0:
                break
            index ^= byte
            packed = self._node(index)
            if packed & 0x800000FF != byte:      # LCHECK (a value node never matches)
                break
            index ^= (packed >> 10) << ((packed & 0x200) >> 6)
            if packed & 0x100:                   # LEAF: BASE leads to the value node
                found = pos - start + 1
                offset = self._node(index) & 0x7FFFFFFF
        if not found:
            return 0, b""
        return found, self._replacement(offset)

    def _replacement(self, offset: int) -> bytes:
        text = self._cache.get(offset)
        if text is None:
            if offset >= len(self._replacements):
                raise _bad_map(f"a replacement offset {offset} is past the "
                               f"{len(self._replacements)} bytes of strings")
            end = self._replacements.find(b"\0", offset)
            if end < 0:
                raise _bad_map(f"the replacement string at offset {offset} has no NUL end")
            text = self._cache[offset] = bytes(self._replacements[offset:end])
        return text


def read_charsmap(metadata: dict) -> CharsMap | None:
    """The checked character map of the metadata, None when it has none. GGUF stores it as an
    array of uint8 or int8 (the reader hands over a list of ints); bytes are accepted too."""
    value = metadata.get(CHARSMAP_KEY)
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
    elif isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype in (np.uint8, np.int8):
        data = value.view(np.uint8).tobytes()
    elif isinstance(value, list | tuple):
        if len(value) > MAX_CHARSMAP_BYTES:
            raise TokenizerError(f"GGUF metadata {CHARSMAP_KEY!r} has {len(value)} bytes "
                                 f"(limit {MAX_CHARSMAP_BYTES})")
        try:
            if bool in set(map(type, value)):    # bytes() would take True for 1
                raise TypeError
            data = bytes(value)                  # uint8: the common case, in one C call
        except (TypeError, ValueError):
            for i, item in enumerate(value):
                if isinstance(item, bool) or not isinstance(item, int) \
                        or not -128 <= item <= 255:
                    raise TokenizerError(f"GGUF metadata {CHARSMAP_KEY}[{i}] is {item!r}, "
                                         "not a byte") from None
            data = bytes(item & 0xFF for item in value)      # int8
    else:
        raise TokenizerError(f"GGUF metadata {CHARSMAP_KEY!r} is {type(value).__name__}, "
                             "expected an array of bytes")
    if len(data) > MAX_CHARSMAP_BYTES:
        raise TokenizerError(f"GGUF metadata {CHARSMAP_KEY!r} has {len(data)} bytes "
                             f"(limit {MAX_CHARSMAP_BYTES})")
    return CharsMap(data)


class Normalizer:
    """Step 1 of the module docstring: text -> normalized UTF-8 bytes with "▁" for spaces."""

    def __init__(self, charsmap: CharsMap | None, user_defined: list[bytes], *,
                 add_space_prefix: bool, remove_extra_whitespaces: bool) -> None:
        self._charsmap = charsmap
        # every start of a user-defined token: llama.cpp's trie of them, walked as deep as the
        # text follows it
        self._user_starts = {text[:k] for text in user_defined for k in range(1, len(text) + 1)}
        self._prefix = add_space_prefix
        self._merge = remove_extra_whitespaces
        # A run of ASCII bytes that start no map key and no user-defined token is kept as it
        # is, in one regex step; every other place takes the full path of `__call__`.
        always, before_ascii = [], []
        for byte in range(0x80):
            if bytes([byte]) in self._user_starts:
                continue
            kind = charsmap.ascii_plain(byte) if charsmap is not None else "always"
            if kind == "always":
                always.append(byte)
            elif kind == "before ascii":
                before_ascii.append(byte)
        parts = []
        if always:
            parts.append(b"[" + b"".join(re.escape(bytes([b])) for b in always) + b"]")
        if before_ascii:
            parts.append(b"[" + b"".join(re.escape(bytes([b])) for b in before_ascii)
                         + rb"](?=[\x00-\x7f]|\Z)")
        self._plain = re.compile(b"(?:" + b"|".join(parts) + b")+") if parts else None

    def _user_prefix(self, data: bytes, start: int) -> int:
        depth = 0
        while start + depth < len(data) and data[start:start + depth + 1] in self._user_starts:
            depth += 1
        return depth

    def __call__(self, text: str) -> bytes:
        data = text.encode("utf-8", "surrogatepass")
        out = bytearray()
        i, n = 0, len(data)
        plain, charsmap, users = self._plain, self._charsmap, self._user_starts
        while i < n:
            if plain is not None:
                run = plain.match(data, i)
                if run is not None:
                    out += run.group()
                    i = run.end()
                    continue
            if users:
                depth = self._user_prefix(data, i)
                if depth:
                    out += data[i:i + depth]
                    i += depth
                    continue
            if charsmap is not None:
                found, replacement = charsmap.longest(data, i)
                if found:
                    out += replacement
                    i += found
                    continue
            width = _utf8_char(data, i)
            if width:
                out += data[i:i + width]
                i += width
            else:
                out += _REPLACEMENT_CHAR
                i += 1
        return self._spaces(bytes(out))

    def _spaces(self, raw: bytes) -> bytes:
        if self._merge:
            return b"".join(SPACE + word for word in raw.split(b" ") if word)
        escaped = raw.replace(b" ", SPACE)
        leading = len(raw) - len(raw.lstrip(b" "))
        if self._prefix and leading < len(raw):
            cut = leading * len(SPACE)
            escaped = escaped[:cut] + SPACE + escaped[cut:]
        return escaped


class UnigramEncoder:
    """The `FragmentEncoder` of a Unigram vocabulary (see the module docstring)."""

    def __init__(self, tokens: list[str], types: list[int], scores: list[float], *,
                 unk_id: int | None, normalizer: Normalizer) -> None:
        self._normalize = normalizer
        self._unk_id = -1 if unk_id is None else unk_id
        scores32 = _float32(scores)
        normal = scores32[np.asarray(types) == NORMAL]
        normal = normal[~np.isnan(normal)]       # std::min, as llama.cpp takes it, skips NaN
        lowest = normal.min() if normal.size else np.float32(np.finfo(np.float32).max)
        with np.errstate(over="ignore"):
            self._unk_score = float(np.float32(lowest - _UNKNOWN_PENALTY))
        score_list = scores32.tolist()
        # piece bytes -> (id, score), and for pieces longer than _SHORT bytes: their first
        # _SHORT + 1 bytes -> the sorted lengths of the pieces that start so
        pieces: dict[bytes, tuple[int, float]] = {}
        longer: dict[bytes, set[int]] = {}
        for i, (text, kind) in enumerate(zip(tokens, types, strict=True)):
            if kind not in (NORMAL, USER_DEFINED, UNUSED):
                continue
            key = (text or f"[EMPTY_{i}]").encode("utf-8", "surrogatepass")
            pieces[key] = (i, 0.0 if kind == USER_DEFINED else score_list[i])
            if len(key) > _SHORT:
                longer.setdefault(key[:_SHORT + 1], set()).add(len(key))
        self._pieces = pieces
        self._longer = {start: sorted(lengths) for start, lengths in longer.items()}

    def _viterbi(self, norm: bytes) -> list[int]:
        """The best-scoring segmentation of the normalized bytes (module docstring, step 2)."""
        n = len(norm)
        pieces, longer, unk = self._pieces, self._longer, self._unk_id
        unk_score = self._unk_score
        best = [_LOWEST] * (n + 1)       # best sum of a segmentation of norm[:e] ...
        piece = [unk] * (n + 1)          # ... its last piece ...
        begin = [0] * (n + 1)            # ... and where that piece starts
        best[0] = 0.0
        i = 0
        while i < n:
            width = _UTF8_LEN[norm[i]]
            if i + width > n:
                width = n - i
            here = best[i]
            whole_char = False
            # every piece that norm[i:] starts with: the short ones looked up one by one, the
            # longer ones by the lengths of the pieces that start with the same bytes
            for length in chain(_SHORT_LENGTHS, longer.get(norm[i:i + _SHORT + 1], ())):
                end = i + length
                if end > n:
                    break
                found = pieces.get(norm[i:end])
                if found is not None:
                    if length == width:
                        whole_char = True
                    score = here + found[1]
                    if score > best[end]:
                        best[end], piece[end], begin[end] = score, found[0], i
            if not whole_char:
                end = i + width
                score = here + unk_score
                if score > best[end]:
                    best[end], piece[end], begin[end] = score, unk, i
            i += width
        out: list[int] = []
        end, after_unknown = n, False
        while True:
            token = piece[end]
            unknown = token == unk
            if not (unknown and after_unknown):
                out.append(token)
            if begin[end] == 0:
                break
            after_unknown = unknown
            end = begin[end]
        out.reverse()
        return out

    def normalize(self, text: str) -> str:
        """The normalized text the segmentation runs on (for tests and debugging; a damaged
        map's bytes that are not UTF-8 come out backslash-escaped)."""
        return self._normalize(text).decode("utf-8", "backslashreplace")

    def encode(self, text: str, *, first: bool = True) -> list[int]:
        """The ids of `text` (a stretch with no special token); `first` changes nothing."""
        norm = self._normalize(text)
        if not norm:
            return []
        ids = self._viterbi(norm)
        if self._unk_id < 0 and -1 in ids:
            raise TokenizerError(
                f"Unigram cannot spell {text[:40]!r} and the vocabulary has no unknown token "
                "('tokenizer.ggml.unknown_token_id')")
        return ids


def _float32(scores: list[float]) -> np.ndarray:
    """The scores as the 32-bit floats llama.cpp keeps."""
    wide = np.asarray(scores, dtype=np.float64)
    finite = wide[np.isfinite(wide)]
    if finite.size and np.abs(finite).max() > np.finfo(np.float32).max:
        raise TokenizerError("GGUF metadata 'tokenizer.ggml.scores' holds a value outside the "
                             "32-bit float range")
    return wide.astype(np.float32)


def build(spec: VocabSpec) -> UnigramEncoder:
    """The Unigram encoder of a "t5" vocabulary; `TokenizerError` naming the key when the
    metadata does not describe one."""
    if spec.model != "t5":
        raise TokenizerError(f"GGUF metadata 'tokenizer.ggml.model' is {spec.model!r}, "
                             "not 't5' (Unigram)")
    if spec.scores is None:
        raise TokenizerError("GGUF metadata has no 'tokenizer.ggml.scores': a Unigram "
                             "vocabulary needs them")
    n = len(spec.tokens)
    if len(spec.token_types) != n or len(spec.scores) != n:
        raise TokenizerError(f"GGUF metadata 'tokenizer.ggml.token_type' / 'scores' have "
                             f"{len(spec.token_types)} / {len(spec.scores)} entries for {n} "
                             "tokens")
    texts = spec.tokens     # read_vocab named empty tokens and refused repeated ones
    metadata = spec.metadata or {}
    # llama.cpp's defaults for a "t5" vocabulary: no space prefix unless the file asks, no
    # merging of spaces
    add_space_prefix = bool(spec.add_space_prefix)     # None: the file does not say
    normalizer = Normalizer(
        read_charsmap(metadata),
        [t.encode("utf-8", "surrogatepass") for t, kind in zip(texts, spec.token_types, strict=True)
         if kind == USER_DEFINED],
        add_space_prefix=add_space_prefix,
        remove_extra_whitespaces=read_flag(metadata, "tokenizer.ggml.remove_extra_whitespaces",
                                           False))
    unk_id = spec.special_ids.get("unk")
    if unk_id is None and n > _DEFAULT_UNK:
        unk_id = _DEFAULT_UNK
    return UnigramEncoder(texts, spec.token_types, spec.scores, unk_id=unk_id,
                          normalizer=normalizer)
