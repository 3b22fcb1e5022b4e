"""Scenarios: everything about one run a loop is held to, and the standard grid.

A scenario fixes the round kind, the head, k, the base's batch width and row shape, the
prompt, the budget and where the consumer stops. Its `id` is stable: it is in every test id.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

DEFAULT_PROMPT = (3, 1, 4, 1, 5)
FLAVOURS = ("one-pass", "two-pass")
MAIN_HEADS = ("perfect", "garbage", "half")


@dataclass(frozen=True)
class Scenario:
    """One run to hold a loop to: every knob that changes what the loop must do."""

    flavour: str = "one-pass"  # one-pass | two-pass (ignored when head is None)
    head: str | None = "perfect"  # a name in pytest_onebit.heads.HEADS, "pattern", or None
    k: int = 7
    max_batch_rows: int = 8
    rows_shape: str = "prefix"
    prompt: tuple[int, ...] = DEFAULT_PROMPT
    max_tokens: int = 40
    stop_at: int | None = None  # the consumer stops on this (1-based) token
    pattern: tuple[bool, ...] = ()  # for head == "pattern"
    vocab_size: int = 64
    seed: int = 0

    @property
    def two_pass(self) -> bool:
        return self.head is not None and self.flavour == "two-pass"

    @property
    def id(self) -> str:
        kind = "plain" if self.head is None else f"{self.flavour}-{self.head}"
        parts = [kind, f"k{self.k}", f"r{self.max_batch_rows}", self.rows_shape,
                 f"n{self.max_tokens}"]
        if self.stop_at is not None:
            parts.append(f"stop{self.stop_at}")
        if self.prompt != DEFAULT_PROMPT:
            parts.append(f"p{len(self.prompt)}")
        if self.pattern:
            parts.append("".join("1" if b else "0" for b in self.pattern))
        if self.seed:
            parts.append(f"s{self.seed}")
        return "-".join(parts)

    def make_base(self):
        from pytest_onebit.toy import ToyBase

        return ToyBase(vocab_size=self.vocab_size, max_batch_rows=self.max_batch_rows,
                       rows_shape=self.rows_shape, seed=self.seed)

    def make_head(self, oracle):
        from pytest_onebit.heads import HEADS, pattern_head

        if self.head is None:
            return None
        if self.head == "pattern":
            return pattern_head(oracle, self.pattern, self.flavour)
        return HEADS[self.head](oracle, self.flavour)


def arm_scenarios() -> list[Scenario]:
    """The main grid: both round kinds, three heads, k = 1, 2, 4, 7, 12 (k = 12 is clamped to
    7 (one-pass) or 8 (two-pass) on an 8-row base)."""
    return [Scenario(flavour, head, k) for flavour in FLAVOURS for head in MAIN_HEADS
            for k in (1, 2, 4, 7, 12)]


def _edge_scenarios(flavour: str) -> list[Scenario]:
    """Budgets, stops, narrow bases, per-slot patterns and odd heads, for one round kind."""
    base = Scenario(flavour=flavour)
    out = [replace(base, k=0)]
    # budgets that end mid-round, and the smallest ones
    out += [replace(base, max_tokens=n) for n in (0, 1, 2, 9, 37)]
    out.append(replace(base, head="half", k=4, max_tokens=37))
    # consumer stops: on the 6th token, on the first, and inside a batch
    out += [replace(base, head=h, k=k, stop_at=6) for h in MAIN_HEADS for k in (4, 7)]
    out.append(replace(base, stop_at=1))
    out.append(replace(base, stop_at=3, rows_shape="batch"))
    # degenerate and narrow bases
    out += [replace(base, head=h, k=k, max_batch_rows=1) for h in MAIN_HEADS for k in (1, 7)]
    out.append(replace(base, k=7, max_batch_rows=2, rows_shape="batch"))
    out.append(replace(base, k=5, max_batch_rows=3, max_tokens=23))
    # per-slot right / wrong patterns, and another prompt and base
    out += [replace(base, head="pattern", k=5, pattern=bits, max_tokens=31)
            for bits in ((True, False), (False, True, True), (True, True, False, True))]
    out.append(replace(base, prompt=(9,), seed=7, max_tokens=25))
    # heads that answer with fewer drafts than asked, none at all, or too many
    out += [replace(base, head=h, k=k, max_tokens=37)
            for h in ("short", "silent", "over") for k in (4, 7)]
    out.append(replace(base, head="over", k=12, max_batch_rows=3))
    return out


def standard_scenarios() -> list[Scenario]:
    """The grid every loop is held to (ids are unique and stable)."""
    out = [replace(s, rows_shape=shape) for s in arm_scenarios() for shape in ("prefix", "batch")]
    for flavour in FLAVOURS:
        out += _edge_scenarios(flavour)
    out.append(Scenario(head=None, k=0))
    out.append(Scenario(head=None, k=7, max_tokens=9))
    ids = [s.id for s in out]
    duplicates = {i for i in ids if ids.count(i) > 1}
    assert not duplicates, f"scenario ids must be unique: {sorted(duplicates)}"
    return out
