"""When drafting does not pay, stop drafting: the fallback policy of docs/contract.md.

A round that drafts costs more than a plain step (a batch of n rows is not free, and the head
itself takes time) and pays only in the tokens it emits. Plain decode emits one token per step,
so a round *breaks even* when it emits at least as many tokens as it costs, in steps. After
`window` consecutive drafting rounds below break-even the run switches to plain steps for the
rest of the run and drops the head: it is asked for nothing more and told of no more rows
(`stats.fallback_emitted` says how many emitted tokens it saw); the next run resets it.

Cost is counted in steps. By default it is a model (deterministic, so a test can predict when
the policy fires): a step costs 1, a verify of n rows `1 + (n - 1) * row_cost`, a call to the
head `draft_cost`. With `measured=True` a round's cost is its wall time over the mean time of
a step, taken from the prefill, so a slow head or a slow batch is charged what it really took.
Rounds that do not ask the head (no room left) cost what plain decode costs and are not
counted either way.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fallback:
    """The policy's parameters (pass an instance as `run(..., fallback=Fallback())`)."""

    window: int = 4  # consecutive losing rounds before switching to plain steps
    row_cost: float = 0.1  # extra cost of each verify row past the first, in steps
    draft_cost: float = 0.05  # cost of one call to the head, in steps
    measured: bool = False  # charge wall time instead of the model above

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"fallback window must be an integer >= 1, got {self.window!r}")
        for name in ("row_cost", "draft_cost"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ValueError(f"fallback {name} must be a number >= 0, got {value!r}")

    def round_cost(self, *, steps: int, batches: int, batch_rows: int, drafts_asked: int,
                   seconds: float, step_seconds: float) -> float:
        """What one round cost, in steps."""
        if self.measured and step_seconds > 0:
            return seconds / step_seconds
        return (steps + batches + (batch_rows - batches) * self.row_cost
                + drafts_asked * self.draft_cost)


class FallbackWatch:
    """One run's view of the policy: counts consecutive losing rounds, says when to switch."""

    def __init__(self, policy: Fallback, step_seconds: float) -> None:
        self.policy = policy
        self.step_seconds = step_seconds
        self.losing = 0

    def losing_round(self, *, emitted: int, cost: float) -> bool:
        """Record a drafting round; True when the run should switch to plain steps now."""
        self.losing = self.losing + 1 if emitted < cost else 0
        return self.losing >= self.policy.window
