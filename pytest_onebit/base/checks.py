"""The base-model contract: what `onebit.BaseModel` promises, as named checks B1..B8.

The loop's checks (I1..I13) hold a loop to the protocol on a toy base. These hold the other
side, a base model (the toy, the NumPy forward, a user's NPU or GPU forward), to what a loop
relies on. The truth is always *stepping*: a fresh base from the factory steps a fixed token
*script* one token at a time and records, per position, the step's logits, `last_hidden()` and
(when the base has layer taps) the tapped rows. Every check compares what the base under test
shows after verify / commit / reset with that record, **bit for bit** (shape and dtype too).

Observables, for every committed history of length L:
- the next step's logits (`step(script[L], L)`), and the `last_hidden()` after it;
- `last_hidden()` (the row of token L-1);
- `last_hidden_rows()` after a commit of n rows: `[n, H]` or `[len(batch), H]`, its first n
  rows stepping's (rows past n belong to rejected tokens and are not read);
- `committed_length`, if the base has that attribute;
- `tapped_rows()` (what a DFlash-style head reads), if the base has `set_layer_taps`,
  `layer_count` and `tapped_rows`: every layer is tapped on every base the checks make.

A batch of n committed rows is followed, as in a real round, by rows of *rejected* tokens
(different from the script's), so a base that keeps anything of them is seen.

Every check but B4 resets the base between trials with `reset()`; a base whose reset is broken
fails B4 (and may fail the others too). See docs/base-contract.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_onebit.contract.core import Contract, NotApplicable

BaseFactory = Callable[[], object]

#: How a base refuses a call it must not accept: a typed error, not a crash or silence.
REFUSAL_TYPES_DOC = "ValueError or onebit.ContractError"


@dataclass(frozen=True)
class BaseSettings:
    """What the checks exercise. Defaults suit a tiny model on two cores (a few seconds)."""

    positions: tuple[int, ...] = (0, 5)  # where B1's and B2's batches start
    script_length: int = 40  # tokens in the truth script (longer if a batch needs it)
    examples: int = 20  # Hypothesis sequences in B3
    seed: int = 0  # picks the script's tokens

    def __post_init__(self) -> None:
        positions = tuple(self.positions)
        if any(isinstance(p, bool) or not isinstance(p, int) for p in positions):
            raise ValueError(f"positions must be integers, got {self.positions!r}")
        object.__setattr__(self, "positions", positions)  # a list would make it unhashable
        if not self.positions or any(p < 0 for p in self.positions):
            raise ValueError(f"positions must be non-negative and not empty: {self.positions}")
        if self.script_length < 2:
            raise ValueError(f"script_length must be >= 2, got {self.script_length}")
        if self.examples < 1:
            raise ValueError(f"examples must be >= 1, got {self.examples}")


# ---------------------------------------------------------------------------------------------
# Comparisons


def same(got: object, want: np.ndarray, what: str, against: str = "stepping's") -> None:
    """`got` is `want` bit for bit (shape, dtype, every value), or AssertionError saying where
    (`against` names where `want` came from)."""
    __tracebackhide__ = True
    got = np.asarray(got)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape}, {against} is {want.shape}")
    if got.dtype != want.dtype:
        raise AssertionError(f"{what}: dtype {got.dtype}, {against} is {want.dtype}")
    equal = (got == want) | (np.isnan(got) & np.isnan(want))
    if not equal.all():
        wrong = np.argwhere(~equal)
        first = tuple(int(i) for i in wrong[0])
        worst = float(np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        raise AssertionError(
            f"{what}: {len(wrong)} of {got.size} values differ from {against}; first at "
            f"index {first}: {got[first]!r} vs {want[first]!r} (largest difference {worst:.3g})"
        )


def refused(call: Callable[[], object], what: str, value: object = None) -> None:
    """`call()` must raise a ValueError or onebit.ContractError (a refusal, not a crash) whose
    message names `value` (the row count, position or n at fault), or at least says something
    when there is no value to name."""
    __tracebackhide__ = True
    from onebit.errors import ContractError

    try:
        call()
    except (ValueError, ContractError) as error:
        message = str(error)
        if not message.strip() or message == "None":
            raise AssertionError(f"{what} was refused with an empty message") from error
        if value is not None and str(value) not in message:
            raise AssertionError(f"{what} was refused, but the message does not name {value}: "
                                 f"{message!r}") from error
        return
    except Exception as error:  # a crash is not a refusal: say which
        raise AssertionError(
            f"{what} raised {type(error).__name__}: {error}; a base refuses with a "
            f"{REFUSAL_TYPES_DOC} naming the value"
        ) from error
    raise AssertionError(f"{what} was accepted; the base must refuse it")


# ---------------------------------------------------------------------------------------------
# The truth: stepping


def has_taps(base: object) -> bool:
    return all(hasattr(base, a) for a in ("set_layer_taps", "tapped_rows", "layer_count"))


def wrong_token(token: int, slot: int, vocab: int) -> int:
    """A token that is not `token`: a rejected draft."""
    return (int(token) + 1 + slot % (vocab - 1)) % vocab


@dataclass
class Stepped:
    """What stepping the script one token at a time shows, position by position."""

    script: list[int]
    logits: list[np.ndarray] = field(default_factory=list)  # step(script[i], i)'s output
    hidden: list[np.ndarray] = field(default_factory=list)  # last_hidden() after it
    taps: np.ndarray | None = None  # tapped_rows() after the whole script: [T, layers, H]


class Subject:
    """A factory of bases under test, its settings, and stepping's record (made once)."""

    def __init__(self, factory: BaseFactory, settings: BaseSettings | None = None) -> None:
        if not callable(factory):
            raise TypeError(f"a base factory must be callable with no arguments, got {factory!r}")
        self.factory = factory
        self.settings = settings or BaseSettings()
        self._truth: Stepped | None = None
        self._probe: object | None = None

    def fresh(self) -> object:
        """A new base from the factory, every layer tapped when it has taps. Stepping's record
        is made first, so no check's base is alive while the truth is stepped."""
        self.truth  # noqa: B018
        return self._make()

    def _make(self) -> object:
        base = self.factory()
        for member in ("step", "verify", "commit_verify", "reset", "last_hidden",
                       "last_hidden_rows", "max_batch_rows", "vocab_size"):
            if not hasattr(base, member):
                raise AssertionError(f"the factory's {type(base).__name__} has no {member!r}: "
                                     "not a onebit.BaseModel")
        if has_taps(base):
            base.set_layer_taps(list(range(base.layer_count)))
        return base

    @property
    def probe(self) -> object:
        """One base kept to read sizes from (vocab, max rows)."""
        if self._probe is None:
            self._probe = self._make()
        return self._probe

    @property
    def vocab(self) -> int:
        return int(self.probe.vocab_size)

    @property
    def max_rows(self) -> int:
        return int(self.probe.max_batch_rows())

    @property
    def prefill_rows(self) -> int:
        """The widest prefill batch: `max_prefill_rows()` where the base declares it, else
        `max_batch_rows()` (the loop's rule, docs/contract.md)."""
        declared = getattr(self.probe, "max_prefill_rows", None)
        return int(declared()) if callable(declared) else self.max_rows

    @property
    def widest(self) -> int:
        """The most rows one verify may take, prefill or decode."""
        return max(self.max_rows, self.prefill_rows)

    @property
    def truth(self) -> Stepped:
        if self._truth is None:
            self._truth = self._step_script()
        return self._truth

    def _step_script(self) -> Stepped:
        s = self.settings
        length = max(s.script_length, max(s.positions) + self.widest + 8)
        rng = np.random.default_rng(s.seed)
        truth = Stepped([int(t) for t in rng.integers(0, self.vocab, size=length)])
        base = self._make()
        for pos, token in enumerate(truth.script):
            logits = np.asarray(base.step(token, pos))
            if logits.shape != (self.vocab,):
                raise AssertionError(f"step({token}, {pos}) gave logits of shape {logits.shape}; "
                                     f"vocab_size is {self.vocab}")
            if not np.isfinite(logits).all():
                raise AssertionError(f"step({token}, {pos}) gave non-finite logits")
            truth.logits.append(logits.copy())
            truth.hidden.append(np.asarray(base.last_hidden()).copy())
        if has_taps(base):
            truth.taps = np.asarray(base.tapped_rows()).copy()
        return truth

    # -- driving a base and reading what it shows ------------------------------------------

    def step_to(self, base: object, length: int, *, check: bool = False) -> None:
        """Step script[:length] from a reset base (comparing each step when `check`)."""
        for pos in range(length):
            self.step(base, pos, check=check)

    def step(self, base: object, pos: int, *, check: bool = True, where: str = "") -> None:
        """Step script[pos] at pos; with `check`, its logits and last_hidden are stepping's.
        `where` says what came before, for the message."""
        __tracebackhide__ = True
        t = self.truth
        logits = base.step(t.script[pos], pos)
        if check:
            where = f"{where}, then " if where else ""
            same(logits, t.logits[pos], f"{where}step({t.script[pos]}, {pos})'s logits")
            same(base.last_hidden(), t.hidden[pos], f"{where}last_hidden() after the step at "
                 f"{pos}")

    def batch(self, base: object, pos: int, rows: int, keep: int) -> np.ndarray:
        """verify script[pos:pos+keep] + rejected tokens (`rows` in all) at pos; commit `keep`.
        Checks the kept rows' logits; returns the verify's logits."""
        __tracebackhide__ = True
        t = self.truth
        tokens = t.script[pos : pos + keep]
        tokens += [wrong_token(t.script[pos + i], i, self.vocab) for i in range(keep, rows)]
        logits = np.asarray(base.verify(tokens, pos))
        if logits.shape != (rows, self.vocab):
            raise AssertionError(f"verify of {rows} rows at {pos} gave logits of shape "
                                 f"{logits.shape}; want ({rows}, {self.vocab})")
        for i in range(keep):
            same(logits[i], t.logits[pos + i], f"verify row {i} of {rows} at {pos}")
        base.commit_verify(keep)
        return logits

    def observe(self, base: object, length: int, where: str, *, kept: int | None = None) -> None:
        """Everything `base` shows with script[:length] committed equals stepping's. `kept`:
        the rows the last commit_verify kept (its last_hidden_rows are read)."""
        __tracebackhide__ = True
        t = self.truth
        if hasattr(base, "committed_length") and base.committed_length != length:
            raise AssertionError(f"{where}: committed_length is {base.committed_length}; "
                                 f"stepping gives {length}")
        if length:
            same(base.last_hidden(), t.hidden[length - 1], f"{where}: last_hidden()")
        if kept is not None:
            rows = np.asarray(base.last_hidden_rows())
            batch = rows.shape[0] if rows.ndim == 2 else -1
            if rows.ndim != 2 or batch < kept:
                raise AssertionError(f"{where}: last_hidden_rows() has shape {rows.shape}; it "
                                     f"must hold the {kept} committed rows (or the whole batch)")
            want = np.stack(t.hidden[length - kept : length]) if kept else rows[:0]
            same(rows[:kept], want, f"{where}: last_hidden_rows()[:{kept}]")
        if t.taps is not None:
            same(base.tapped_rows(), t.taps[:length], f"{where}: tapped_rows()")


