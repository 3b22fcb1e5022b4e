"""Many sequences at once: a batched engine whose every answer is its answer alone.

- `rows`: what a batched base offers (`BatchRows`) and the adapter over a real model's
  compiled stack (`StackRows`);
- `slot`: one sequence's view of the engine as the loop's `BaseModel` (`SlotBase`);
- `engine`: the scheduler (`BatchEngine`): admission, a bounded queue, passes, cancels.

docs/batching.md tells the design and what was measured; `pytest_onebit.batch` is the contract
any batched engine can be held to.
"""

from __future__ import annotations

from onebit.batch.engine import (
    BatchEngine,
    BatchRefused,
    BatchRequest,
    BatchResult,
    EngineStats,
    Handle,
    QueueFull,
)
from onebit.batch.rows import BatchRows, StackRows
from onebit.batch.slot import SequenceCancelled, SlotBase

__all__ = ["BatchEngine", "BatchRefused", "BatchRequest", "BatchResult", "BatchRows",
           "EngineStats", "Handle", "QueueFull", "SequenceCancelled", "SlotBase", "StackRows"]
