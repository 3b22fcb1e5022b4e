"""Cutting special tokens out of text before the vocabulary's own algorithm sees it.

llama.cpp does this first (llama-vocab.cpp, `tokenizer_st_partition`): every token of type
CONTROL, USER_DEFINED or UNKNOWN is looked for in the text, the longest texts first, and each
occurrence becomes that token; what lies between stays text for the next, shorter token. With
`parse_special` off, CONTROL and UNKNOWN tokens are not looked for (`<|im_start|>` typed by a
user stays text) but USER_DEFINED ones still are, as in HuggingFace's tokenizers. A token may
also eat the whitespace beside it (LSTRIP / RSTRIP), which llama.cpp decides per model family
from the file's names, since GGUF carries no such attribute.

The order matters and is llama.cpp's, not a regex alternation's: in "xabc" with special tokens
"abc" and "xa", the longer "abc" is cut out first, so "xa" is never found, where an alternation
scanning left to right would take "xa".
"""

from __future__ import annotations

from dataclasses import dataclass

from onebit.text.metadata import (
    BYTE,
    CONTROL,
    NORMAL,
    UNKNOWN,
    UNUSED,
    USER_DEFINED,
    VocabSpec,
)

# C's isspace in the "C" locale: what llama.cpp strips beside an LSTRIP / RSTRIP token
_C_SPACE = " \t\n\v\f\r"

# llama.cpp's token attributes (llama.h, llama_token_attr): a token may have several
ATTR_UNKNOWN, ATTR_UNUSED, ATTR_NORMAL, ATTR_CONTROL, ATTR_USER_DEFINED, ATTR_BYTE = (
    1, 2, 4, 8, 16, 32)
_ATTR_OF_TYPE = {UNKNOWN: ATTR_UNKNOWN, UNUSED: ATTR_UNUSED, NORMAL: ATTR_NORMAL,
                 CONTROL: ATTR_CONTROL, USER_DEFINED: ATTR_USER_DEFINED, BYTE: ATTR_BYTE}

# llama.cpp also decides by text which tokens are control tokens, since converted files often
# type them NORMAL (llama-vocab.cpp, "auto-detect special tokens by text"): the texts that end
# a generation, and the fill-in-the-middle markers of a file that names no FIM ids
_END_TEXTS = (
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
    "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>", "[e~[",
)
_FIM_TEXTS = {
    "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                "<\uff5cfim\u2581begin\uff5c>", "<PRE>", "\u2581<PRE>", "<|code_prefix|>",
                "<|prefix|>"),
    "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                "<\uff5cfim\u2581hole\uff5c>", "<SUF>", "\u2581<SUF>", "<|code_suffix|>",
                "<|suffix|>"),
    "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                "<\uff5cfim\u2581end\uff5c>", "<MID>", "\u2581<MID>", "<|code_middle|>",
                "<|middle|>"),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}
_FIM_KEYS = {"fim_pre": ("fim_pre_token_id", "prefix_token_id"),
             "fim_suf": ("fim_suf_token_id", "suffix_token_id"),
             "fim_mid": ("fim_mid_token_id", "middle_token_id"),
             "fim_pad": ("fim_pad_token_id",), "fim_rep": ("fim_rep_token_id",),
             "fim_sep": ("fim_sep_token_id",)}
# gpt-oss's channel markers are CONTROL in its files but are text the model reads and writes;
# llama.cpp makes them USER_DEFINED, so they are matched (and printed) always
_ALWAYS_PARSED = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")


def token_attributes(spec: VocabSpec) -> list[int]:
    """Each token's llama.cpp attributes: its type from the file, then llama.cpp's overrides
    by text (llama-vocab.cpp, `load`, in the same order)."""
    attrs = [_ATTR_OF_TYPE.get(kind, 0) for kind in spec.token_types]
    index = {text: i for i, text in enumerate(spec.tokens)}

    def control(texts) -> None:
        for text in texts:
            if text in index:
                attrs[index[text]] |= ATTR_CONTROL

    # llama.cpp takes the first FIM text its hash map yields as the id and marks that one;
    # a file holding two spellings of one marker is not known, so all are marked here
    for name, texts in _FIM_TEXTS.items():
        if not any("tokenizer.ggml." + key in spec.metadata for key in _FIM_KEYS[name]):
            control(texts)
    control(_END_TEXTS)
    for text in _ALWAYS_PARSED:
        if text in index:
            attrs[index[text]] = ATTR_USER_DEFINED
    # harmony (gpt-oss) and Solar Open end a message with <|end|> and a turn with
    # <|return|> / <|call|>: there <|end|> is text the model writes, not an end
    has = set(_END_TEXTS).intersection(index)
    if "<|end|>" in has and ({"<|return|>", "<|call|>"} <= has
                             or {"<|calls|>", "<|flush|>"} <= has):
        attrs[index["<|end|>"]] = ATTR_USER_DEFINED
    # Gemma 4 (and PLaMo) spell a normal word "</s>"
    if "</s>" in index and ("<|tool_response>" in index or "<|plamo:eos|>" in index):
        attrs[index["</s>"]] = ATTR_NORMAL
    return attrs


