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

# llama.cpp's names for its tokenizer types (`tokenizer.ggml.model`), each with what it is:
MODELS = {
    "gpt2": "byte-level BPE",
    "gemma4": "BPE on raw UTF-8 with SentencePiece spaces (Gemma 4)",
    "llama": "SentencePiece BPE",
    "bert": "WordPiece",
    "t5": "SentencePiece Unigram",
    "rwkv": "RWKV world: escaped byte tokens, longest match",
}
# the types that carry merges, and those that carry scores
_MERGED = ("gpt2", "gemma4")
_SCORED = ("llama", "t5")


@dataclass(frozen=True)
class VocabSpec:
    """Everything a GGUF says about its tokenizer, checked."""

    model: str                       # llama.cpp's tokenizer type: one of MODELS
    pre: str | None                  # the pre-tokenizer name, for the BPE types
    tokens: list[str]
    token_types: list[int]
    merges: list[str] | None
    scores: list[float] | None
    special_ids: dict[str, int] = field(default_factory=dict)   # bos/eos/eot/pad/unk/...
    add_bos: bool | None = None      # None: the file does not say (each type has a default)
    add_eos: bool | None = None
    add_sep: bool | None = None
    add_space_prefix: bool | None = None
    chat_template: str | None = None
    # the whole metadata dict, for the keys only one tokenizer type reads (a T5 vocabulary's
    # precompiled character map); that type's builder checks them itself
    metadata: dict = field(default_factory=dict, repr=False)


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


def read_flag(metadata: dict, key: str, default: bool) -> bool:
    """The boolean `key` of the GGUF metadata, `default` when absent; a TokenizerError naming
    the key when it is not a bool."""
    value = metadata.get(key, default)
    if not isinstance(value, bool):
        raise TokenizerError(f"GGUF metadata {key!r} is {type(value).__name__} "
                             f"{str(value)[:40]!r}, expected bool")
    return value


def _string_list(metadata: dict, key: str, *, required: bool) -> list[str] | None:
    values = _get(metadata, key, (list, tuple), required=required)
    if values is None:
        return None
    if len(values) > MAX_VOCAB:
        raise TokenizerError(f"GGUF metadata {key!r} has {len(values)} entries (limit {MAX_VOCAB})")
    # the check in C first (a 262k vocabulary in milliseconds), the element named only when
    # it fails
    if set(map(type, values)) <= {str} and max(map(len, values), default=0) <= MAX_TOKEN_BYTES:
        return list(values)
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
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if set(map(type, values)) <= set(kinds):     # exact types: a bool is not an int here
        return list(values)
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
    "sep": "seperator_token_id",     # sic: GGUF's spelling
    "cls": "cls_token_id",
    "mask": "mask_token_id",
}


def read_vocab(metadata: dict) -> VocabSpec:
    """The checked `VocabSpec` of a GGUF metadata dict; `TokenizerError` naming the key if not."""
    if not isinstance(metadata, dict):
        raise TokenizerError(f"GGUF metadata must be a dict, got {type(metadata).__name__}")
    model = _get(metadata, _PREFIX + "model", str)
    if model not in MODELS:
        known = ", ".join(f"{name!r} ({what})" for name, what in MODELS.items())
        raise TokenizerError(
            f"GGUF metadata 'tokenizer.ggml.model' is {model!r}: onebit builds {known}")
    tokens = _string_list(metadata, _PREFIX + "tokens", required=True)
    if not tokens:
        raise TokenizerError("GGUF metadata 'tokenizer.ggml.tokens' is empty")
    # llama.cpp names an empty token by its id, and refuses a file with a text twice
    tokens = [text or f"[EMPTY_{i}]" for i, text in enumerate(tokens)]
    if len(set(tokens)) != len(tokens):
        seen: dict[str, int] = {}
        for i, text in enumerate(tokens):
            if text in seen:
                raise TokenizerError(f"GGUF metadata 'tokenizer.ggml.tokens' holds {text!r} "
                                     f"twice, at {seen[text]} and {i}")
            seen[text] = i
    n = len(tokens)
    types = _number_list(metadata, _PREFIX + "token_type", int, n, required=False)
    merges = _string_list(metadata, _PREFIX + "merges", required=model in _MERGED)
    for i, merge in enumerate(merges or ()):
        if merge.count(" ") != 1:
            raise TokenizerError(f"GGUF metadata tokenizer.ggml.merges[{i}] is {merge!r}, "
                                 "not two tokens separated by one space")
    scores = _number_list(metadata, _PREFIX + "scores", (int, float), n, required=model in _SCORED)
    special = {}
    for name, key in _SPECIAL_KEYS.items():
        token_id = _get(metadata, _PREFIX + key, int, required=False)
        if token_id is None:
            continue
        if not 0 <= token_id < n:
            raise TokenizerError(f"GGUF metadata {_PREFIX + key!r} is {token_id}, outside the "
                                 f"vocabulary of {n} tokens")
        special[name] = token_id
    # None where the file does not say: each type has its own default (tokenizer.py)
    add_bos = _get(metadata, _PREFIX + "add_bos_token", bool, required=False)
    add_eos = _get(metadata, _PREFIX + "add_eos_token", bool, required=False)
    add_sep = _get(metadata, _PREFIX + "add_sep_token", bool, required=False)
    space = _get(metadata, _PREFIX + "add_space_prefix", bool, required=False)
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
        add_sep=add_sep,
        add_space_prefix=space,
        chat_template=template,
        metadata=metadata,
    )
