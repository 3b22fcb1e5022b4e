"""Hypothesis strategies for the batch contract: draw a whole scenario of arrivals, lengths,
heads, seeds, stops and cancels at once."""

from __future__ import annotations

from hypothesis import strategies as st

from pytest_onebit.batch.scenarios import HEADS, BatchScenario, SeqSpec

VOCAB = 48


@st.composite
def seq_specs(draw, *, passes: int = 12) -> SeqSpec:
    head = draw(st.sampled_from(HEADS))
    budget = draw(st.integers(0, 20))
    return SeqSpec(
        prompt=tuple(draw(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=30))),
        max_tokens=budget,
        arrive=draw(st.integers(0, passes)),
        cancel=draw(st.none() | st.none() | st.integers(0, passes + 10)),
        head=head,
        k=draw(st.integers(1, 5)) if head != "none" else 0,
        sampled=draw(st.booleans()),
        seed=draw(st.integers(0, 99)),
        stop_at=draw(st.none() | st.integers(0, max(0, budget - 1))),
    )


@st.composite
def batch_scenarios(draw) -> BatchScenario:
    """Any scenario the batch contract covers: 1 to 7 sequences arriving over a dozen passes
    on 1 to 4 slots, prompts long enough to prefill in chunks, every head, greedy and sampled,
    stops anywhere in the answer, cancels before, during and after a sequence runs, narrow
    passes and a small queue."""
    chunk = draw(st.integers(2, 8))
    return BatchScenario(
        id="drawn",
        seqs=tuple(draw(st.lists(seq_specs(), min_size=1, max_size=7))),
        slots=draw(st.integers(1, 4)),
        max_rows=draw(st.integers(chunk, 20)),
        chunk=chunk,
        queue=draw(st.integers(0, 4)),
        context=draw(st.none() | st.integers(24, 64)),
        vocab=VOCAB,
        seed=draw(st.integers(0, 3)),
    )
