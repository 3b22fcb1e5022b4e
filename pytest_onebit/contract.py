"""The conformance suite: invariants I1..I12 of design/loop.md as named checks.

A *scenario* fixes everything about one run (round kind, head, k, base rows and row shape,
prompt, budget, consumer stop). `execute(run, scenario)` runs any `run()` implementation on a
fresh toy base with an oracle head and records a *trace*: what was emitted, what the base
counted and what the head was handed, next to plain greedy decode on another fresh base. Each
check reads one trace and raises `AssertionError` saying what broke.

`check_loop(run)` holds an implementation to every check on every standard scenario, like
scikit-learn's `check_estimator`; `pytest_onebit.suite.LoopContract` does the same as pytest
tests with one test id per (check, scenario).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from onebit.loop import RunResult, greedy
from pytest_onebit.assertions import (
    assert_pass_law,
    assert_rows_in_order,
    assert_tokens_equal,
)
from pytest_onebit.heads import HEADS, Oracle, OracleHead, pattern_head
from pytest_onebit.toy import ToyBase

RunFn = Callable[..., RunResult]

DEFAULT_PROMPT = (3, 1, 4, 1, 5)


@dataclass(frozen=True)
class Scenario:
    """One run to hold a loop to: every knob that changes what the loop must do."""

    flavour: str = "one-pass"  # one-pass | two-pass (ignored when head is None)
    head: str | None = "perfect"  # a name in heads.HEADS, "pattern", or None (plain decode)
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

    def make_base(self) -> ToyBase:
        return ToyBase(
            vocab_size=self.vocab_size,
            max_batch_rows=self.max_batch_rows,
            rows_shape=self.rows_shape,
            seed=self.seed,
        )

    def make_head(self, oracle: Oracle) -> OracleHead | None:
        if self.head is None:
            return None
        if self.head == "pattern":
            return pattern_head(oracle, self.pattern, self.flavour)
        return HEADS[self.head](oracle, self.flavour)


@dataclass
class Trace:
    """What happened when a loop ran one scenario, next to what plain decode did."""

    scenario: Scenario
    base: ToyBase
    head: OracleHead | None
    reference: RunResult
    result: RunResult | None = None
    error: BaseException | None = None
    consumer: list[int] = field(default_factory=list)  # what on_token saw, in order

    @property
    def prompt(self) -> list[int]:
        return list(self.scenario.prompt)

    @property
    def tokens(self) -> list[int]:
        """The emitted tokens (or why there are none)."""
        __tracebackhide__ = True
        if self.error is not None:
            raise AssertionError(
                f"the loop raised {type(self.error).__name__}: {self.error}"
            ) from self.error
        assert self.result is not None
        return list(self.result.tokens)

    @property
    def decode_steps(self) -> int:
        return self.base.steps - len(self.scenario.prompt)


def load_loop(spec: str) -> RunFn:
    """The `run()` named `MODULE:FUNC`; a ValueError saying what is wrong otherwise."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"wants MODULE:FUNC, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{spec}: cannot import {module_name}: {error}") from error
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{spec}: {module_name} has no callable {attr!r}")
    return fn


def _stopper(stop_at: int | None, seen: list[int]) -> Callable[[int], bool]:
    def on_token(token: int) -> bool:
        seen.append(int(token))
        return stop_at is None or len(seen) < stop_at

    return on_token


def execute(run: RunFn, scenario: Scenario) -> Trace:
    """Run `scenario` through `run` (any implementation of onebit.run's signature)."""
    s = scenario
    # The oracle looks further than the budget (and than an over-proposing head reaches) so
    # that a loop drafting past the budget is visible.
    oracle = Oracle.from_greedy(s.make_base(), s.prompt, s.max_tokens + s.k + 8)
    reference = greedy(s.make_base(), list(s.prompt), max_tokens=s.max_tokens,
                       on_token=_stopper(s.stop_at, []))
    trace = Trace(s, s.make_base(), None, reference)
    trace.head = s.make_head(oracle)
    try:
        trace.result = run(trace.base, trace.head, list(s.prompt), max_tokens=s.max_tokens,
                           k=s.k, on_token=_stopper(s.stop_at, trace.consumer))
    except Exception as error:  # a broken loop may raise anything; every check reports it
        trace.error = error
    return trace


# ---------------------------------------------------------------------------------------------
# The checks


@dataclass(frozen=True)
class Check:
    name: str  # stable: it is in every test id and in the mutant table
    doc: str
    verify: Callable[[Trace], None]
    applies: Callable[[Scenario], bool] = lambda s: True

    @property
    def invariant(self) -> str:
        return self.name.split("-", 1)[0]


CHECKS: dict[str, Check] = {}