@dataclass(frozen=True)
class SpecialToken:
    id: int
    text: str
    parse_always: bool          # USER_DEFINED alone: matched even with parse_special off
    lstrip: bool = False        # eats the whitespace before it
    rstrip: bool = False        # eats the whitespace after it


def special_tokens(spec: VocabSpec, attrs: list[int]) -> list[SpecialToken]:
    """The tokens llama.cpp cuts out of text, in the order it looks for them: longest UTF-8
    text first; ties in id order (llama.cpp's sort is not stable, so ties are only defined
    where the texts cannot overlap, which equal-length distinct texts found at the same
    place cannot)."""
    cut = ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN
    found = [i for i, attr in enumerate(attrs) if attr & cut and spec.tokens[i]]
    lstrip, rstrip = _strip_attributes(spec, found)
    tokens = [SpecialToken(i, spec.tokens[i], not attrs[i] & (ATTR_CONTROL | ATTR_UNKNOWN),
                           i in lstrip, i in rstrip) for i in found]
    tokens.sort(key=lambda t: -len(t.text.encode("utf-8")))
    return tokens


def _strip_attributes(spec: VocabSpec, found: list[int]) -> tuple[set[int], set[int]]:
    """The LSTRIP and RSTRIP tokens, by the family rules llama.cpp applies (its per-token
    attributes are not in GGUF): `<mask>` eats the space before it in Nomic BERT MoE, Jina v2
    and mmBERT files; `[MASK]` in ModernBERT; Phi-3's special tokens eat the space after them,
    except `<unk>`, `<s>` and `<|endoftext|>`."""
    meta = spec.metadata
    name = str(meta.get("general.name", "")).lower()
    pre = str(meta.get("tokenizer.ggml.pre", ""))
    arch = str(meta.get("general.architecture", ""))
    index = {text: i for i, text in enumerate(spec.tokens)}
    lstrip: set[int] = set()
    rstrip: set[int] = set()
    if any(k in pre for k in ("jina-v2-de", "jina-v2-es", "jina-v2-code", "mmbert")) or any(
            k in arch for k in ("nomic-bert-moe", "jina-bert-v3")):
        if "<mask>" in index:
            lstrip.add(index["<mask>"])
    elif "phi-3" in name or "phi3" in name:
        rstrip.update(found)
        if "</s>" in index:
            rstrip.add(index["</s>"])
        rstrip.difference_update(index[t] for t in ("<unk>", "<s>", "<|endoftext|>")
                                 if t in index)
    elif "modern-bert" in name and "[MASK]" in index:
        lstrip.add(index["[MASK]"])
    return lstrip, rstrip


def partition(text: str, specials: list[SpecialToken], parse_special: bool) -> list[str | int]:
    """`text` as a list of plain-text stretches (str) and special token ids (int)."""
    pieces: list[str | int] = [text] if text else []
    for token in specials:
        if not (parse_special or token.parse_always):
            continue
        if not any(isinstance(p, str) and token.text in p for p in pieces):
            continue
        cut: list[str | int] = []
        for piece in pieces:
            if isinstance(piece, int) or token.text not in piece:
                cut.append(piece)
                continue
            cut.extend(_split(piece, token))
        pieces = cut
    return pieces


def _split(piece: str, token: SpecialToken) -> list[str | int]:
    out: list[str | int] = []
    start = 0
    while True:
        at = piece.find(token.text, start)
        if at < 0:
            break
        left = piece[start:at]
        if token.lstrip:
            left = left.rstrip(_C_SPACE)
        if left:
            out.append(left)
        out.append(token.id)
        start = at + len(token.text)
        if token.rstrip:
            while start < len(piece) and piece[start] in _C_SPACE:
                start += 1
    if start < len(piece):
        out.append(piece[start:])
    return out