# ---------------------------------------------------------------------------------------------
# The checks


#: The base contract: a case is one `Subject` (a factory, its settings, stepping's record).
BASE = Contract("base", prepare=lambda factory, settings: Subject(factory, settings),
                scenarios=lambda: [BaseSettings()], scenario_id=lambda settings: "")
BASE_CHECKS = BASE.checks
base_check = BASE.check


@base_check("B1-verify-rows")
def check_verify_rows(s: Subject) -> None:
    """B1: every row of verify(tokens, pos) equals what stepping those tokens gives, logits and
    hidden rows, bit for bit, for every batch size 1..max_batch_rows() at every position of the
    settings; step and verify give logits of shape [vocab_size] and [n, vocab_size]."""
    __tracebackhide__ = True
    base = s.fresh()
    for pos in s.settings.positions:
        for rows in range(1, s.max_rows + 1):
            base.reset()
            s.step_to(base, pos)
            s.batch(base, pos, rows, rows)
            s.observe(base, pos + rows, f"verify of {rows} rows at {pos}, all committed",
                      kept=rows)


@base_check("B2-commit-exact")
def check_commit_exact(s: Subject) -> None:
    """B2: commit_verify(n), for every n in 0..rows of a max_batch_rows() batch whose rows past
    n are rejected tokens, leaves every observable as stepping n tokens would: last_hidden(),
    last_hidden_rows()'s first n rows, committed_length, the tapped rows a head reads, and the
    next step's logits and hidden."""
    __tracebackhide__ = True
    base = s.fresh()
    rows = s.max_rows
    for pos in s.settings.positions:
        for n in range(rows + 1):
            base.reset()
            s.step_to(base, pos)
            s.batch(base, pos, rows, n)
            where = f"commit_verify({n}) of a {rows}-row verify at {pos}"
            s.observe(base, pos + n, where, kept=n)
            s.step(base, pos + n, where=where)
            s.observe(base, pos + n + 1, f"{where}, then a step")


