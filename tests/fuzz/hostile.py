"""Hostile parts for the loop, and the judge of what a run did with them.

A `Hostile` proxy stands in for a toy base, an oracle head or a consumer and, on the n-th call
of one method, raises or returns something wrong (`FAULTS`). `judge` runs a decode with it and
classifies the outcome the way the issue's table counts them:

- "clear error": a `onebit.DecodeError` (or a KeyboardInterrupt / SystemExit kept as is) whose
  `emitted` equals what the consumer received, is a prefix of the greedy text, and equals what
  the base committed after the prompt; a `PartError` names the hostile part and keeps the
  original exception as `__cause__`;
- "right answer": the run returned the greedy text (or its prefix when the consumer stopped)
  although the fault fired ("not reached" when the run ended before the hostile call);
- anything else fails the test with the reason ("traceback": an untyped exception; "silent
  wrong": a returned text that is not greedy's, or an `emitted` that does not match).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

import onebit
from onebit import DecodeError, PartError
from pytest_onebit import Oracle, ToyBase, garbage_head, half_head, perfect_head

PROMPT = [3, 1, 4, 1, 5]
VOCAB = 64


class DriverError(Exception):
    """An exception type of the part's own, as a device driver would define."""


# fresh instances on every fault: a re-raised instance would carry old tracebacks along
RAISES = {
    "RuntimeError": lambda: RuntimeError("device lost"),
    "MemoryError": lambda: MemoryError("out of memory"),
    "TypeError": lambda: TypeError("bad operand"),
    "ValueError": lambda: ValueError("bad value"),
    "KeyError": lambda: KeyError("missing"),
    "AssertionError": lambda: AssertionError("invariant"),
    "ZeroDivisionError": lambda: ZeroDivisionError("division by zero"),
    "RecursionError": lambda: RecursionError("maximum recursion depth exceeded"),
    "DriverError": lambda: DriverError("driver says no"),
    "KeyboardInterrupt": lambda: KeyboardInterrupt(),
    "SystemExit": lambda: SystemExit(3),
}

# what a hostile call returns instead of the real answer (given the real one); total: a
# return fault never raises in the harness, after the real call has changed the part's state
RETURNS = {
    "nan": lambda real: _with_nan(real),
    "inf": lambda real: _with_nan(real, np.inf),
    "short": lambda real: _array(real)[..., :-1],
    "none": lambda real: None,
    "string": lambda real: "token",
    "int": lambda real: 3,
    "2d": lambda real: np.zeros((2, 2), dtype=np.int64),
    "array": lambda real: np.asarray(real) if real is not None else None,
    "tuple": lambda real: tuple(real) if real is not None and np.ndim(real) >= 1 else (),
    "bools": lambda real: [True] * max(1, len(_seq(real))),
    "floats": lambda real: [float(t) for t in _seq(real)] or [1.0],
    "huge": lambda real: [2**70],
}
FAULTS = [*RAISES, *RETURNS]

METHODS = {
    "base": ["reset", "step", "verify", "commit_verify", "last_hidden", "last_hidden_rows",
             "max_batch_rows", "max_prefill_rows"],
    "head": ["reset", "needs_last_hidden", "propose", "commit_rows"],
    "consumer": ["__call__"],
}
FLAVOURS = ["one-pass", "two-pass", "plain", "greedy"]
HEADS = {"perfect": perfect_head, "half": half_head, "garbage": garbage_head}


