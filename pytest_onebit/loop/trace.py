"""Running a loop on one scenario, and what it left behind (the trace the checks read).

`execute(run, scenario)` runs any `run()` implementation on a fresh toy base with an oracle
head, next to plain greedy decode on another fresh base. Whatever the loop returns or raises
is kept; the trace's accessors turn a missing or malformed field into an `AssertionError`
naming it, so a check fails with a message instead of crashing.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_onebit.loop.scenarios import Scenario

RunFn = Callable[..., Any]

#: What a check may read of a run's result (the documented contract of RunResult/RunStats).
STATS_FIELDS = ("steps", "batches", "rounds", "proposed", "accepted", "passes_per_token")


@dataclass
class Trace:
    """What happened when a loop ran one scenario, next to what plain decode did."""

    scenario: Scenario
    base: Any  # a pytest_onebit.doubles.toy.ToyBase that counts everything
    head: Any  # a pytest_onebit.doubles.heads.OracleHead, or None
    reference: Any  # onebit.greedy's RunResult
    result: Any = None
    error: BaseException | None = None
    consumer: list[int] = field(default_factory=list)  # what on_token saw, in order

    @property
    def prompt(self) -> list[int]:
        return list(self.scenario.prompt)

    def _result(self) -> Any:
        __tracebackhide__ = True
        if self.error is not None:
            raise AssertionError(
                f"the loop raised {type(self.error).__name__}: {self.error}"
            ) from self.error
        if self.result is None:
            raise AssertionError("the loop returned None, not a result with `tokens` and "
                                 "`stats`")
        return self.result

    @property
    def tokens(self) -> list[int]:
        """The emitted tokens, checked to be a sequence of ints."""
        __tracebackhide__ = True
        result = self._result()
        if not hasattr(result, "tokens"):
            raise AssertionError(f"the loop's result ({type(result).__name__}) has no `tokens`")
        try:
            return [operator.index(t) for t in result.tokens]
        except TypeError as error:
            raise AssertionError(f"result.tokens is not a sequence of token ids: "
                                 f"{result.tokens!r:.80} ({error})") from None

    def stat(self, name: str) -> Any:
        """`result.stats.<name>`, or an AssertionError naming what is missing."""
        __tracebackhide__ = True
        result = self._result()
        stats = getattr(result, "stats", None)
        if stats is None:
            raise AssertionError(f"the loop's result ({type(result).__name__}) has no `stats`")
        if not hasattr(stats, name):
            raise AssertionError(f"result.stats ({type(stats).__name__}) has no `{name}`")
        return getattr(stats, name)

    def optional_stat(self, name: str) -> Any:
        """`result.stats.<name>` where the contract makes it optional (None when absent)."""
        return getattr(getattr(self._result(), "stats", None), name, None)

    @property
    def stopped(self) -> bool:
        __tracebackhide__ = True
        result = self._result()
        if not hasattr(result, "stopped"):
            raise AssertionError(f"the loop's result ({type(result).__name__}) has no "
                                 "`stopped`: the contract asks for it (True when on_token "
                                 "stopped the run)")
        return bool(result.stopped)

    @property
    def decode_steps(self) -> int:
        """Steps after the prompt (a pass at position P or later)."""
        return self.base.passes_from(len(self.scenario.prompt))[0]

    @property
    def decode_batches(self) -> int:
        """Verify batches after the prompt."""
        return self.base.passes_from(len(self.scenario.prompt))[1]

    @property
    def decode_batch_rows(self) -> int:
        return self.base.passes_from(len(self.scenario.prompt))[2]

    @property
    def prefill_calls(self) -> list[tuple[str, int, int]]:
        """The base's passes over the prompt, (kind, position, rows), in call order."""
        return [call for call in self.base.calls if call[1] < len(self.scenario.prompt)]


def stopper(stop_at: int | None, seen: list[int]) -> Callable[[int], bool]:
    """An on_token that records every token and stops on the `stop_at`-th (1-based)."""

    def on_token(token: int) -> bool:
        seen.append(int(token))
        return stop_at is None or len(seen) < stop_at

    return on_token


def execute(run: RunFn, scenario: Scenario) -> Trace:
    """Run `scenario` through `run` (any implementation of onebit.run's signature)."""
    from onebit.reference import greedy
    from pytest_onebit.doubles.heads import Oracle

    s = scenario
    # The oracle looks further than the budget (and than an over-proposing head reaches) so
    # that a loop drafting past the budget is visible.
    oracle = Oracle.from_greedy(s.make_base(), s.prompt, s.max_tokens + s.k + 8)
    reference = greedy(s.make_base(), list(s.prompt), max_tokens=s.max_tokens,
                       on_token=stopper(s.stop_at, []))
    trace = Trace(s, s.make_base(), None, reference)
    trace.head = s.make_head(oracle)
    try:
        trace.result = run(trace.base, trace.head, list(s.prompt), max_tokens=s.max_tokens,
                           k=s.k, on_token=stopper(s.stop_at, trace.consumer))
    except (Exception, SystemExit) as error:  # a broken loop may raise anything
        trace.error = error
    return trace