# Sequences seen in the field, run before the random ones (each op: ("step",), ("batch",
# rows, kept) or ("reset",); rows are cut to max_batch_rows()).
FIELD_SEQUENCES: dict[str, tuple[tuple, ...]] = {
    # vLLM #39273: a step with no drafts, right after a batch that accepted some
    "step-after-partial-accept": (("batch", 4, 2), ("step",), ("step",), ("batch", 4, 3),
                                  ("step",)),
    "empty-commits": (("batch", 3, 0), ("batch", 3, 0), ("step",), ("batch", 2, 0),
                      ("batch", 2, 2), ("step",)),
    # vLLM #5765: a full accept, then the next round
    "full-accepts": (("batch", 8, 8), ("step",), ("batch", 8, 8), ("batch", 8, 1), ("step",)),
    "one-row-batches": (("batch", 1, 1), ("batch", 1, 0), ("step",), ("batch", 1, 1)),
    "reset-mid-run": (("batch", 5, 3), ("reset",), ("step",), ("batch", 4, 2), ("step",)),
}


OP_KINDS = ("step", "step", "batch", "batch", "batch", "batch", "reset")


def play(s: Subject, base: object, ops: Sequence[tuple], name: str) -> None:
    """Run `ops` from a reset base, checking every output and observable after each op."""
    __tracebackhide__ = True
    base.reset()
    length, done = 0, []
    end = len(s.truth.script) - 1  # keep one script token for the closing step
    for op in ops:
        where = f"{name}, after {' '.join(done + [_op_text(op)])}"
        if op[0] == "reset":
            base.reset()
            length = 0
        elif op[0] == "step":
            if length >= end:
                continue
            s.step(base, length, where=f"{name}, after {' '.join(done) or 'a reset'}")
            length += 1
            s.observe(base, length, where)
        else:
            rows = min(op[1], s.max_rows, end - length)
            if rows < 1:
                continue
            kept = min(op[2], rows)
            s.batch(base, length, rows, kept)
            length += kept
            s.observe(base, length, where, kept=kept)
        done.append(_op_text(op))
    # whatever the history, the next pass reads the right state
    s.step(base, length, where=f"{name}, after {' '.join(done) or 'a reset'}")


