"""Read the tokenizer out of a GGUF metadata dict, checking every field before it is used.

The dict maps GGUF keys (`tokenizer.ggml.tokens`, ...) to plain Python values, as the GGUF
reader hands them over. A file is untrusted input: a missing key, a value of the wrong type or a
list whose length disagrees with the vocabulary is a `TokenizerError` naming the key, never an
IndexError deep inside the tokenizer library.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onebit.text.errors import TokenizerError

# llama.cpp's token types (gguf's TokenType): what a token is, which decides whether its text in
# the input is matched whole and whether decode skips it.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# Far above any real vocabulary (the largest are about 260k); refuses a count that would only
# allocate memory before failing.
MAX_VOCAB = 4_000_000
MAX_TOKEN_BYTES = 4096

_PREFIX = "tokenizer.ggml."


@dataclass(frozen=True)
class VocabSpec:
    """Everything a GGUF says about its tokenizer, checked."""

    model: str                       # "gpt2" (byte-level BPE) or "llama" (SentencePiece)
    pre: str | None                  # the pre-tokenizer name, for "gpt2"
    tokens: list[str]
    token_types: list[int]
    merges: list[str] | None
    scores: list[float] | None
    special_ids: dict[str, int] = field(default_factory=dict)   # bos/eos/eot/pad/unk/...
    add_bos: bool = False
    add_eos: bool = False
    add_space_prefix: bool = True
    chat_template: str | None = None


def _get(metadata: dict, key: str, kind, *, required: bool = True, default=None):
    if key not in metadata:
        if required:
            raise TokenizerError(f"GGUF metadata has no {key!r}: the file carries no tokenizer")
        return default
    value = metadata[key]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise TokenizerError(
            f"GGUF metadata {key!r} is {type(value).__name__} {str(value)[:40]!r}, "
            f"expected {getattr(kind, '__name__', kind)}"
        )
    return value


def _string_list(metadata: dict, key: str, *, required: bool) -> list[str] | None:
    values = _get(metadata, key, (list, tuple), required=required)
    if values is None:
        return None
    if len(values) > MAX_VOCAB:
        raise TokenizerError(f"GGUF metadata {key!r} has {len(values)} entries (limit {MAX_VOCAB})")
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise TokenizerError(
                f"GGUF metadata {key}[{i}] is {type(value).__name__}, not a string")
        if len(value) > MAX_TOKEN_BYTES:
            raise TokenizerError(f"GGUF metadata {key}[{i}] is {len(value)} characters long")
    return list(values)


def _number_list(metadata: dict, key: str, kind, n: int, *, required: bool):
    values = _get(metadata, key, (list, tuple), required=required)
    if values is None:
        return None
    if len(values) != n:
        raise TokenizerError(f"GGUF metadata {key!r} has {len(values)} entries for {n} tokens")
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, kind):
            raise TokenizerError(f"GGUF metadata {key}[{i}] is {value!r}, not a number")
    return list(values)


_SPECIAL_KEYS = {
    "bos": "bos_token_id",
    "eos": "eos_token_id",
    "eot": "eot_token_id",
    "eom": "eom_token_id",
    "pad": "padding_token_id",
    "unk": "unknown_token_id",
}


def read_vocab(metadata: dict) -> VocabSpec:
    """The checked `VocabSpec` of a GGUF metadata dict; `TokenizerError` naming the key if not."""
    if not isinstance(metadata, dict):
        raise TokenizerError(f"GGUF metadata must be a dict, got {type(metadata).__name__}")
    model = _get(metadata, _PREFIX + "model", str)
    if model not in ("gpt2", "llama"):
        raise TokenizerError(
            f"GGUF metadata 'tokenizer.ggml.model' is {model!r}: onebit builds 'gpt2' "
            "(byte-level BPE) and 'llama' (SentencePiece)"
        )
    tokens = _string_list(metadata, _PREFIX + "tokens", required=True)
    if not tokens:
        raise TokenizerError("GGUF metadata 'tokenizer.ggml.tokens' is empty")
    n = len(tokens)
    types = _number_list(metadata, _PREFIX + "token_type", int, n, required=False)
    merges = _string_list(metadata, _PREFIX + "merges", required=model == "gpt2")
    for i, merge in enumerate(merges or ()):
        if merge.count(" ") != 1:
            raise TokenizerError(f"GGUF metadata tokenizer.ggml.merges[{i}] is {merge!r}, "
                                 "not two tokens separated by one space")
    scores = _number_list(metadata, _PREFIX + "scores", (int, float), n, required=model == "llama")
    special = {}
    for name, key in _SPECIAL_KEYS.items():
        token_id = _get(metadata, _PREFIX + key, int, required=False)
        if token_id is None:
            continue
        if not 0 <= token_id < n:
            raise TokenizerError(f"GGUF metadata {_PREFIX + key!r} is {token_id}, outside the "
                                 f"vocabulary of {n} tokens")
        special[name] = token_id
    # llama.cpp adds BOS to a SentencePiece vocabulary that does not say otherwise (old files
    # carry no flag), and never to a BPE one unless asked.
    add_bos = _get(metadata, _PREFIX + "add_bos_token", bool, required=False,
                   default=model == "llama")
    add_eos = _get(metadata, _PREFIX + "add_eos_token", bool, required=False, default=False)
    space = _get(metadata, _PREFIX + "add_space_prefix", bool, required=False, default=True)
    template = _get(metadata, "tokenizer.chat_template", str, required=False)
    return VocabSpec(
        model=model,
        pre=_get(metadata, _PREFIX + "pre", str, required=False),
        tokens=tokens,
        token_types=types if types is not None else [NORMAL] * n,
        merges=merges,
        scores=[float(s) for s in scores] if scores is not None else None,
        special_ids=special,
        add_bos=add_bos,
        add_eos=add_eos,
        add_space_prefix=space,
        chat_template=template,
    )
