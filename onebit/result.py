"""What a decode returns: its tokens and what it cost (`RunResult`, `RunStats`), and the type
of the per-token callback. Data only, shared by the loop (`onebit.loop`) and the reference
decodes (`onebit.reference`), which share no code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

OnToken = Callable[[int], "bool | None"]


@dataclass(slots=True)
class RunStats:
    """What a run cost, in base passes. Decode only: the prefill is counted apart, in the
    `prefill_*` fields, and no decode field or rate includes it."""

    rounds: int = 0  # t1 tokens consumed (one per round)
    steps: int = 0  # base.step() calls after prefill
    batches: int = 0  # base.verify() calls after prefill
    batch_rows: int = 0  # rows in those batches, all together
    proposed: int = 0  # drafts the loop took from the head (after cutting to the room)
    accepted: int = 0  # drafts emitted
    emitted: int = 0  # tokens emitted
    prefill_steps: int = 0  # prompt tokens stepped (greedy(): all; run(): see prefill())
    prefill_batches: int = 0  # base.verify() calls that ran prompt tokens
    prefill_rows: int = 0  # prompt tokens in those batches
    drafts_asked: int = 0  # calls to head.propose
    fallback_round: int | None = None  # the round after which the run fell back to plain steps
    fallback_emitted: int | None = None  # tokens emitted when it did

    @property
    def passes(self) -> int:
        """Decode passes of the base: steps plus batches."""
        return self.steps + self.batches

    @property
    def prefill_passes(self) -> int:
        """Passes of the base over the prompt: prefill steps plus prefill batches."""
        return self.prefill_steps + self.prefill_batches

    @property
    def passes_per_token(self) -> float:
        """Base passes per emitted token (1.0 is plain decode's cost; lower is better)."""
        return self.passes / self.emitted if self.emitted else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return self.emitted / self.passes if self.passes else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0


@dataclass(slots=True)
class RunResult:
    tokens: list[int] = field(default_factory=list)
    stats: RunStats = field(default_factory=RunStats)
    stopped: bool = False  # True when on_token asked to stop
    seed: int | None = None  # a sampled run's seed (the default rng's), to replay it
