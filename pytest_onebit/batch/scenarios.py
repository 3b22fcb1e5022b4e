"""The batch contract's scenarios: who arrives when, how long, with which head, and who is
cancelled, on the toy batched base.

A `BatchScenario` is a script in pass numbers: sequence i is submitted just before pass
`arrive`, and cancelled just before pass `cancel` (if it is still there). Pass numbers make a
scenario reproducible: an engine that runs every posted row of every running sequence in a
pass (onebit's does) composes the same passes every time.

A sequence's stop token is named by where it sits in its greedy answer alone (`stop_at`: the
token at that answer index becomes a stop id), so a stop lands where the scenario wants it:
inside a block of drafts the script head got right, past the first row of a verify.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the heads a sequence may draft with: none (plain), prompt lookup, or the script head, which
#: drafts its greedy answer alone with a wrong token where a hash of the position says so
HEADS = ("none", "ngram", "script")


@dataclass(frozen=True)
class SeqSpec:
    prompt: tuple[int, ...]
    max_tokens: int
    arrive: int = 0
    cancel: int | None = None
    head: str = "none"
    k: int = 0
    sampled: bool = False
    seed: int = 0
    stop_at: int | None = None  # the answer index whose token becomes a stop id

    def __post_init__(self) -> None:
        if self.head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {self.head!r}")
        if not self.prompt or self.max_tokens < 0 or self.arrive < 0:
            raise ValueError("a sequence needs a prompt, max_tokens >= 0 and arrive >= 0")


@dataclass(frozen=True)
class BatchScenario:
    id: str
    seqs: tuple[SeqSpec, ...]
    slots: int = 4
    max_rows: int = 16
    chunk: int = 8
    queue: int = 16
    context: int | None = None
    vocab: int = 48
    seed: int = 0

    @property
    def cancels(self) -> bool:
        return any(s.cancel is not None for s in self.seqs)

    @property
    def stops(self) -> bool:
        return any(s.stop_at is not None for s in self.seqs)


def _prompt(n: int, salt: int, vocab: int = 48) -> tuple[int, ...]:
    return tuple((7 * i + 13 * salt + 3) % vocab for i in range(n))


def standard_batch_scenarios() -> list[BatchScenario]:
    """The named scenarios every batch check runs on (the mutant catalogue is killed on these)."""
    def seq(i: int, n: int, m: int, **kw) -> SeqSpec:
        return SeqSpec(_prompt(n, i), m, **kw)

    mixed = tuple(seq(i, 3 + 5 * i, 14 + 3 * i, arrive=i,
                      head=("none", "ngram", "script")[i % 3], k=(0, 3, 4)[i % 3])
                  for i in range(6))
    return [
        BatchScenario("two-plain", (seq(0, 4, 12), seq(1, 9, 16))),
        BatchScenario("staggered-mixed-heads", mixed),
        BatchScenario("long-prompt-chunked", (
            seq(0, 3, 24, head="script", k=3),
            seq(1, 41, 10, arrive=2),  # prefilled in chunks beside the first one's rounds
            seq(2, 5, 20, arrive=3, head="ngram", k=4))),
        BatchScenario("sampled-seeded", tuple(
            seq(i, 4 + i, 18, arrive=i // 2, head=("none", "script")[i % 2], k=3 * (i % 2),
                sampled=True, seed=11 + i) for i in range(5))),
        BatchScenario("queue-past-slots", tuple(
            seq(i, 3 + (i % 4), 8 + 2 * i, head="script" if i % 2 else "none",
                k=2 if i % 2 else 0) for i in range(9)), slots=3),
        BatchScenario("cancel-frees-a-slot", (
            seq(0, 6, 30, head="script", k=4),
            seq(1, 5, 30, head="script", k=4, cancel=4),  # its slot goes to the next in line
            seq(2, 7, 18, head="script", k=4),
            seq(3, 4, 12, arrive=1)), slots=2),
        BatchScenario("cancel-waiting-and-running", (
            seq(0, 5, 20, head="ngram", k=3, cancel=3),
            seq(1, 8, 20, head="script", k=3),
            seq(2, 4, 20, cancel=1),  # still waiting: it leaves the queue
            seq(3, 6, 14, arrive=2, head="script", k=3)), slots=2),
        BatchScenario("stops-inside-drafts", tuple(
            seq(i, 4 + i, 24, head="script", k=5, stop_at=3 + 2 * i, arrive=i % 2)
            for i in range(4))),
        BatchScenario("queue-full-and-too-long", (
            seq(0, 4, 20), seq(1, 5, 20), seq(2, 6, 20), seq(3, 7, 20),
            seq(4, 30, 40),  # more positions than a slot holds: refused at submit
        ), slots=1, queue=2, context=48),
        BatchScenario("one-slot-serial", tuple(seq(i, 5, 10, head="script", k=3)
                                               for i in range(3)), slots=1),
        BatchScenario("narrow-passes", tuple(seq(i, 12, 12, head="script", k=4)
                                             for i in range(4)), max_rows=6, chunk=5),
    ]
