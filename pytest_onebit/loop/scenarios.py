"""Scenarios: everything about one run a loop is held to, and the standard grid.

A scenario fixes the round kind, the head, k, the base's batch width and row shape, the
prompt, the budget and where the consumer stops. Its `id` is stable: it is in every test id.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

DEFAULT_PROMPT = (3, 1, 4, 1, 5)
#: a prompt longer than the toy's batches, so the prefill takes several (the last one short)
LONG_PROMPT = (3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3,
               8, 3, 2, 7, 9, 5, 0, 2, 8)
FLAVOURS = ("one-pass", "two-pass")
MAIN_HEADS = ("perfect", "garbage", "half")


@dataclass(frozen=True)
class Scenario:
    """One run to hold a loop to: every knob that changes what the loop must do."""

    flavour: str = "one-pass"  # one-pass | two-pass (ignored when head is None)
    head: str | None = "perfect"  # a name in pytest_onebit.doubles.heads.HEADS, "pattern", or None
    k: int = 7
    max_batch_rows: int = 8
    rows_shape: str = "prefix"
    prompt: tuple[int, ...] = DEFAULT_PROMPT
    max_tokens: int = 40
    stop_at: int | None = None  # the consumer stops on this (1-based) token
    pattern: tuple[bool, ...] = ()  # for head == "pattern"
    vocab_size: int = 64
    seed: int = 0
    prefill_rows: int | None = None  # the base's max_prefill_rows(); None: max_batch_rows
    float32: bool = False  # a float32-exact toy, for a loop behind the C ABI (not in the id)
    verify_last: bool = False  # the toy has verify_last, so the prefill goes through it
    knobs: str | None = None  # a set of pytest_onebit.doubles.knobs: the toy processed by it

    @property
    def two_pass(self) -> bool:
        return self.head is not None and self.flavour == "two-pass"

    @property
    def prefill_width(self) -> int:
        """The most prompt tokens one prefill batch may take on this scenario's base."""
        return self.prefill_rows or self.max_batch_rows

    @property
    def id(self) -> str:
        kind = "plain" if self.head is None else f"{self.flavour}-{self.head}"
        parts = [kind, f"k{self.k}", f"r{self.max_batch_rows}", self.rows_shape,
                 f"n{self.max_tokens}"]
        if self.stop_at is not None:
            parts.append(f"stop{self.stop_at}")
        if self.prompt != DEFAULT_PROMPT:
            parts.append(f"p{len(self.prompt)}")
        if self.prefill_rows is not None:
            parts.append(f"w{self.prefill_rows}")
        if self.pattern:
            parts.append("".join("1" if b else "0" for b in self.pattern))
        if self.seed:
            parts.append(f"s{self.seed}")
        if self.verify_last:
            parts.append("last")
        if self.knobs:
            parts.append(f"knobs-{self.knobs}")
        return "-".join(parts)

    def make_base(self):
        from pytest_onebit.doubles.toy import ToyBase

        toy = ToyBase(vocab_size=self.vocab_size, max_batch_rows=self.max_batch_rows,
                      rows_shape=self.rows_shape, seed=self.seed,
                      max_prefill_rows=self.prefill_rows, float32=self.float32,
                      verify_last=self.verify_last)
        if self.knobs is None:
            return toy
        from pytest_onebit.doubles.knobs import processed

        return processed(toy, self.knobs, len(self.prompt))

    def make_head(self, oracle):
        from pytest_onebit.doubles.heads import HEADS, pattern_head

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
    # prompts as long as the prefill batch, and longer (chunks of 8, 8, 3), and a base whose
    # prefill batch is wider (16) or narrower (2) than its verify batch (4)
    out += [replace(base, head=h, prompt=LONG_PROMPT[:n], max_tokens=21)
            for h in ("perfect", "half") for n in (8, 19)]
    out += [replace(base, head="half", max_batch_rows=4, prefill_rows=w, prompt=LONG_PROMPT,
                    max_tokens=21) for w in (2, 16)]
    out.append(replace(base, stop_at=2, prompt=LONG_PROMPT[:9]))
    # heads that answer with fewer drafts than asked, none at all, or too many
    out += [replace(base, head=h, k=k, max_tokens=37)
            for h in ("short", "silent", "over") for k in (4, 7)]
    out.append(replace(base, head="over", k=12, max_batch_rows=3))
    return out


def verify_last_scenarios() -> list[Scenario]:
    """A base with `verify_last`, which the prefill calls instead of verify: one and several
    prefill batches (the last one short), a prefill wider than the verify, both round kinds,
    plain decode, batch-shaped hidden rows, and a stop inside the prompt's first round."""
    base = Scenario(verify_last=True, prompt=LONG_PROMPT[:19], max_tokens=21)
    return [
        replace(base, prompt=DEFAULT_PROMPT),
        base,
        replace(base, flavour="two-pass", head="half", k=4),
        replace(base, head="half", max_batch_rows=4, prefill_rows=16, prompt=LONG_PROMPT),
        replace(base, head=None, k=0, rows_shape="batch"),
        replace(base, flavour="two-pass", rows_shape="batch", stop_at=2),
    ]


def knob_scenarios() -> list[Scenario]:
    """The toy processed by each knob set (penalties, bias with min_tokens, all of them), so a
    draft's penalty history, its min_tokens count and a rejection's roll-back are all judged
    against plain greedy decoding with the same knobs: both round kinds, right and half-right
    heads, a stop inside a batch, a long prompt prefilled in chunks. Where llguidance is
    installed, a grammar too (pytest_onebit.doubles.knobs.GRAMMARS): each draft's row masked
    by its own prefix's place in the grammar, and a rejection's roll-back of the matcher."""
    from pytest_onebit.doubles.knobs import has_grammars

    names = ("penalties", "bias-min", "all") + (("grammar",) if has_grammars() else ())
    out = [Scenario(flavour, head, 4, knobs=name, max_tokens=30)
           for name in names for flavour in FLAVOURS for head in ("perfect", "half")]
    out.append(Scenario(head="pattern", k=5, pattern=(True, True, False), knobs="all",
                        max_tokens=30))
    out.append(Scenario(head="perfect", k=7, knobs="bias-min", stop_at=9, max_tokens=30))
    out.append(Scenario(head="half", k=4, knobs="all", prompt=LONG_PROMPT[:19], max_tokens=21))
    return out


def standard_scenarios() -> list[Scenario]:
    """The grid every loop is held to (ids are unique and stable)."""
    out = [replace(s, rows_shape=shape) for s in arm_scenarios() for shape in ("prefix", "batch")]
    for flavour in FLAVOURS:
        out += _edge_scenarios(flavour)
    out.append(Scenario(head=None, k=0))
    out.append(Scenario(head=None, k=7, max_tokens=9))
    out.append(Scenario(head=None, k=0, prompt=LONG_PROMPT, max_batch_rows=4, prefill_rows=16,
                        max_tokens=9))
    out += verify_last_scenarios()
    ids = [s.id for s in out]
    duplicates = {i for i in ids if ids.count(i) > 1}
    assert not duplicates, f"scenario ids must be unique: {sorted(duplicates)}"
    return out
