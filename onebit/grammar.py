"""Constrained decoding: a grammar the generated text must stay inside (a JSON schema, any JSON
object, a regular expression, a Lark grammar), through llguidance.

`Grammar` is what a request asks for, checked and compiled at the boundary (a schema llguidance
cannot compile is a `GrammarError` naming the field, before anything is decoded). `Matcher`
follows one sequence: the tokens it has consumed, the mask of tokens allowed next, and
`rollback`, which is what speculation needs: a verify consumes its drafts one by one to mask
each draft's row with the state of its own prefix, then rolls them back; a commit consumes
only what was accepted (onebit.processors.ProcessedBase does both). llguidance computes a
mask in tens of microseconds on SmolLM2's 49152 tokens (docs/sampling.md), a hundredth of a
decode step.

llguidance needs the tokenizer as bytes per token; `tokenizer_for` builds that once per
tokenizer from onebit's own (`token_bytes`, special tokens marked as llguidance expects) and
keeps it. llguidance is an optional dependency (the `serve` extra): a grammar asked for
without it is a `GrammarError` that says what to install.
"""

from __future__ import annotations

import functools
import json
import weakref
from dataclasses import dataclass

import numpy as np

#: the kinds of grammar a request may ask for
KINDS = ("json_schema", "json_object", "regex", "lark")
#: the longest grammar source accepted (a schema or a Lark grammar is untrusted input)
MAX_SOURCE_CHARS = 256 * 1024