def check(name: str, applies: Callable[[Scenario], bool] = lambda s: True):
    """Register a check under its stable name; its docstring says what it proves."""

    def register(fn: Callable[[Trace], None]) -> Callable[[Trace], None]:
        CHECKS[name] = Check(name, (fn.__doc__ or "").strip(), fn, applies)
        return fn

    return register


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
    """I4: no verify batch is larger than max_batch_rows()."""
    __tracebackhide__ = True
    t.tokens  # noqa: B018 - a loop that raised fails here first
    widest = max((rows for kind, _, rows in t.base.calls if kind == "verify"), default=0)
    if t.base.over:
        raise AssertionError(
            f"{t.base.over} verify batch(es) exceeded max_batch_rows() = "
            f"{t.scenario.max_batch_rows}; the widest had {widest} rows"
        )


def _rows_the_head_must_see(t: Trace) -> list[int]:
    """prompt + emitted; with a fallback policy that fired (onebit.Fallback), only up to the
    token at which the run dropped the head."""
    tokens = t.tokens
    fell_back = getattr(t.result.stats, "fallback_emitted", None)
    return t.prompt + (tokens if fell_back is None else tokens[:fell_back])


@check("I5-drafter-rows", _with_head)
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


@check("I6-hidden", _with_head)
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


@check("I7-pass-law", _perfect_unstopped)
def check_pass_law_perfect(t: Trace) -> None:
    """I7: with a perfect head, one-pass takes ceil(N / (k' + 1)) decode passes (at most one a
    plain step), two-pass 2 * ceil(N / (k'' + 1)) or one fewer; a head that answers with more
    drafts than asked costs the same, once the loop cuts them."""
    __tracebackhide__ = True
    s = t.scenario
    assert_pass_law(steps=t.decode_steps, batches=t.base.batches, emitted=len(t.tokens),
                    k=s.k, max_batch_rows=s.max_batch_rows, two_pass=s.two_pass)