def _op_text(op: tuple) -> str:
    return f"verify({op[1]})+commit({op[2]})" if op[0] == "batch" else op[0]


@base_check("B3-sequences")
def check_sequences(s: Subject) -> None:
    """B3: any sequence of steps, verifies with partial, empty and full commits, and resets
    leaves the base where stepping the committed tokens would, after every call: the field's
    patterns first (a step right after a partial accept, vLLM #39273; empty commits; full
    accepts), then Hypothesis-drawn sequences."""
    __tracebackhide__ = True
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    base = s.fresh()
    for name, ops in FIELD_SEQUENCES.items():
        play(s, base, ops, name)
    rows = s.max_rows
    # steps and batches often, a reset now and then; rows and kept are cut as play() says
    op = st.tuples(st.sampled_from(OP_KINDS), st.integers(1, rows), st.integers(0, rows)).map(
        lambda drawn: drawn if drawn[0] == "batch" else drawn[:1])

    @settings(parent=settings.default, max_examples=s.settings.examples, deadline=None,
              suppress_health_check=list(HealthCheck), database=None)
    @given(ops=st.lists(op, min_size=1, max_size=12))
    def drawn_sequence(ops: list[tuple]) -> None:
        play(s, base, ops, "a drawn sequence")

    drawn_sequence()