class GrammarError(ValueError):
    """A grammar that cannot be used: names the field and what is wrong."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


def _llguidance():
    try:
        import llguidance
    except ImportError as error:
        raise GrammarError("response_format", "constrained decoding needs llguidance: pip "
                           "install \"onebit[serve]\"") from error
    return llguidance


@dataclass(frozen=True)
class Grammar:
    """A grammar to decode inside: `kind` (one of KINDS) and `source` (the schema as JSON
    text, the regex, the Lark text; "" for json_object). `compiled` is llguidance's grammar."""

    kind: str
    source: str
    compiled: str

    @classmethod
    def json_schema(cls, schema: object, field_name: str = "json_schema") -> Grammar:
        """Any JSON value that conforms to `schema` (a dict, or its JSON text)."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        if not isinstance(schema, dict | str):
            raise GrammarError(field_name, f"{field_name} must be a JSON object, got "
                               f"{type(schema).__name__}")
        return cls._compiled("json_schema", text, field_name)

    @classmethod
    def json_object(cls) -> Grammar:
        """Any JSON object (OpenAI's `response_format: {"type": "json_object"}`)."""
        return cls._compiled("json_object", json.dumps({"type": "object"}), "response_format")

    @classmethod
    def regex(cls, pattern: str, field_name: str = "regex") -> Grammar:
        return cls._compiled("regex", pattern, field_name)

    @classmethod
    def lark(cls, grammar: str, field_name: str = "grammar") -> Grammar:
        return cls._compiled("lark", grammar, field_name)

    @classmethod
    def _compiled(cls, kind: str, source: str, field_name: str) -> Grammar:
        if not isinstance(source, str):
            raise GrammarError(field_name, f"{field_name} must be a string, got "
                               f"{type(source).__name__}")
        if len(source) > MAX_SOURCE_CHARS:
            raise GrammarError(field_name, f"{field_name} is {len(source)} characters; at most "
                               f"{MAX_SOURCE_CHARS} are accepted")
        matcher = _llguidance().LLMatcher
        try:
            if kind in ("json_schema", "json_object"):
                compiled = matcher.grammar_from_json_schema(source)
            elif kind == "regex":
                compiled = matcher.grammar_from_regex(source)
            else:
                compiled = matcher.grammar_from_lark(source)
        except (ValueError, TypeError) as error:
            raise GrammarError(field_name, f"{field_name}: {error}") from None
        message = matcher.validate_grammar(compiled)
        if message and not message.startswith("WARNING"):
            raise GrammarError(field_name, f"{field_name} cannot be compiled: {message}")
        return cls(kind, "" if kind == "json_object" else source, compiled)

    def reads(self, text: str) -> tuple[bool, bool]:
        """(whether `text` stays inside the grammar from its first byte to its last, whether it
        is a whole sentence of it): the grammar walked byte by byte, with no model's tokenizer.
        A check of text made elsewhere: an answer a budget cut is judged by the first."""
        if not isinstance(text, str):
            raise GrammarError("text", f"text must be a string, got {type(text).__name__}")
        m = _llguidance().LLMatcher(_byte_tokenizer(), self.compiled)
        data = list(text.encode("utf-8"))
        inside = m.try_consume_tokens(data) == len(data) and not m.is_error()
        return inside, inside and bool(m.is_accepting())

    def matcher(self, tokenizer, vocab_size: int) -> Matcher:
        """A fresh `Matcher` of this grammar over `tokenizer` (onebit's), for a model whose
        rows have `vocab_size` scores."""
        return Matcher(self, tokenizer_for(tokenizer), vocab_size)


class _Bytes:
    """onebit's tokenizer as llguidance's TokenizerWrapper reads one: bytes per token, special
    tokens marked with a leading 0xff (so no text can spell them), and an encoder of text."""

    def __init__(self, tokenizer) -> None:
        special = set(tokenizer.all_special_ids)
        self.eos_token_id = tokenizer.eos_token_id
        self.bos_token_id = tokenizer.bos_token_id
        self.special_token_ids = sorted(special)
        self.tokens = [b"\xff" + tokenizer.token_bytes(i) if i in special
                       else tokenizer.token_bytes(i) for i in range(tokenizer.vocab_size)]
        self._tokenizer = tokenizer

    def __call__(self, text):
        if not isinstance(text, str):  # llguidance tries bytes first; this encoder takes text
            raise TypeError("text only")
        return self._tokenizer.encode(text, add_special_tokens=False, parse_special=False)


class _ByteVocabulary:
    """A tokenizer whose tokens are the 256 bytes (and an end token no text spells): the
    grammar read byte by byte, for `Grammar.reads`."""

    eos_token_id = 256
    bos_token_id = None
    special_token_ids = [256]
    tokens = [bytes([b]) for b in range(256)] + [b"\xff<end>"]

    def __call__(self, text):
        if not isinstance(text, str):
            raise TypeError("text only")
        return list(text.encode("utf-8"))


@functools.cache
def _byte_tokenizer():
    llg = _llguidance()
    return llg.LLTokenizer(llg.TokenizerWrapper(_ByteVocabulary()))


_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def tokenizer_for(tokenizer):
    """llguidance's tokenizer for onebit's `tokenizer`, built once per tokenizer (about a
    tenth of a second on SmolLM2) and kept while it lives. The stop ids (EOS, EOT) are the
    tokens that end a complete grammar."""
    kept = _TOKENIZERS.get(tokenizer)
    if kept is None:
        llg = _llguidance()
        stops = sorted(tokenizer.stop_ids) or None
        kept = llg.LLTokenizer(llg.TokenizerWrapper(_Bytes(tokenizer)), eos_token=stops)
        _TOKENIZERS[tokenizer] = kept
    return kept


class Matcher:
    """One sequence's place in a grammar: `allowed()` is the mask of tokens allowed next
    (`[vocab_size]` bool; ids past the tokenizer's vocabulary are never allowed), `consume`
    takes one token the mask allowed, `rollback(n)` undoes the last n."""

    def __init__(self, grammar: Grammar, lltokenizer, vocab_size: int) -> None:
        llg = _llguidance()
        self.grammar = grammar
        self.vocab_size = int(vocab_size)
        self._m = llg.LLMatcher(lltokenizer, grammar.compiled)
        if self._m.is_error():
            raise GrammarError("response_format", f"the grammar cannot be used: "
                               f"{self._m.get_error()}")
        self._mask: np.ndarray | None = None
        self.consumed = 0

    def allowed(self) -> np.ndarray:
        if self._mask is None:
            raw = np.frombuffer(self._m.compute_logit_bias(), np.uint8)
            mask = np.zeros(self.vocab_size, bool)
            n = min(raw.size, self.vocab_size)
            mask[:n] = raw[:n] != 0
            if not mask.any():
                raise GrammarError("response_format", f"the grammar allows no next token "
                                   f"after {self.consumed}: {self._m.get_error() or 'stuck'}")
            self._mask = mask
        return self._mask

    def allows(self, token: int) -> bool:
        return bool(self.allowed()[int(token)])

    def consume(self, token: int) -> None:
        """Take `token`, which the current mask must allow (a token it does not is a bug of
        the caller: GrammarError, and the matcher is left where it was)."""
        if not self.allows(token):
            raise GrammarError("response_format", f"token {int(token)} is not allowed by the "
                               f"grammar after {self.consumed} tokens")
        if not self._m.consume_token(int(token)):
            raise GrammarError("response_format", f"the grammar refused token {int(token)}: "
                               f"{self._m.get_error()}")
        self.consumed += 1
        self._mask = None

    def rollback(self, n: int) -> None:
        if n:
            if not self._m.rollback(int(n)):
                raise GrammarError("response_format", f"cannot roll back {n} tokens")
            self.consumed -= int(n)
            self._mask = None

    def reset(self) -> None:
        self._m.reset()
        self.consumed = 0
        self._mask = None

    def is_accepting(self) -> bool:
        """Whether the text so far is a whole sentence of the grammar."""
        return bool(self._m.is_accepting())
