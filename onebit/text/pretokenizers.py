"""The pre-tokenizers of llama.cpp's BPE vocabularies: how each cuts text into words.

BPE merges were learned on words, so a vocabulary must be cut into words the way its model's
tokenizer cut them, and llama.cpp names that cut in `tokenizer.ggml.pre`. Each name maps to a
list of regular expressions applied in turn (llama-vocab.cpp, `llm_tokenizer_bpe`): the first
cuts the text into matches and the text between them, the next cuts each of those pieces
again, and so on. The expressions below are llama.cpp's own, from its source at build 11434
(where it adapted HuggingFace's `(?i:...)` to explicit case classes, so is this); they are the
format's facts, not a choice, so they are written here as llama.cpp writes them.

A name also sets how the words become tokens: `ignore_merges` (a word that is itself a token is
taken whole, as Llama 3's tokenizer.json says), whether BOS is added when the file does not say,
and whether the text is byte-encoded (GPT-2's byte alphabet) or kept as UTF-8 with spaces
spelled "\u2581" (Gemma 4). Where llama.cpp cuts with code of its own rather than the
expression it names (Kimi K2, AFMoE, Tiny Aya), an expression that cuts the same way stands in,
held to llama.cpp's ids like the rest; the two names whose words llama.cpp re-cuts in its
tokenizer session (mmBERT, the whitespace vocabularies) are refused by name.
"""

from __future__ import annotations

# ruff: noqa: E501 (each expression is kept whole on one line, as llama.cpp writes it)
from dataclasses import dataclass