@base_check("B4-reset")
def check_reset(s: Subject) -> None:
    """B4: reset() gives back the initial behaviour whatever came before (steps, a partial
    commit, a verify left pending): the steps, a verify at position 0 and everything observable
    equal a fresh base's, and a second reset changes nothing."""
    __tracebackhide__ = True
    base = s.fresh()
    rows = min(3, s.max_rows)
    s.step_to(base, 4)
    s.batch(base, 4, rows, rows - 1)
    s.step(base, 4 + rows - 1, check=False)
    base.verify(s.truth.script[:rows], 4 + rows)  # left pending
    base.reset()
    s.observe(base, 0, "after reset()")
    s.step_to(base, 3, check=True)
    s.observe(base, 3, "after reset() and 3 steps")
    base.reset()
    base.reset()
    s.batch(base, 0, rows, rows)
    s.observe(base, rows, f"after two resets and a verify of {rows} rows at 0", kept=rows)
    s.step(base, rows)


@base_check("B5-refusals")
def check_refusals(s: Subject) -> None:
    """B5: a verify wider than max_batch_rows() (or max_prefill_rows() where that is wider), a
    step or verify at a position other than the
    committed length, an empty verify, a commit_verify with no batch pending (none yet, twice,
    after a step, after a reset) or of more rows than the batch, are refused with a ValueError
    or onebit.ContractError whose message names the value at fault (row count, position, n),
    and the committed state is unchanged: the next step is stepping's."""
    __tracebackhide__ = True
    base = s.fresh()
    script, rows, widest = s.truth.script, s.max_rows, s.widest
    s.step_to(base, 3)
    wider = f", max_prefill_rows() = {s.prefill_rows}" if s.prefill_rows > rows else ""
    refused(lambda: base.verify(script[3 : 4 + widest], 3),
            f"verify of {widest + 1} rows (max_batch_rows() = {rows}{wider})", widest + 1)
    refused(lambda: base.step(script[3], 4), "step at 4 with 3 committed", 4)
    refused(lambda: base.step(script[3], 2), "step at 2 with 3 committed", 2)
    refused(lambda: base.verify(script[3:4], 4), "verify at 4 with 3 committed", 4)
    refused(lambda: base.verify([], 3), "an empty verify")
    refused(lambda: base.commit_verify(1), "commit_verify(1) with no verify ever run", 1)
    s.observe(base, 3, "after the refused calls")
    s.batch(base, 3, min(2, rows), 1)
    refused(lambda: base.commit_verify(1), "a second commit_verify(1) of one batch", 1)
    s.step(base, 4)
    refused(lambda: base.commit_verify(0), "commit_verify(0) after a step", 0)
    base.verify(script[5:6], 5)
    refused(lambda: base.commit_verify(2), "commit_verify(2) of a 1-row batch", 2)
    s.observe(base, 5, "after commit_verify(2) of a 1-row batch was refused")
    base.verify(script[5:6], 5)
    base.reset()
    refused(lambda: base.commit_verify(1), "commit_verify(1) after reset() dropped the batch", 1)
    s.step_to(base, 2, check=True)
    s.observe(base, 2, "after the refusals and a reset")


