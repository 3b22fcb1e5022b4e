"""RWKV "world" (GGUF `tokenizer.ggml.model` = "rwkv"), as llama.cpp runs it.

The reference is llama.cpp's `llm_tokenizer_rwkv` / `llm_tokenizer_rwkv_session` and
`llama_unescape_rwkv_token` (src/llama-vocab.cpp, build 11434).

A token may be any string of bytes, and GGUF stores text, so each token is stored escaped, the
way Python prints bytes (llama.cpp's converter writes `repr(token)[2:-1]`): `\\t`, `\\n`, `\\r`,
`\\xNN` (two lowercase hex digits) and a backslash before any other character for that
character (`\\\\`, `\\'`); every other character stands for its own UTF-8 bytes. Unescaping is
done once, at build; an escape llama.cpp would read as a wrong byte or drop silently (a
trailing `\\`, `\\x` without two lowercase hex digits after it) is a `TokenizerError` naming
`tokenizer.ggml.tokens[i]`.

Encoding a stretch of text works on its UTF-8 bytes: from the first byte on, the longest token
whose bytes the text starts with there is taken, and the rest of the text is cut alike. Every
token is a candidate, whatever its type: an unused `[PAD65530]` or a control `<s>` typed into
the text with special tokens off is that token. No space prefix, no normalisation; `first`
changes nothing. Two tokens with the same bytes (`ab` and `\\x61\\x62`): the later id is the
one matched, as llama.cpp's trie keeps the last id written into it.

A byte where no token starts is the unknown token (`tokenizer.ggml.unknown_token_id`), and the
cut goes on at the next byte. The world vocabulary has every single byte as a token, so only a
made vocabulary meets this. There llama.cpp differs in two places that onebit does not copy:

- a vocabulary without an unknown token: llama.cpp puts -1 (LLAMA_TOKEN_NULL) in the ids, which
  its `llama_decode` then refuses ("invalid token"); onebit refuses the text at once, with a
  `TokenizerError`;
- a byte that starts some longer token but is no token itself, where the text does not go on
  into any token ("a" of "ac" with only "ab" in the vocabulary): llama.cpp's session restarts
  the stretch from its start, forever (it appends token 0 until memory runs out). onebit takes
  that byte as one it has no token for.

A file is untrusted input, and the matcher keeps every start of every token (a dict lookup per
byte of the text, no Python object per trie node), which costs the square of a token's length:
a token longer than MAX_RWKV_TOKEN_BYTES (eight times the world vocabulary's longest, 128) or
a vocabulary whose token starts come to more than MAX_PREFIX_BYTES (the world vocabulary's:
1.2 MB) is a `TokenizerError` naming `tokenizer.ggml.tokens`, where llama.cpp would build its
trie whatever the size.

Decoding gives each token's unescaped bytes (llama.cpp's `token_to_piece` for RWKV), whatever
its type. llama.cpp adds no BOS or EOS to RWKV ids, whatever the file says (tokenizer.py).
"""

from __future__ import annotations

import codecs
import re

from onebit.text.errors import TokenizerError
from onebit.text.metadata import MAX_TOKEN_BYTES, VocabSpec

_KEY = "tokenizer.ggml.tokens"
_NOT_A_NODE = -1          # a prefix of some token that is no token itself
MAX_RWKV_TOKEN_BYTES = 1024
MAX_PREFIX_BYTES = 64 * 1024 * 1024

# A backslash and what it escapes: "x" and two lowercase hex digits, or any one byte (an empty
# match: the text ends on the backslash; a lone "x": a \x without its two digits)
_ESCAPE = re.compile(rb"\\(x[0-9a-f]{2}|.?)", re.DOTALL)
_UNESCAPED = {bytes([b]): bytes([b]) for b in range(256) if b != ord("x")}
_UNESCAPED.update({b"t": b"\t", b"n": b"\n", b"r": b"\r"})
_UNESCAPED.update({b"x%02x" % b: bytes([b]) for b in range(256)})
# A backslash not followed by one of the escapes the converter writes. Where there is none,
# Python's own escape decoder (C speed) reads the token exactly as llama.cpp does.
_UNCOMMON = re.compile(rb"""\\(?![tnr\\'"]|x[0-9a-f]{2})""")