# LLAMA3, DBRX, SMAUG, CHATGLM4
_LLAMA3 = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# JAIS2
_JAIS2 = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}",
)
# DEEPSEEK_LLM
_DEEPSEEK_LLM = (
    r"[\r\n]",
    r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
    r"\s+$",
    r"[一-龥ࠀ-一가-퟿]+",
    r"\p{N}+",
)
# DEEPSEEK3_LLM, HUNYUAN_DENSE, JOYAI_LLM, HY_V4
_DEEPSEEK3_LLM = (
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
)
# SPARK2_5
_SPARK2_5 = (
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+""",
    r"\p{N}",
)
# YOUTU
_YOUTU = (
    r"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# DEEPSEEK_CODER
_DEEPSEEK_CODER = (
    r"[\r\n]",
    r"\s?\p{L}+",
    r"\s?\p{P}+",
    r"[一-龥ࠀ-一가-퟿]+",
    r"\p{N}",
)
# FALCON
_FALCON = (
    r"[\p{P}\$\+<=>\^~\|`]+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    r"[0-9][0-9][0-9]",
)
# STARCODER, REFACT, COMMAND_R, SMOLLM, CODESHELL, EXAONE, MINERVA, MELLUM2
_STARCODER = (
    r"\p{N}",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
)
# GPT2, MPT, OLMO, JAIS, TRILLION, GRANITE_DOCLING
_GPT2 = (
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
)
# STABLELM2, QWEN2, HUNYUAN, SOLAR_OPEN, GROK_2
_STABLELM2 = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# QWEN35
_QWEN35 = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# PORO, BLOOM, GPT3_FINNISH
_PORO = (
    r" ?[^(\s|.,!?…。，、।۔،)]+",
)
# VIKING
_VIKING = (
    r" ?[^(\s|.,!?…。，、।۔،)]+",
    r"\p{N}",
)
# TEKKEN
_TEKKEN = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# CHAMELEON
_CHAMELEON = (
    r"<sentinel:[0-9]+>",
    r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    r"([\t\n]|    |  )",
    r"\p{N}",
    r"[\p{P}!-/:-@\[-`{-~]",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
)
# GPT4O, MINIMAX_M2
_GPT4O = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# GRANITE_EMB_MULTI
_GRANITE_EMB_MULTI = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# TINY_AYA
_TINY_AYA = (
    r"\d{1,3}(?=(?:\d{3})*\b)",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# KIMI_K2
_KIMI_K2 = (
    r"\p{Han}+",
)
# SUPERBPE
_SUPERBPE = (
    r"\p{N}+",
    r"(?=(\d{3})+(?!\d))",
)
# BAILINGMOE
_BAILINGMOE = (
    r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
)
# SEED_CODER
_SEED_CODER = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# UFAKZEKA
_UFAKZEKA = (
    r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# AFMOE
_AFMOE = (
    r"\p{AFMoE_digits}",
    r"[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
)
# LAGUNA
_LAGUNA = (
    r"[^\n]+|[\n]+",
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# EXAONE_MOE
_EXAONE_MOE = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+",
)
# GEMMA4, SARVAM_MOE, MMBERT
_GEMMA4 = (
    r"[^\n]+|[\n]+",
)
# MINICPM5
_MINICPM5 = (
    r"\p{N}{1,3}",
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
# WHITESPACE
_WHITESPACE = (
    r"\S+",
)
# DEFAULT
_DEFAULT = (
    r"[\p{P}\$\+<=>\^~\|]+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    r"\p{N}+",
    r"[0-9][0-9][0-9]",
)


# llama.cpp cuts these with code of its own (unicode.cpp), not with the expression its table
# names; each expression below cuts the same way, and the golden ids hold it to that.
# AFMoE's digits, and Tiny Aya's (llama.cpp routes its `\d{1,3}(?=(?:\d{3})*\b)` to the same
# code): a run of numbers in groups of three from the right, the first group taking the rest.
_DIGITS_BY_THREE = r"\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))"
_AFMOE_CUT = (_DIGITS_BY_THREE, *_AFMOE[1:])
_TINY_AYA_CUT = (_DIGITS_BY_THREE, *_TINY_AYA[1:])
# Kimi K2: its tokenizer's own expression (tokenization_kimi.py), Han runs first and Han kept
# out of the letter classes, with the contractions spelled without (?i:) as llama.cpp does
_K2_TAIL = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
_K2_UPPER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"
_K2_LOWER = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"
_KIMI_K2_CUT = (
    r"[\p{Han}]+"
    rf"|[^\r\n\p{{L}}\p{{N}}]?{_K2_UPPER}*{_K2_LOWER}+{_K2_TAIL}"
    rf"|[^\r\n\p{{L}}\p{{N}}]?{_K2_UPPER}+{_K2_LOWER}*{_K2_TAIL}"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)

@dataclass(frozen=True)
class PreTokenizer:
    splits: tuple[str, ...]
    ignore_merges: bool = False
    add_bos: bool = False           # llama.cpp's default where the file has no add_bos_token
    byte_encode: bool = True        # False: raw UTF-8, spaces as U+2581 (SentencePiece style)
    has_bos: bool = True            # False: the family has no BOS (ChatGLM)


def _names(splits: tuple[str, ...], *names: str, **how) -> dict[str, PreTokenizer]:
    return {name: PreTokenizer(splits, **how) for name in names}


PRE_TOKENIZERS: dict[str, PreTokenizer] = {
    **_names(_DEFAULT, "default"),
    **_names(_MINICPM5, "minicpm5", ignore_merges=True),
    **_names(_LLAMA3, "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
             "midm-2.0", "lfm2", "jina-v5-nano", ignore_merges=True, add_bos=True),
    **_names(_DEEPSEEK_LLM, "deepseek-llm"),
    **_names(_DEEPSEEK_CODER, "deepseek-coder"),
    **_names(_DEEPSEEK3_LLM, "deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"),
    **_names(_SPARK2_5, "spark2_5"),
    **_names(_YOUTU, "youtu", ignore_merges=True),
    **_names(_FALCON, "falcon"),
    **_names(_GPT2, "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es",
             "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code",
             "roberta-bpe", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling"),
    **_names(_JAIS2, "jais-2"),
    **_names(_GEMMA4, "gemma4", "granite-embed-multi-311m", "sarvam-moe", byte_encode=False),
    **_names(_STARCODER, "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
             "minerva-7b", "mellum2"),
    **_names(_STABLELM2, "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2",
             "megrez", "hunyuan", "grok-2", "solar-open"),
    **_names(_QWEN35, "qwen35"),
    **_names(_LLAMA3, "dbrx", "smaug-bpe"),
    **_names(_PORO, "poro-chat", "bloom", "gpt3-finnish"),
    **_names(_LLAMA3, "chatglm-bpe", has_bos=False),
    **_names(_LLAMA3, "glm4", "glm5", ignore_merges=True, has_bos=False),
    **_names(_VIKING, "viking"),
    **_names(_TEKKEN, "tekken", ignore_merges=True, add_bos=True),
    **_names(_EXAONE_MOE, "exaone-moe"),
    **_names(_CHAMELEON, "chameleon", add_bos=True),
    **_names(_GPT4O, "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"),
    **_names(_GRANITE_EMB_MULTI, "granite-embed-multi-97m", ignore_merges=True),
    **_names(_TINY_AYA_CUT, "tiny_aya", "cohere2moe"),
    **_names(_AFMOE_CUT, "afmoe"),
    **_names(_KIMI_K2_CUT, "kimi-k2"),
    **_names(_SUPERBPE, "superbpe"),
    **_names(_BAILINGMOE, "bailingmoe", "bailingmoe2", "llada-moe"),
    **_names(_SEED_CODER, "seed-coder"),
    **_names(_UFAKZEKA, "ufakzeka"),
    **_names(_LAGUNA, "laguna"),
}

# names whose words llama.cpp re-cuts in code of its own: refused with the reason
REFUSED = {
    "mmbert": "llama.cpp re-cuts mmBERT's words at every escaped space with its own code",
    "whitespace": "a whitespace vocabulary has a tokenizer session of its own in llama.cpp",
}