@base_check("B6-determinism")
def check_determinism(s: Subject) -> None:
    """B6: the same calls give stepping's bits on two fresh bases driven in turn, call by call
    (no state shared between instances: caches, buffers, tap lists), and on a base whose caches
    a long run with wide batches warmed before a reset."""
    __tracebackhide__ = True
    a, b, warmed = s.fresh(), s.fresh(), s.fresh()
    script, rows = s.truth.script, s.max_rows
    for pos in range(0, len(script) - rows, rows):
        warmed.verify(script[pos : pos + rows], pos)
        warmed.commit_verify(rows)
    bases = {"a first fresh base": a, "a second fresh base driven in turn with it": b,
             "a base warmed by a long run, then reset": warmed}
    for base in bases.values():
        base.reset()
    ops = (("step",), ("batch", min(3, rows), min(2, rows)), ("step",),
           ("batch", rows, rows - 1), ("step",))
    length = 0
    for i, op in enumerate(ops):
        for label, base in bases.items():
            where = f"{label}, call {i + 1} ({_op_text(op)})"
            if op[0] == "step":
                s.step(base, length, where=where)
                s.observe(base, length + 1, where)
            else:
                s.batch(base, length, op[1], op[2])
                s.observe(base, length + op[2], where, kept=op[2])
        length += 1 if op[0] == "step" else op[2]


@base_check("B7-prefill-rows")
def check_prefill_rows(s: Subject) -> None:
    """B7: where a base declares max_prefill_rows() wider than max_batch_rows(), a verify of
    every width past max_batch_rows() up to it, committed whole (as the loop's prefill does),
    at every position of the settings, equals stepping: every row's logits, last_hidden(),
    last_hidden_rows(), the taps, and the next step. (Narrower widths are B1's.)"""
    __tracebackhide__ = True
    base = s.fresh()
    for pos in s.settings.positions:
        for rows in range(s.max_rows + 1, s.prefill_rows + 1):
            base.reset()
            s.step_to(base, pos)
            s.batch(base, pos, rows, rows)
            where = f"a prefill batch of {rows} rows at {pos}, all committed"
            s.observe(base, pos + rows, where, kept=rows)
            s.step(base, pos + rows, where=where)


@base_check("B8-verify-last")
def check_verify_last(s: Subject) -> None:
    """B8: where a base defines the optional verify_last(tokens, pos) (the loop's prefill calls
    it instead of verify), it returns verify(tokens, pos)'s last row bit for bit (shape
    [vocab_size], dtype, every value) for every width 1..the widest batch at every position of
    the settings, and a commit_verify after it leaves the base as stepping leaves it
    (committed whole, as the prefill does, and, up to max_batch_rows(), a prefix ending in
    rejected rows): last_hidden(), last_hidden_rows(), the taps, committed_length and the next
    step. Not applicable, with the reason, to a base without verify_last."""
    __tracebackhide__ = True
    base = s.fresh()
    if not callable(getattr(base, "verify_last", None)):
        raise NotApplicable(f"{type(base).__name__} has no verify_last (optional; the loop's "
                            "prefill then uses verify)")
    twin = s.fresh()  # gives verify's rows for the same batch
    t = s.truth
    for pos in s.settings.positions:
        for rows in range(1, s.widest + 1):
            keeps = sorted({rows, rows // 2}) if rows <= s.max_rows else [rows]
            for keep in keeps:
                tokens = t.script[pos : pos + keep]
                tokens += [wrong_token(t.script[pos + i], i, s.vocab) for i in range(keep, rows)]
                for b in (base, twin):
                    b.reset()
                    s.step_to(b, pos)
                want = np.asarray(twin.verify(tokens, pos))
                twin.commit_verify(0)
                where = f"verify_last of {rows} rows at {pos}"
                got = base.verify_last(tokens, pos)
                if want.ndim != 2 or want.shape[0] != rows:
                    raise AssertionError(f"verify of {rows} rows at {pos} gave logits of shape "
                                         f"{want.shape}")
                same(got, want[-1], where, against=f"verify's row {rows - 1}")
                if keep == rows:
                    same(got, t.logits[pos + rows - 1], where)
                base.commit_verify(keep)
                where += f", then commit_verify({keep})"
                s.observe(base, pos + keep, where, kept=keep)
                s.step(base, pos + keep, where=where)
