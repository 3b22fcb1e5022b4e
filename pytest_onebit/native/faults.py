"""Check F1 (compiled loops only): a callback that fails stops the loop with what it had
emitted. The ABI has no exceptions, so a Python loop's `PartError` becomes a status: a failing
toy or head callback returns non-zero, and the library must return a negative status at once,
with every token it emitted in `out` (and committed: nothing emitted is lost).

Each fault case is a scenario and one injected fault (the n-th call of one callback fails).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_onebit.loop.scenarios import LONG_PROMPT, Scenario
from pytest_onebit.loop.trace import execute
from pytest_onebit.native.bridge import Fault

NAME = "F1-fault"
DOC = ("a failing callback stops the loop at once with a negative status; what it emitted is "
       "in out, is greedy's text, and is committed")


@dataclass(frozen=True)
class FaultCase:
    scenario: Scenario
    fault: Fault

    @property
    def id(self) -> str:
        return f"{self.scenario.id}-{self.fault.callback}#{self.fault.nth}"


def fault_cases() -> list[FaultCase]:
    """Every callback a loop calls, failing in the prefill and mid-decode, on each path."""
    one = Scenario(flavour="one-pass", head="perfect", k=4, float32=True)
    two = replace(one, flavour="two-pass")
    silent = replace(one, head="silent")
    plain = Scenario(head=None, k=0, float32=True)
    long = replace(one, prompt=LONG_PROMPT[:19], max_tokens=21)
    cases = [
        (plain, "base.verify", 1), (plain, "base.step", 3), (plain, "base.max_batch_rows", 1),
        (long, "base.verify", 2), (long, "base.last_hidden_rows", 2), (long, "head.reset", 1),
        (one, "base.verify", 2), (one, "base.commit_verify", 3), (one, "base.last_hidden_rows", 3),
        (one, "head.propose", 2), (one, "head.commit_rows", 2), (one, "head.needs_last_hidden", 1),
        (two, "base.step", 2), (two, "base.last_hidden", 2), (two, "base.verify", 3),
        (two, "head.propose", 1), (two, "head.commit_rows", 3),
        (silent, "base.step", 2), (silent, "base.last_hidden", 1), (silent, "head.commit_rows", 3),
    ]
    return [FaultCase(s, Fault(cb, nth)) for s, cb, nth in cases]


def check_fault(loop, case: FaultCase) -> None:
    """Run `case` through the compiled `loop` with its fault injected; AssertionError saying
    what the loop did wrong."""
    __tracebackhide__ = True
    from pytest_onebit.native.loop import NativeLoopError, NativeRunError

    loop.fault = case.fault
    try:
        trace = execute(loop, case.scenario)
    finally:
        loop.fault = None
    error, cb = trace.error, case.fault.callback
    if error is None:
        raise AssertionError(f"the loop never made call {case.fault.nth} of {cb}, so the "
                             "fault never fired (a fault case that tests nothing)")
    if isinstance(error, NativeLoopError):
        raise AssertionError(str(error))
    if not isinstance(error, NativeRunError):
        raise AssertionError(f"the run raised {type(error).__name__}: {error}")
    calls = error.calls
    if cb in calls:
        nth = [i for i, name in enumerate(calls) if name == cb][case.fault.nth - 1:][:1]
        after = calls[nth[0] + 1:] if nth else []
        if after:
            raise AssertionError(f"after {cb} failed the loop went on calling "
                                 f"{', '.join(after[:4])}{' ...' if len(after) > 4 else ''}")
    emitted = error.emitted
    truth = list(trace.reference.tokens)
    if emitted != truth[:len(emitted)]:
        raise AssertionError(f"emitted {emitted} before the failure; greedy's text starts "
                             f"{truth[:len(emitted)]}")
    if trace.consumer != emitted:
        raise AssertionError(f"on_token saw {trace.consumer}, out holds {emitted}")
    committed = trace.base.committed
    want = list(case.scenario.prompt) + emitted
    # A failed commit_verify leaves its batch for the base to drop; a failure in the prefill
    # leaves what earlier batches committed. Either way the base holds a prefix of `want`.
    if cb == "base.commit_verify" or not emitted:
        want = want[:len(committed)]
    if committed != want:
        raise AssertionError(f"the base committed {committed[len(case.scenario.prompt):]} "
                             f"after the prompt, but out holds {emitted}: what was emitted is "
                             "not what was committed")
