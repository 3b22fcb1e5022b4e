"""BPE vocabularies (GGUF `tokenizer.ggml.model` "gpt2" and "gemma4") as llama.cpp runs them.

The text is cut into words by the pre-tokenizer its file names (pretokenizers.py), each word is
spelled in GPT-2's byte alphabet (or, for Gemma 4's kind, kept as UTF-8 with spaces as "▁"),
and the merges join adjacent symbols, the lowest-ranked pair first and the leftmost on a tie,
as in HuggingFace's BPE, whose Rust implementation does the merging here. A name onebit does
not know is refused rather than guessed: a wrong cut gives other ids, silently.
"""

from __future__ import annotations

from functools import cache

from tokenizers import Regex, Tokenizer, models, pre_tokenizers

from onebit.text.errors import TokenizerError
from onebit.text.pretokenizers import PRE_TOKENIZERS, REFUSED, PreTokenizer
from onebit.text.sentencepiece import SPACE


@cache
def byte_alphabet() -> dict[int, str]:
    """GPT-2's printable spelling of each byte (the byte-level vocabulary's alphabet)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    spelling = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in spelling:
            spelling[b] = chr(256 + extra)
            extra += 1
    return spelling


@cache
def byte_of_char() -> dict[str, int]:
    return {c: b for b, c in byte_alphabet().items()}


@cache
def _to_bytes_table() -> dict[int, str]:
    """str.translate table: each alphabet character to the Latin-1 character of its byte, and
    every other character below 256 to one that Latin-1 cannot encode, so that a token not
    spelled in the alphabet fails `encode("latin-1")` instead of passing as wrong bytes."""
    table = {ord(c): chr(b) for c, b in byte_of_char().items()}
    for code in range(256):
        table.setdefault(code, "\U0010ffff")
    return table


def token_bytes(token: str) -> bytes:
    """The bytes a byte-level token stands for (a token stored as raw text: its UTF-8)."""
    try:
        return token.translate(_to_bytes_table()).encode("latin-1")
    except UnicodeEncodeError:
        return token.encode("utf-8")


def pre_tokenizer(name: str | None, model: str) -> PreTokenizer:
    """The pre-tokenizer a file names: Gemma 4's for a "gemma4" vocabulary (its files name
    none), llama.cpp's "default" where a BPE file names none."""
    if model == "gemma4":
        name = "gemma4"
    name = name or "default"
    if name in REFUSED:
        raise TokenizerError(f"GGUF metadata 'tokenizer.ggml.pre' is {name!r}: onebit does not "
                             f"build it ({REFUSED[name]})")
    if name not in PRE_TOKENIZERS:
        raise TokenizerError(f"GGUF metadata 'tokenizer.ggml.pre' is {name!r}, a pre-tokenizer "
                             f"onebit does not know; it knows {', '.join(sorted(PRE_TOKENIZERS))}")
    return PRE_TOKENIZERS[name]


class BPEEncoder:
    """The `FragmentEncoder` of a BPE vocabulary."""

    def __init__(self, tokens: list[str], merges: list[str], pre: PreTokenizer):
        self.pre = pre
        # text to id as llama.cpp keeps it (a repeated text names its last id). A token
        # stored as raw text outside the byte alphabet (an added one) never comes out of the
        # merges, which join byte-alphabet symbols; it is matched as a special token or not
        vocab = {t: i for i, t in enumerate(tokens)}
        pairs = []
        for i, merge in enumerate(merges):
            left, right = merge.split(" ")
            if left not in vocab or right not in vocab or left + right not in vocab:
                raise TokenizerError(f"GGUF metadata tokenizer.ggml.merges[{i}] = {merge!r} "
                                     "names a token missing from the vocabulary")
            pairs.append((left, right))
        self._tokenizer = Tokenizer(models.BPE(
            vocab=vocab, merges=pairs, dropout=None, fuse_unk=False,
            byte_fallback=not pre.byte_encode, ignore_merges=pre.ignore_merges))
        steps = [pre_tokenizers.Split(Regex(split), behavior="isolated")
                 for split in pre.splits]
        if pre.byte_encode:
            steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
        self._tokenizer.pre_tokenizer = pre_tokenizers.Sequence(steps)

    def backend_json(self) -> str:
        """The merging pipeline as a tokenizer.json (no special tokens, no decoder)."""
        return self._tokenizer.to_str()

    def encode(self, text: str, *, first: bool) -> list[int]:
        if not self.pre.byte_encode:
            text = text.replace(" ", SPACE)
        return self._tokenizer.encode(text, add_special_tokens=False).ids
