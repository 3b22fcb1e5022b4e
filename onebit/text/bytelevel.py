"""Byte-level BPE (GGUF `tokenizer.ggml.model` = "gpt2") as a `tokenizers` pipeline.

The merges alone do not define the tokenizer: the text is first cut into words by a
pre-tokenizer, and the merges were learned on those words, so cutting differently gives other
ids. llama.cpp names the cut in `tokenizer.ggml.pre`; the table below maps each name onebit
supports to its split. An unknown name is refused rather than guessed.
"""

from __future__ import annotations

from functools import cache

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

from onebit.text.errors import TokenizerError

# The splits llama.cpp applies for each pre-tokenizer name (llama-vocab.cpp). A name mapped to
# None uses GPT-2's own split, which the ByteLevel pre-tokenizer applies itself.
_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

SPLITS: dict[str, str | None] = {
    "default": None,
    "gpt2": None,
    "gpt-2": None,
    # SmolLM's tokenizer.json cuts digits one by one before GPT-2's split; its merges hold no
    # digit pairs, so GPT-2's split alone yields the same ids (tests/text checks it on the
    # corpus), and that is what transformers' GGUF tokenizer does.
    "smollm": None,
    "llama3": _LLAMA3,
    "llama-v3": _LLAMA3,
    "llama-bpe": _LLAMA3,
    "smaug-bpe": _LLAMA3,
    "dbrx": _LLAMA3,
    "qwen2": _QWEN2,
    "deepseek-r1-qwen": _QWEN2,
}


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


def spell(token: str) -> str:
    """A token in the byte alphabet: llama.cpp stores a few (added ones) as their raw text."""
    alphabet = byte_of_char()
    if all(c in alphabet for c in token):
        return token
    return "".join(byte_alphabet()[b] for b in token.encode("utf-8"))


def token_bytes(token: str) -> bytes:
    """The bytes a byte-level token stands for."""
    alphabet = byte_of_char()
    return bytes(alphabet[c] for c in spell(token))


def build(tokens: list[str], merges: list[str], pre: str | None) -> Tokenizer:
    """The byte-level BPE pipeline: split, bytes to the alphabet, merges; decode back to bytes."""
    name = pre or "default"
    if name not in SPLITS:
        raise TokenizerError(
            f"GGUF metadata 'tokenizer.ggml.pre' is {name!r}: onebit knows {sorted(SPLITS)}"
        )
    vocab: dict[str, int] = {}
    for index, token in enumerate(tokens):
        vocab.setdefault(spell(token), index)   # the first of two equal spellings wins
    pairs = [tuple(m.split(" ")) for m in merges]
    for i, (left, right) in enumerate(pairs):
        if left not in vocab or right not in vocab or left + right not in vocab:
            raise TokenizerError(f"GGUF metadata tokenizer.ggml.merges[{i}] = {left} {right!r} "
                                 "names a token missing from the vocabulary")
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, dropout=None, fuse_unk=False))
    split = SPLITS[name]
    if split is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tok.decoder = decoders.ByteLevel()
    return tok
