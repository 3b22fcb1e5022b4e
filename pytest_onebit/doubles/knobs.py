"""Named sets of the knobs a request sends (`onebit.processors.Processors`), for scenarios.

A scenario names its knobs (`Scenario.knobs`, `SamplingScenario.knobs`) so it stays hashable
and its id stays readable; the toy base it runs on is then wrapped in a `ProcessedBase`. Each
set is chosen to change what the toy emits: penalties that fire on the toy's repeats, a bias
strong enough to move argmaxes, a `min_tokens` that holds back a token the toy would pick.
"""

from __future__ import annotations

import string
from functools import cache

from onebit.processors import Processors

#: knob sets for the loop contract's 64-token toy
KNOBS = {
    "penalties": Processors(presence_penalty=0.6, frequency_penalty=0.4,
                            repetition_penalty=1.5),
    "bias-min": Processors(logit_bias={3: 1.5, 7: -2.0, 11: 3.0}, min_tokens=12,
                           held=frozenset({0, 5, 9})),
    "all": Processors(presence_penalty=-0.5, frequency_penalty=0.8, repetition_penalty=0.7,
                      logit_bias={2: 2.5, 4: -1.0}, min_tokens=6, held=frozenset({1, 6})),
}

#: knob sets for the sampling contract's 3- to 5-token toys, where each one shifts the mass
SMALL_KNOBS = {
    "penalties": Processors(presence_penalty=0.7, frequency_penalty=0.5,
                            repetition_penalty=1.6),
    "bias-min": Processors(logit_bias={1: 1.2, 2: -0.8}, min_tokens=2, held=frozenset({0})),
}


#: grammars for the toys (regexes over their one-character tokens, `ToyTokenizer`), each one
#: allowing different tokens after different prefixes and never complete (the toys have no
#: stop): a draft's row is masked by the state of its own prefix, and a rejected draft must
#: leave the matcher where the committed text left it
GRAMMARS = {"grammar": r"([0-9]|ab|c[de]|f+g)*", "grammar-small": r"(ab|c)*"}


@cache
def grammar_knobs(name: str) -> Processors:
    """The knob set `name` of GRAMMARS: the grammar alone (needs llguidance)."""
    from onebit.grammar import Grammar

    return Processors(grammar=Grammar.regex(GRAMMARS[name]))


def has_grammars() -> bool:
    """Whether the grammar knob sets can be built here (llguidance is installed)."""
    try:
        import llguidance  # noqa: F401
    except ImportError:
        return False
    return True


class ToyTokenizer:
    """A tokenizer for a toy of `vocab_size` tokens: token i spells one character (digits,
    then letters, then punctuation), and one more id past the toy's vocabulary is its EOS,
    which no toy row scores (so a grammar can never end a toy's text)."""

    ALPHABET = string.digits + string.ascii_lowercase + string.ascii_uppercase + "-_{}[]:,"

    def __init__(self, vocab_size: int) -> None:
        if not 1 <= vocab_size <= len(self.ALPHABET):
            raise ValueError(f"a toy tokenizer spells at most {len(self.ALPHABET)} tokens")
        self.chars = ("abcde" if vocab_size <= 5 else self.ALPHABET)[:vocab_size]
        self.eos_token_id = vocab_size
        self.bos_token_id = None
        self.all_special_ids = [vocab_size]
        self.stop_ids = frozenset({vocab_size})
        self.vocab_size = vocab_size + 1

    def token_bytes(self, token_id: int) -> bytes:
        return b"<eos>" if token_id == self.eos_token_id else self.chars[token_id].encode()

    def encode(self, text: str, add_special_tokens: bool = False, *,
               parse_special: bool = False) -> list[int]:
        return [self.chars.index(c) for c in text]

    def __hash__(self) -> int:
        return id(self)


@cache
def toy_tokenizer(vocab_size: int) -> ToyTokenizer:
    return ToyTokenizer(vocab_size)


def knobs(name: str | None, small: bool = False) -> Processors | None:
    """The named set (None: no knobs)."""
    if name is None:
        return None
    if name in GRAMMARS:
        return grammar_knobs(name)
    table = SMALL_KNOBS if small else KNOBS
    if name not in table:
        raise ValueError(f"unknown knobs {name!r}; known: {sorted(table) + sorted(GRAMMARS)}")
    return table[name]


def processed(toy, name: str, prompt_len: int, small: bool = False):
    """`toy` wrapped in a ProcessedBase with the knob set `name` (a grammar set reads the toy's
    tokens through `ToyTokenizer`)."""
    from onebit.processors import ProcessedBase

    tokenizer = toy_tokenizer(toy.vocab_size) if name in GRAMMARS else None
    return ProcessedBase(toy, knobs(name, small), prompt_len, tokenizer=tokenizer)