def _array(real) -> np.ndarray:
    """The real answer as a float array (a 1-element one when it is not numeric)."""
    try:
        out = np.array(real, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        out = np.zeros(1)
    return out if out.ndim and out.size else np.zeros(1)


def _seq(real) -> list:
    """The real answer as a flat list of numbers (drafts, logits, ...)."""
    return [float(x) for x in _array(real).reshape(-1)] if real is not None else []


def _with_nan(real, value=np.nan):
    out = _array(real)
    out.reshape(-1)[-1] = value
    return out


class Hostile:
    """`inner` with its `method` turned hostile on call number `at` (1-based)."""

    def __init__(self, inner, method: str, at: int, fault: str) -> None:
        self.inner, self.method, self.at, self.fault = inner, method, at, fault
        self.calls = 0
        self.fired = False
        self.raised: BaseException | None = None

    def _hostile(self, fn):
        def call(*args):
            self.calls += 1
            if self.calls != self.at:
                return fn(*args)
            self.fired = True
            self.args = args
            if self.fault in RAISES:
                self.raised = RAISES[self.fault]()
                raise self.raised
            return RETURNS[self.fault](fn(*args))

        return call

    def __getattr__(self, name):
        value = getattr(self.inner, name)
        return self._hostile(value) if name == self.method else value

    def __call__(self, *args):
        fn = self.inner
        return self._hostile(fn)(*args) if self.method == "__call__" else fn(*args)


@dataclass
class Case:
    part: str  # "base", "head" or "consumer"
    method: str
    at: int
    fault: str
    flavour: str  # "one-pass", "two-pass", "plain" (run, head None) or "greedy"
    head: str = "half"
    k: int = 4
    max_tokens: int = 24
    rows: int = 8
    stop_at: int | None = None  # the consumer returns False on this token (1-based)


@functools.lru_cache(maxsize=8)
def greedy_truth(tokens: int) -> Oracle:
    """The toy's greedy text after PROMPT (the same for every batch bound)."""
    return Oracle.from_greedy(ToyBase(), PROMPT, tokens)


def judge(case: Case) -> str:
    """Run `case`; return "clear error" or "right answer", or raise AssertionError saying
    what went wrong ("traceback ...", "silent wrong ...")."""
    truth = greedy_truth(48)
    toy = ToyBase(max_batch_rows=case.rows)
    seen: list[int] = []

    def consumer(token):
        seen.append(token)
        return False if case.stop_at == len(seen) else None

    head = None
    if case.flavour in ("one-pass", "two-pass"):
        head = HEADS[case.head](truth, case.flavour)
    parts = {"base": toy, "head": head, "consumer": consumer}
    if parts[case.part] is None:
        return "skip"
    hostile = Hostile(parts[case.part], case.method, case.at, case.fault)
    parts[case.part] = hostile
    base, head, on_token = parts["base"], parts["head"], parts["consumer"]
    try:
        if case.flavour == "greedy":
            result = onebit.greedy(base, PROMPT, max_tokens=case.max_tokens, on_token=on_token)
        else:
            result = onebit.run(base, head, PROMPT, max_tokens=case.max_tokens, k=case.k,
                                on_token=on_token)
    except (DecodeError, KeyboardInterrupt, SystemExit) as error:
        return _judge_error(case, error, seen, toy, hostile, truth)
    except BaseException as error:
        raise AssertionError(f"traceback: {case} raised {type(error).__name__}: {error}") from error
    expected = list(truth.tokens[: len(result.tokens)])
    if result.tokens != expected or result.tokens != seen:
        raise AssertionError(f"silent wrong: {case} returned {result.tokens}, greedy is "
                             f"{expected}")
    if toy.committed != PROMPT + result.tokens:
        raise AssertionError(f"silent wrong: {case} left {toy.committed} committed")
    if not result.stopped and len(result.tokens) != case.max_tokens:
        raise AssertionError(f"silent wrong: {case} stopped early without saying so")
    return "right answer" if hostile.fired else "not reached"


def _judge_error(case, error, seen, toy, hostile, truth) -> str:
    emitted = getattr(error, "emitted", None)
    if case.part == "consumer" and hostile.fired and case.fault in RAISES:
        seen = [*seen, hostile.args[0]]  # handed to the consumer, which raised: emitted
    if emitted != seen:
        raise AssertionError(f"silent wrong: {case}: emitted {emitted}, the consumer got {seen}")
    if seen != list(truth.tokens[: len(seen)]):
        raise AssertionError(f"silent wrong: {case}: emitted {seen} is not greedy's text")
    committed = toy.committed[len(PROMPT):]
    if len(toy.committed) < len(PROMPT):  # stopped in the prefill: part of the prompt only
        ok = not seen and toy.committed == PROMPT[: len(toy.committed)]
    elif case.method == "commit_verify" and hostile.fired and case.fault in RAISES:
        # a commit_verify that raises has, by its own account, committed nothing: the tokens
        # the consumer already has are the record, and the base holds a prefix of them
        ok = committed == seen[: len(committed)] and toy.committed[: len(PROMPT)] == PROMPT
    else:
        ok = committed == seen and toy.committed[: len(PROMPT)] == PROMPT
    if not ok:
        raise AssertionError(f"silent wrong: {case}: base committed {toy.committed}, emitted "
                             f"{seen}")
    if isinstance(error, PartError) and case.fault in RAISES:
        if error.culprit != case.part or error.__cause__ is not hostile.raised:
            raise AssertionError(f"{case}: PartError names {error.culprit!r}, cause "
                                 f"{error.__cause__!r}")
        if error.pos != len(PROMPT) + len(seen):
            raise AssertionError(f"{case}: pos {error.pos}, expected {len(PROMPT) + len(seen)}")
    if isinstance(error, DecodeError) and not hostile.fired:
        raise AssertionError(f"{case}: a DecodeError although the hostile call never fired")
    if not isinstance(error, DecodeError) and error is not hostile.raised:
        raise AssertionError(f"{case}: {error!r} raised, not the injected one")
    return "clear error"
