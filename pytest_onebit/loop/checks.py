"""The loop's invariants I1..I13 as named checks.

Each check reads one `Trace` (what a loop did on one scenario, next to plain decode) and raises
`AssertionError` saying what broke; `LOOP` (a `pytest_onebit.contract.Contract`) holds them.
A check's name is stable (it is in every test id and in the mutant table), its id is the part
before the first dash (`I7`), and its docstring says what it proves. `docs/contract.md`
explains each invariant; `CONTRIBUTING.md` how to add a check.
"""

from __future__ import annotations

from pytest_onebit.contract.assertions import (
    assert_pass_law,
    assert_rows_in_order,
    assert_tokens_equal,
)
from pytest_onebit.contract.core import Contract
from pytest_onebit.doubles.toy import VERIFY_KINDS
from pytest_onebit.loop.scenarios import Scenario, standard_scenarios
from pytest_onebit.loop.trace import Trace, execute

#: The loop contract: a case is one `Trace` (the loop run on one scenario, next to greedy).
LOOP = Contract("loop", prepare=execute, scenarios=standard_scenarios)
CHECKS = LOOP.checks
check = LOOP.check


def _with_head(s: Scenario) -> bool:
    return s.head is not None


@check("I1-text")
def check_text(t: Trace) -> None:
    """I1: the run emits exactly plain greedy decode's tokens, and hands each to the consumer
    once, in order."""
    __tracebackhide__ = True
    assert_tokens_equal(t.tokens, t.reference.tokens)
    assert_tokens_equal(t.consumer, t.tokens, names=("on_token saw", "emitted"),
                        what="tokens handed to on_token")


@check("I2-state")
def check_state(t: Trace) -> None:
    """I2: after the run, the base's committed tokens and recurrent state equal those of
    stepping prompt + emitted one by one."""
    __tracebackhide__ = True
    expected = t.prompt + t.tokens
    assert_tokens_equal(t.base.committed, expected, names=("base committed", "prompt + emitted"),
                        what="committed tokens")
    twin = t.base.replay(expected)
    if t.base.state != twin.state:
        raise AssertionError(
            f"the base's recurrent state after the run ({t.base.state:#018x}) differs from "
            f"stepping prompt + emitted one by one ({twin.state:#018x}): a batch was committed "
            "from the wrong row"
        )


@check("I3-positions")
def check_positions(t: Trace) -> None:
    """I3: every step and verify ran at the committed length, batches were committed before
    the next pass, and the base consumed exactly P + emitted tokens."""
    __tracebackhide__ = True
    tokens = t.tokens
    base = t.base
    if base.bad_pos:
        raise AssertionError(
            f"{base.bad_pos} pass(es) at a wrong position; first: {base.misplaced[0]}"
        )
    if base.misuse:
        raise AssertionError(f"the base was misused: {base.misuse[0]}")
    expected = len(t.prompt) + len(tokens)
    if base.consumed != expected:
        raise AssertionError(
            f"the base consumed {base.consumed} tokens; prompt + emitted is {expected}"
        )


@check("I4-batch-bound")
def check_batch_bound(t: Trace) -> None:
    """I4: no verify batch after the prompt is larger than max_batch_rows(), and no prefill
    batch larger than the base's prefill width (max_prefill_rows(), else max_batch_rows())."""
    __tracebackhide__ = True
    t.tokens  # noqa: B018 - a loop that raised fails here first
    wide = t.base.too_wide(len(t.prompt))
    if wide:
        raise AssertionError(f"{len(wide)} verify batch(es) too wide; first: {wide[0]}")


def _rows_the_head_must_see(t: Trace) -> list[int]:
    """prompt + emitted; with a fallback policy that fired (onebit.Fallback), only up to the
    token at which the run dropped the head."""
    tokens = t.tokens
    fell_back = t.optional_stat("fallback_emitted")
    return t.prompt + (tokens if fell_back is None else tokens[:fell_back])


@check("I5-drafter-rows", applies=_with_head)
def check_drafter_rows(t: Trace) -> None:
    """I5: the head is reset once, and its commit_rows calls, concatenated, are prompt +
    emitted, each token once, in order, with the base's hidden row for its position (up to a
    fallback, if one fired)."""
    __tracebackhide__ = True
    expected = _rows_the_head_must_see(t)
    assert t.head is not None
    if t.head.resets != 1:
        raise AssertionError(f"the head was reset {t.head.resets} times in one run; the loop "
                             "must reset it once, before the prefill")
    assert_rows_in_order(t.head.committed_tokens, t.head.committed_rows, expected,
                         t.base.rows_of(expected))