def unescape(text: str, index: int = 0) -> bytes:
    """The bytes of token `index` stored as `text` (see the module docstring);
    `TokenizerError` naming the token when an escape in it is malformed."""
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" not in data:
        return data
    if not _UNCOMMON.search(data):
        return codecs.escape_decode(data)[0]
    try:
        return _ESCAPE.sub(lambda m: _UNESCAPED[m.group(1)], data)
    except KeyError:
        at = next(m.start() for m in _ESCAPE.finditer(data) if m.group(1) not in _UNESCAPED)
        if at == len(data) - 1:
            why = "ends in a lone backslash"
        else:
            bad = data[at:at + 4].decode("utf-8", "backslashreplace")
            why = f"has {bad!r}, where \\x needs two lowercase hex digits"
        raise TokenizerError(f"GGUF metadata {_KEY}[{index}] is {text[:40]!r}: it {why} "
                             "(llama.cpp would read other bytes, or none)") from None


def token_bytes(tokens: list[str]) -> list[bytes]:
    """The unescaped bytes of every token, checked (`unescape`)."""
    out = []
    for i, text in enumerate(tokens):
        if len(text) > MAX_TOKEN_BYTES:
            raise TokenizerError(f"GGUF metadata {_KEY}[{i}] is {len(text)} characters long "
                                 f"(limit {MAX_TOKEN_BYTES})")
        data = unescape(text, i)
        if len(data) > MAX_RWKV_TOKEN_BYTES:
            raise TokenizerError(f"GGUF metadata {_KEY}[{i}] is {len(data)} bytes long (limit "
                                 f"{MAX_RWKV_TOKEN_BYTES}; RWKV world's longest token is 128)")
        out.append(data)
    return out


class RWKVEncoder:
    """The `FragmentEncoder` of an RWKV vocabulary (see the module docstring)."""

    def __init__(self, pieces: list[bytes], *, unk_id: int | None) -> None:
        starts = sum(len(piece) * (len(piece) - 1) // 2 for piece in pieces)
        if starts > MAX_PREFIX_BYTES:
            longest = max(range(len(pieces)), key=lambda i: len(pieces[i]))
            raise TokenizerError(
                f"GGUF metadata {_KEY!r}: the starts of its tokens come to {starts} bytes "
                f"(limit {MAX_PREFIX_BYTES}; RWKV world's: 1.2 MB); the longest token is "
                f"[{longest}], {len(pieces[longest])} bytes")
        self.pieces = pieces
        self._unk_id = unk_id
        # The trie as one flat dict: every shorter start of a token -> _NOT_A_NODE, then every
        # token's bytes -> its id (in id order: of two tokens with the same bytes the later id
        # stays). A walk goes on while the text read so far is a key.
        nodes = dict.fromkeys({piece[:end] for piece in pieces for end in range(1, len(piece))},
                              _NOT_A_NODE)
        nodes.update((piece, token_id) for token_id, piece in enumerate(pieces) if piece)
        self._nodes = nodes

    def encode(self, text: str, *, first: bool = True) -> list[int]:
        """The ids of `text` (a stretch with no special token); `first` changes nothing."""
        data = text.encode("utf-8", "surrogatepass")
        nodes = self._nodes
        n = len(data)
        out: list[int] = []
        start = 0
        while start < n:
            found, end = _NOT_A_NODE, start + 1
            stop = start + 1
            while stop <= n:
                token_id = nodes.get(data[start:stop])
                if token_id is None:
                    break
                if token_id != _NOT_A_NODE:
                    found, end = token_id, stop
                stop += 1
            if found == _NOT_A_NODE:
                found = self._unknown(data, start)
            out.append(found)
            start = end
        return out

    def _unknown(self, data: bytes, at: int) -> int:
        if self._unk_id is None:
            raise TokenizerError(
                f"RWKV vocabulary has no token for byte 0x{data[at]:02x} (at byte {at} of "
                f"{data[max(0, at - 20):at + 20]!r}) and no unknown token "
                "('tokenizer.ggml.unknown_token_id'); llama.cpp would give the id -1")
        return self._unk_id


def build(spec: VocabSpec) -> RWKVEncoder:
    """The encoder of an "rwkv" vocabulary; `TokenizerError` naming the key when the metadata
    does not describe one."""
    if spec.model != "rwkv":
        raise TokenizerError(f"GGUF metadata 'tokenizer.ggml.model' is {spec.model!r}, "
                             "not 'rwkv' (RWKV world)")
    # llama.cpp names an empty token "[EMPTY_<id>]" (read_vocab does too)
    tokens = [text or f"[EMPTY_{i}]" for i, text in enumerate(spec.tokens)]
    return RWKVEncoder(token_bytes(tokens), unk_id=spec.special_ids.get("unk"))
