"""Draft heads that know the answer: built from a plain greedy run of the same base and prompt.

An oracle head proposes, for each slot, either the true continuation or a token it knows is
wrong, as its `rightness(pos, slot, k)` rule says. That makes the loop's acceptance exactly
predictable (perfect: all, garbage: none, half: the first half), which is what the pass laws
need. Every head records what the loop handed it, so the checks can read it back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from onebit.protocols import BaseModel
from onebit.reference import greedy

FLAVOURS = ("one-pass", "two-pass")

Rightness = Callable[[int, int, int], bool]  # (position, slot, k) -> propose the truth?
Count = Callable[[int, int], int]  # (t1's position, k) -> how many drafts to answer with


@dataclass(frozen=True)
class Oracle:
    """The greedy truth for one base and prompt: `tokens` continue `prompt`."""

    prompt: tuple[int, ...]
    tokens: tuple[int, ...]
    vocab_size: int

    @classmethod
    def from_greedy(cls, base: BaseModel, prompt: Sequence[int], n: int) -> Oracle:
        result = greedy(base, prompt, max_tokens=n)
        return cls(tuple(prompt), tuple(result.tokens), base.vocab_size)

    def truth(self, pos: int) -> int | None:
        """The greedy token at `pos`, or None past what the oracle ran."""
        index = pos - len(self.prompt)
        if 0 <= index < len(self.tokens):
            return self.tokens[index]
        return None


@dataclass(frozen=True)
class Proposal:
    """One `propose` call as the head saw it, and what it answered."""

    token: int
    pos: int
    k: int
    hidden: np.ndarray | None
    drafts: tuple[int, ...]


class OracleHead:
    """A `DraftHead` whose drafts are right or wrong by rule, recording every call."""

    def __init__(
        self,
        oracle: Oracle,
        rightness: Rightness,
        *,
        flavour: str,
        name: str,
        count: Count = lambda pos, k: k,
    ) -> None:
        if flavour not in FLAVOURS:
            raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")
        self.oracle = oracle
        self.rightness = rightness
        self.count = count
        self.flavour = flavour
        self.name = name
        self.resets = 0  # how often the loop reset the head
        self._clear()

    def __repr__(self) -> str:
        return f"<{self.name} head, {self.flavour}>"

    def needs_last_hidden(self) -> bool:
        return self.flavour == "two-pass"

    def wrong(self, truth: int) -> int:
        return (truth + 1) % self.oracle.vocab_size

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None) -> list[int]:
        drafts: list[int] = []
        for slot in range(self.count(pos, k)):
            truth = self.oracle.truth(pos + 1 + slot)
            if truth is None:
                break
            drafts.append(truth if self.rightness(pos + 1 + slot, slot, k) else self.wrong(truth))
        kept = None if hidden is None else np.array(hidden, copy=True)
        self.proposals.append(Proposal(int(token), int(pos), int(k), kept, tuple(drafts)))
        return drafts

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        # Read only what is committed: rows past `count` belong to rejected positions.
        self.commit_calls.append(count)
        for i in range(count):
            self.committed_tokens.append(int(tokens[i]))
            self.committed_rows.append(np.array(rows[i], copy=True))

    def reset(self) -> None:
        self.resets += 1
        self._clear()

    def _clear(self) -> None:
        self.proposals: list[Proposal] = []
        self.committed_tokens: list[int] = []
        self.committed_rows: list[np.ndarray] = []
        self.commit_calls: list[int] = []


def perfect_head(oracle: Oracle, flavour: str = "one-pass") -> OracleHead:
    """Proposes the oracle's next k tokens."""
    return OracleHead(oracle, lambda pos, slot, k: True, flavour=flavour, name="perfect")


def garbage_head(oracle: Oracle, flavour: str = "one-pass") -> OracleHead:
    """Proposes k tokens that are all wrong."""
    return OracleHead(oracle, lambda pos, slot, k: False, flavour=flavour, name="garbage")


def half_head(oracle: Oracle, flavour: str = "one-pass") -> OracleHead:
    """Right for the first half of its drafts (rounded up), wrong after."""
    return OracleHead(
        oracle, lambda pos, slot, k: slot < (k + 1) // 2, flavour=flavour, name="half"
    )


def pattern_head(oracle: Oracle, bits: Sequence[bool], flavour: str = "one-pass") -> OracleHead:
    """Right or wrong per (position, slot), read cyclically from `bits` (a Hypothesis draw)."""
    pattern = tuple(bool(b) for b in bits) or (True,)

    def rightness(pos: int, slot: int, k: int) -> bool:
        return pattern[(pos * 7 + slot) % len(pattern)]

    return OracleHead(oracle, rightness, flavour=flavour, name="pattern")


def short_head(oracle: Oracle, flavour: str = "one-pass") -> OracleHead:
    """Right, but proposes fewer than asked: a count that varies with the position, from none
    to all k (so the loop's "no drafts: plain step" path is taken mid-run)."""
    return OracleHead(oracle, lambda pos, slot, k: True, flavour=flavour, name="short",
                      count=lambda pos, k: (pos * 5 + 3) % (k + 1))


def silent_head(oracle: Oracle, flavour: str = "one-pass") -> OracleHead:
    """Never proposes anything: the run must cost exactly plain decode, with no batch."""
    return OracleHead(oracle, lambda pos, slot, k: True, flavour=flavour, name="silent",
                      count=lambda pos, k: 0)


def over_head(oracle: Oracle, flavour: str = "one-pass") -> OracleHead:
    """Right, but answers with 3 drafts more than asked: the loop must cut them to its room
    (past the row limit and the budget they would be accepted)."""
    return OracleHead(oracle, lambda pos, slot, k: True, flavour=flavour, name="over",
                      count=lambda pos, k: k + 3)


HEADS = {"perfect": perfect_head, "garbage": garbage_head, "half": half_head,
         "short": short_head, "silent": silent_head, "over": over_head}