@check("I6-hidden", applies=_with_head)
def check_hidden(t: Trace) -> None:
    """I6: a one-pass head is never handed a hidden; a two-pass head is handed the base's
    hidden row after t1, at t1's position."""
    __tracebackhide__ = True
    tokens = t.tokens
    assert t.head is not None
    if not t.scenario.two_pass:
        for p in t.head.proposals:
            if p.hidden is not None:
                raise AssertionError(
                    f"the one-pass head was handed a hidden row at position {p.pos}"
                )
        return
    rows = t.base.rows_of(t.prompt + tokens)
    for p in t.head.proposals:
        if p.hidden is None:
            raise AssertionError(f"the two-pass head was handed no hidden at position {p.pos}")
        if p.pos >= len(rows) or not (p.hidden == rows[p.pos]).all():
            raise AssertionError(
                f"the two-pass head was handed a hidden at position {p.pos} that is not the "
                "base's row after t1 there"
            )


def _perfect_unstopped(s: Scenario) -> bool:
    return s.head in ("perfect", "over") and s.stop_at is None


@check("I7-pass-law", applies=_perfect_unstopped)
def check_pass_law_perfect(t: Trace) -> None:
    """I7: with a perfect head, one-pass takes ceil(N / (k' + 1)) decode passes (at most one a
    plain step), two-pass 2 * ceil(N / (k'' + 1)) or one fewer; a head that answers with more
    drafts than asked costs the same, once the loop cuts them."""
    __tracebackhide__ = True
    s = t.scenario
    assert_pass_law(steps=t.decode_steps, batches=t.decode_batches, emitted=len(t.tokens),
                    k=s.k, max_batch_rows=s.max_batch_rows, two_pass=s.two_pass)


@check("I8-pass-law-garbage", applies=lambda s: s.head in ("garbage", "silent"))
def check_pass_law_garbage(t: Trace) -> None:
    """I8: with a head that is always wrong, exactly one decode pass per emitted token (plain
    decode's cost), and no batch for drafts the step already rejected; with a head that
    proposes nothing, plain steps only."""
    __tracebackhide__ = True
    s = t.scenario
    assert_pass_law(steps=t.decode_steps, batches=t.decode_batches, emitted=len(t.tokens),
                    k=s.k, max_batch_rows=s.max_batch_rows, two_pass=s.two_pass, head=s.head)


@check("I9-budget")
def check_budget(t: Trace) -> None:
    """I9: never more than max_tokens emitted; the head is asked for drafts only when there is
    room (k >= 1), and never for a position past the budget."""
    __tracebackhide__ = True
    s = t.scenario
    tokens = t.tokens
    if len(tokens) > s.max_tokens:
        raise AssertionError(f"emitted {len(tokens)} tokens with max_tokens = {s.max_tokens}")
    end = len(s.prompt) + s.max_tokens  # first position past the budget
    for p in t.head.proposals if t.head is not None else ():
        if p.k < 1:
            raise AssertionError(f"the head was asked for {p.k} drafts at position {p.pos}: "
                                 "a round with no room must not ask")
        if p.pos + p.k >= end:
            raise AssertionError(
                f"the head was asked for {p.k} drafts at position {p.pos} (positions "
                f"{p.pos + 1}..{p.pos + p.k}); the budget ends at position {end - 1}"
            )


@check("I10-consumer-stop", applies=lambda s: s.stop_at is not None)
def check_consumer_stop(t: Trace) -> None:
    """I10: when the consumer stops on the j-th token, j tokens are emitted and exactly j are
    committed, wherever in a round the stop falls."""
    __tracebackhide__ = True
    s = t.scenario
    assert s.stop_at is not None
    j = min(s.stop_at, s.max_tokens)
    tokens = t.tokens
    if len(tokens) != j or len(t.consumer) != j:
        raise AssertionError(
            f"the consumer stopped on token {s.stop_at}: the run emitted {len(tokens)} and "
            f"on_token saw {len(t.consumer)}; both should be {j}"
        )
    committed = t.base.consumed - len(s.prompt)
    if committed != j:
        raise AssertionError(f"stop on token {j}: the base committed {committed} decode tokens")
    if s.stop_at <= s.max_tokens and not t.stopped:
        raise AssertionError("the consumer stopped the run but result.stopped is False")


