"""Assertions that say where a speculative run went wrong, not just that it did.

Each helper hides its own frame from pytest's traceback (`__tracebackhide__`) and fails with a
message that names the first diverging index and shows a little context on both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import ceil

import numpy as np


def first_divergence(actual: Sequence[int], expected: Sequence[int]) -> int | None:
    """Index of the first difference (a length difference counts at the shorter end)."""
    for i, (a, b) in enumerate(zip(actual, expected, strict=False)):
        if a != b:
            return i
    if len(actual) != len(expected):
        return min(len(actual), len(expected))
    return None


def describe_divergence(
    actual: Sequence[int],
    expected: Sequence[int],
    *,
    names: tuple[str, str] = ("run", "greedy"),
    what: str = "tokens",
    context: int = 3,
) -> str | None:
    """A short report of the first difference between two token lists, or None if equal."""
    index = first_divergence(actual, expected)
    if index is None:
        return None
    lo, hi = max(0, index - context), index + context + 1
    width = max(3, len(names[0]), len(names[1]))

    def cell(seq: Sequence[int], i: int) -> str:
        text = str(seq[i]) if i < len(seq) else "-"
        return f"[{text}]" if i == index else text

    columns = range(lo, min(hi, max(len(actual), len(expected))))
    cells = [[f">{i}<" if i == index else str(i) for i in columns]]
    cells += [[cell(seq, i) for i in columns] for seq in (actual, expected)]
    col_w = [max(len(row[c]) for row in cells) for c in range(len(cells[0]))]
    labels = ("index", *names)
    lines = [
        f"  {label:<{width}}  " + "  ".join(f"{v:>{w}}" for v, w in zip(row, col_w, strict=True))
        for label, row in zip(labels, cells, strict=True)
    ]
    head = (
        f"{what} differ from {names[1]} at index {index} "
        f"({names[0]} has {len(actual)}, {names[1]} has {len(expected)})"
    )
    return "\n".join([head, *lines])


def assert_tokens_equal(
    actual: Sequence[int],
    expected: Sequence[int],
    *,
    names: tuple[str, str] = ("run", "greedy"),
    what: str = "tokens",
) -> None:
    """I1: the tokens are the same, in the same order."""
    __tracebackhide__ = True
    message = describe_divergence(list(actual), list(expected), names=names, what=what)
    if message is not None:
        raise AssertionError(message)


def assert_plain_decode_equivalent(result, reference, *, base=None, prompt=None) -> None:
    """I1-I3: the run emitted greedy's tokens and left the base as greedy would have.

    `result` and `reference` are `RunResult`s (or token lists). With `base` (the base the run
    used) and `prompt`, the base's committed tokens must be prompt + emitted; a base that can
    `replay` (the toy) is also compared state for state, and one that counts `bad_pos` must
    have no call at a wrong position.
    """
    __tracebackhide__ = True
    tokens = list(getattr(result, "tokens", result))
    assert_tokens_equal(tokens, list(getattr(reference, "tokens", reference)))
    if base is None:
        return
    if prompt is None:
        raise TypeError("assert_plain_decode_equivalent needs prompt= when base= is given")
    expected_committed = [*prompt, *tokens]
    if hasattr(base, "committed"):
        assert_tokens_equal(
            list(base.committed), expected_committed,
            names=("base committed", "prompt + emitted"), what="committed tokens",
        )
    if hasattr(base, "replay"):
        twin = base.replay(expected_committed)
        if base.state != twin.state:
            raise AssertionError(
                f"base state after the run ({base.state:#x}) differs from stepping prompt + "
                f"emitted one by one ({twin.state:#x})"
            )
    if getattr(base, "bad_pos", 0):
        raise AssertionError(f"base saw {base.bad_pos} call(s) at a position other than the "
                             "committed length")


@dataclass(frozen=True)
class PassLaw:
    """The decode passes a head must take, as docs/contract.md's I7 / I8 state them."""

    passes: int
    steps: int
    batches: int
    rule: str