@check("I8-pass-law-garbage", lambda s: s.head in ("garbage", "silent"))
def check_pass_law_garbage(t: Trace) -> None:
    """I8: with a head that is always wrong, exactly one decode pass per emitted token (plain
    decode's cost), and no batch for drafts the step already rejected; with a head that
    proposes nothing, plain steps only."""
    __tracebackhide__ = True
    s = t.scenario
    assert_pass_law(steps=t.decode_steps, batches=t.base.batches, emitted=len(t.tokens),
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


@check("I10-consumer-stop", lambda s: s.stop_at is not None)
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
    if s.stop_at <= s.max_tokens and not t.result.stopped:
        raise AssertionError("the consumer stopped the run but result.stopped is False")


@check("I11-degenerate-base", lambda s: s.max_batch_rows == 1 and s.head is not None)
def check_degenerate_base(t: Trace) -> None:
    """I11: a base that takes one row per verify gives a one-pass loop plain steps only, and
    every committed row still reaches the head."""
    __tracebackhide__ = True
    expected = _rows_the_head_must_see(t)  # (a loop that raised fails here first)
    if not t.scenario.two_pass and t.base.batches:
        raise AssertionError(
            f"the one-pass loop ran {t.base.batches} batch(es) on a base of max_batch_rows() = 1"
        )
    assert t.head is not None
    assert_tokens_equal(t.head.committed_tokens, expected,
                        names=("head got", "prompt + emitted"), what="tokens committed to head")


@check("I12-stats")
def check_stats(t: Trace) -> None:
    """I12: stats agree with what the base counted: steps and batches (decode only), rounds,
    drafts proposed and accepted, passes per token."""
    __tracebackhide__ = True
    tokens = t.tokens
    stats = t.result.stats
    n = len(tokens)
    steps, batches = t.decode_steps, t.base.batches
    proposed = sum(min(len(p.drafts), p.k) for p in t.head.proposals) if t.head else 0
    if t.scenario.two_pass:
        rounds, accepted = steps, n - steps
    else:
        rounds, accepted = steps + batches, n - steps - batches
    expected = {"steps": steps, "batches": batches, "rounds": rounds,
                "proposed": proposed, "accepted": accepted}
    actual = {name: getattr(stats, name) for name in expected}
    if actual != expected:
        wrong = ", ".join(f"{k} = {actual[k]} (counted {v})"
                          for k, v in expected.items() if actual[k] != v)
        raise AssertionError(f"stats disagree with the base and head: {wrong}")
    rows = getattr(stats, "batch_rows", None)  # optional in the contract; right if present
    if rows is not None and rows != t.base.batch_rows:
        raise AssertionError(f"stats.batch_rows = {rows}, the base verified "
                             f"{t.base.batch_rows} rows")
    want_ppt = (steps + batches) / n if n else 0.0
    if abs(stats.passes_per_token - want_ppt) > 1e-12:
        raise AssertionError(f"stats.passes_per_token = {stats.passes_per_token}, "
                             f"counted {want_ppt}")


# ---------------------------------------------------------------------------------------------
# Scenarios and the one-call check


def standard_scenarios() -> list[Scenario]:
    """The grid every loop is held to (ids are unique and stable)."""
    out: list[Scenario] = []
    flavours = ("one-pass", "two-pass")
    heads = ("perfect", "garbage", "half")
    # The main grid: k = 12 is clamped to 7 (one-pass) or 8 (two-pass) on an 8-row base.
    for flavour in flavours:
        for head in heads:
            for k in (1, 2, 4, 7, 12):
                for shape in ("prefix", "batch"):
                    out.append(Scenario(flavour, head, k, rows_shape=shape))
    base = Scenario()
    for flavour in flavours:
        out.append(replace(base, flavour=flavour, k=0))
        # budgets that end mid-round, and the smallest ones
        for n in (0, 1, 2, 9, 37):
            out.append(replace(base, flavour=flavour, max_tokens=n))
        out.append(replace(base, flavour=flavour, head="half", k=4, max_tokens=37))
        # consumer stops: on the 6th token, on the first, and inside a batch
        for head in heads:
            for k in (4, 7):
                out.append(replace(base, flavour=flavour, head=head, k=k, stop_at=6))
        out.append(replace(base, flavour=flavour, stop_at=1))
        out.append(replace(base, flavour=flavour, stop_at=3, rows_shape="batch"))
        # degenerate and narrow bases
        for head in heads:
            for k in (1, 7):
                out.append(replace(base, flavour=flavour, head=head, k=k, max_batch_rows=1))
        out.append(replace(base, flavour=flavour, k=7, max_batch_rows=2, rows_shape="batch"))
        out.append(replace(base, flavour=flavour, k=5, max_batch_rows=3, max_tokens=23))
        # per-slot right / wrong patterns, and another prompt and base
        for bits in ((True, False), (False, True, True), (True, True, False, True)):
            out.append(replace(base, flavour=flavour, head="pattern", k=5, pattern=bits,
                               max_tokens=31))
        out.append(replace(base, flavour=flavour, prompt=(9,), seed=7, max_tokens=25))
        # heads that answer with fewer drafts than asked, none at all, or too many
        for head in ("short", "silent", "over"):
            for k in (4, 7):
                out.append(replace(base, flavour=flavour, head=head, k=k, max_tokens=37))
        out.append(replace(base, flavour=flavour, head="over", k=12, max_batch_rows=3))
    out.append(replace(base, head=None, k=0))
    out.append(replace(base, head=None, k=7, max_tokens=9))
    ids = [s.id for s in out]
    duplicates = {i for i in ids if ids.count(i) > 1}
    assert not duplicates, f"scenario ids must be unique: {sorted(duplicates)}"
    return out


@dataclass
class Finding:
    check: str
    scenario: str
    message: str


@dataclass
class ContractReport:
    """What `check_loop` found: every (check, scenario) pair that ran, and those that failed."""

    ran: int = 0
    failures: list[Finding] = field(default_factory=list)
    ran_by_check: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def failed_by_check(self) -> dict[str, int]:
        counts = dict.fromkeys(self.ran_by_check, 0)
        for f in self.failures:
            counts[f.check] += 1
        return counts


class LoopContractError(AssertionError):
    """`check_loop` found a broken invariant; `.report` has every finding."""

    def __init__(self, report: ContractReport) -> None:
        first = report.failures[0]
        broken = sorted({f.check for f in report.failures},
                        key=lambda c: list(CHECKS).index(c))
        super().__init__(
            f"{len(report.failures)} of {report.ran} checks failed ({', '.join(broken)}); "
            f"first: {first.check} on {first.scenario}: {first.message}"
        )
        self.report = report


def check_trace(trace: Trace, checks: Iterable[str] | None = None) -> list[Finding]:
    """Run every applicable check on one trace; return the failures."""
    found = []
    for name in checks or CHECKS:
        c = CHECKS[name]
        if not c.applies(trace.scenario):
            continue
        try:
            c.verify(trace)
        except AssertionError as error:
            found.append(Finding(name, trace.scenario.id, str(error)))
    return found


def check_loop(
    run: RunFn,
    scenarios: Sequence[Scenario] | None = None,
    *,
    checks: Iterable[str] | None = None,
    raise_on_failure: bool = True,
    on_trace: Callable[[Trace], None] | None = None,
) -> ContractReport:
    """Hold `run` to every check on every scenario (default: `standard_scenarios()`).

    Raises `LoopContractError` naming the broken checks, unless `raise_on_failure` is False;
    either way returns the report. `on_trace` sees each scenario's trace (to cost the run)."""
    names = list(checks or CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}; known: {list(CHECKS)}")
    report = ContractReport(ran_by_check=dict.fromkeys(names, 0))
    for scenario in scenarios or standard_scenarios():
        trace = execute(run, scenario)
        for name in names:
            if CHECKS[name].applies(scenario):
                report.ran += 1
                report.ran_by_check[name] += 1
        report.failures.extend(check_trace(trace, names))
        if on_trace is not None:
            on_trace(trace)
    if raise_on_failure and report.failures:
        raise LoopContractError(report)
    return report
