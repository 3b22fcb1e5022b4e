"""The batch contract M1..M6 on onebit's `BatchEngine` over the toy batched base: every
sequence equals its run alone bit for bit, cancels free their slot and leak nothing, nobody
starves, budgets and stops hold inside a batch, the counters add up, and admission refuses what
it cannot hold (docs/batching.md). The mutant catalogue `mutants/batch/` is killed here."""

from pytest_onebit.batch.suite import BatchContract


class TestOnebitBatchEngine(BatchContract):
    """onebit's batched engine, each sequence decoded by `onebit.run`."""