@check("I11-degenerate-base", applies=lambda s: s.max_batch_rows == 1 and s.head is not None)
def check_degenerate_base(t: Trace) -> None:
    """I11: a base that takes one row per verify gives a one-pass loop plain steps only, and
    every committed row still reaches the head."""
    __tracebackhide__ = True
    expected = _rows_the_head_must_see(t)  # (a loop that raised fails here first)
    if not t.scenario.two_pass and t.decode_batches:
        raise AssertionError(
            f"the one-pass loop ran {t.decode_batches} batch(es) after the prompt on a base of "
            "max_batch_rows() = 1"
        )
    assert t.head is not None
    assert_tokens_equal(t.head.committed_tokens, expected,
                        names=("head got", "prompt + emitted"), what="tokens committed to head")


@check("I12-stats")
def check_stats(t: Trace) -> None:
    """I12: stats agree with what the base counted: steps and batches (decode only: the
    prefill is counted apart), rounds, drafts proposed and accepted, passes per token; and the
    prefill's own counts where the stats have them."""
    __tracebackhide__ = True
    tokens = t.tokens
    n = len(tokens)
    steps, batches = t.decode_steps, t.decode_batches
    proposed = sum(min(len(p.drafts), p.k) for p in t.head.proposals) if t.head else 0
    if t.scenario.two_pass:
        rounds, accepted = steps, n - steps
    else:
        rounds, accepted = steps + batches, n - steps - batches
    expected = {"steps": steps, "batches": batches, "rounds": rounds,
                "proposed": proposed, "accepted": accepted}
    actual = {name: t.stat(name) for name in expected}
    if actual != expected:
        wrong = ", ".join(f"{k} = {actual[k]} (counted {v})"
                          for k, v in expected.items() if actual[k] != v)
        raise AssertionError(f"stats disagree with the base and head: {wrong}")
    _check_optional_counts(t)
    want_ppt = (steps + batches) / n if n else 0.0
    ppt = t.stat("passes_per_token")
    if not isinstance(ppt, int | float) or abs(ppt - want_ppt) > 1e-12:
        raise AssertionError(f"stats.passes_per_token = {ppt!r}, "
                             f"counted {want_ppt}")


def _check_optional_counts(t: Trace) -> None:
    """The counts the contract makes optional (batch_rows and the prefill's), right where
    the stats have them."""
    __tracebackhide__ = True
    prefill = t.prefill_calls
    counted = {
        "batch_rows": t.decode_batch_rows,
        "prefill_steps": sum(kind == "step" for kind, _, _ in prefill),
        "prefill_batches": sum(kind in VERIFY_KINDS for kind, _, _ in prefill),
        "prefill_rows": sum(rows for kind, _, rows in prefill if kind in VERIFY_KINDS),
    }
    for name, want in counted.items():
        got = t.optional_stat(name)
        if got is not None and got != want:
            raise AssertionError(f"stats.{name} = {got}, the base counted {want}")


@check("I13-prefill")
def check_prefill(t: Trace) -> None:
    """I13: the prompt goes through the base first, in batches: ceil(P / W) verifies of W
    rows at positions 0, W, 2W, ... (the last one the rest), W the base's prefill width
    (max_prefill_rows(), else max_batch_rows()), before any pass after the prompt. On a base
    with `verify_last` each prefill batch may be a `verify_last` (it counts as a verify);
    after the prompt no pass is (a decode round needs every row's scores)."""
    __tracebackhide__ = True
    t.tokens  # noqa: B018 - a loop that raised fails here first
    p, w = len(t.prompt), t.scenario.prefill_width
    expected = [("verify", pos, min(w, p - pos)) for pos in range(0, p, w)]
    # a prefill verify_last is a prefill verify; compare its position and rows
    first = [("verify" if kind == "verify_last" else kind, pos, rows)
             for kind, pos, rows in t.base.calls[: len(expected)]]
    if first != expected:
        got = ", ".join(f"{kind}({rows}) at {pos}" for kind, pos, rows in first) or "nothing"
        want = ", ".join(f"verify({rows}) at {pos}" for _, pos, rows in expected)
        raise AssertionError(f"the prefill of {p} prompt tokens (prefill width {w}) should be "
                             f"{want}; the base saw {got}")
    late = [(pos, rows) for kind, pos, rows in t.base.calls if kind == "verify_last" and pos >= p]
    if late:
        pos, rows = late[0]
        raise AssertionError(f"{len(late)} verify_last call(s) after the prompt; first: "
                             f"{rows} rows at {pos} (a decode round needs every row)")