def pass_law(
    *, emitted: int, k: int, max_batch_rows: int, two_pass: bool, head: str = "perfect"
) -> PassLaw:
    """Exact step and batch counts for `emitted` tokens with a perfect, garbage or silent head
    (garbage fixes only the total)."""
    n = emitted
    if head == "garbage":
        # Every round emits t1 alone: one pass per token.
        return PassLaw(n, -1, -1, "garbage: one decode pass per emitted token")
    if head == "silent":
        return PassLaw(n, n, 0, "a head that proposes nothing: plain steps only, no batch")
    if head != "perfect":
        raise ValueError(f"pass laws exist for perfect, garbage and silent heads, not {head!r}")
    width = min(k, max_batch_rows) if two_pass else min(k, max_batch_rows - 1)
    if width == 0 or n == 0:
        return PassLaw(n, n, 0, "no room for drafts: plain steps only")
    rounds = ceil(n / (width + 1))
    last = n - (rounds - 1) * (width + 1)  # tokens the last round emits
    if two_pass:
        batches = rounds - (1 if last == 1 else 0)
        rule = f"two-pass: 2 * ceil({n} / ({width} + 1)) passes, or one fewer"
        return PassLaw(rounds + batches, rounds, batches, rule)
    steps = 1 if last == 1 else 0
    rule = f"one-pass: ceil({n} / ({width} + 1)) passes, at most one a plain step"
    return PassLaw(rounds, steps, rounds - steps, rule)


def assert_pass_law(
    *,
    steps: int,
    batches: int,
    emitted: int,
    k: int,
    max_batch_rows: int,
    two_pass: bool,
    head: str = "perfect",
) -> None:
    """I7 / I8: the run took exactly the decode passes its head's law allows."""
    __tracebackhide__ = True
    law = pass_law(
        emitted=emitted, k=k, max_batch_rows=max_batch_rows, two_pass=two_pass, head=head
    )
    got = f"{steps} steps + {batches} batches = {steps + batches} passes for {emitted} tokens"
    if head == "garbage":
        if steps + batches != law.passes:
            raise AssertionError(f"{law.rule}: expected {law.passes} passes, got {got}")
        return
    if (steps, batches) != (law.steps, law.batches):
        raise AssertionError(
            f"{law.rule} (k={k}, max_batch_rows={max_batch_rows}): expected {law.steps} steps + "
            f"{law.batches} batches = {law.passes} passes, got {got}"
        )


def assert_rows_in_order(
    tokens: Sequence[int],
    rows: Sequence[np.ndarray],
    expected_tokens: Sequence[int],
    expected_rows: np.ndarray,
) -> None:
    """I5: the drafter was told each committed token once, in order, with the base's row."""
    __tracebackhide__ = True
    assert_tokens_equal(
        list(tokens), list(expected_tokens),
        names=("head got", "prompt + emitted"), what="tokens committed to the head",
    )
    for i, (row, want) in enumerate(zip(rows, expected_rows, strict=True)):
        if not np.array_equal(np.asarray(row), want):
            raise AssertionError(
                f"the head's row for position {i} differs from the base's row there "
                f"(max abs difference {np.max(np.abs(np.asarray(row) - want)):.3g})"
            )


def relative_l1(a: np.ndarray, b: np.ndarray) -> float:
    """sum|a - b| / sum|b|: 0 means bit-identical."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    denominator = np.sum(np.abs(b))
    numerator = np.sum(np.abs(a - b))
    if denominator == 0:
        return 0.0 if numerator == 0 else float("inf")
    return float(numerator / denominator)


def assert_logits_match(a: np.ndarray, b: np.ndarray, rel_l1: float = 0.0) -> None:
    """Logits `a` match the reference `b`: bit for bit when `rel_l1` is 0, else within that
    relative L1 error."""
    __tracebackhide__ = True
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise AssertionError(f"logits shapes differ: {a.shape} vs reference {b.shape}")
    error = relative_l1(a, b)
    if (rel_l1 == 0.0 and not np.array_equal(a, b)) or error > rel_l1:
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
        raise AssertionError(
            f"logits differ: rel-L1 {error:.3g} (allowed {rel_l1:g}); largest difference "
            f"{diff[worst]:.3g} at index {tuple(int(i) for i in worst)} "
            f"({a[worst]!r} vs {b[worst]!r}); argmax {int(np.argmax(a))} vs {int(np.argmax(b))}"
        )
