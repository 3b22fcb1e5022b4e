"""Hypothesis strategies for the loop's inputs: draw a whole scenario at once."""

from __future__ import annotations

from hypothesis import strategies as st

from pytest_onebit.loop.scenarios import Scenario

VOCAB = 64


@st.composite
def scenarios(draw, *, max_tokens: int = 48, max_k: int = 12, max_rows: int = 10) -> Scenario:
    """Any scenario the contract covers: random prompt (up to 24 tokens, so prefills of
    several batches), k, budget, row limit and shape, prefill width, round kind, head
    (including per-slot right / wrong patterns), consumer stop, toy seed and whether the
    base has verify_last."""
    head = draw(st.sampled_from(["perfect", "garbage", "half", "short", "silent", "over",
                                 "pattern", "pattern", None]))
    budget = draw(st.integers(0, max_tokens))
    return Scenario(
        flavour=draw(st.sampled_from(["one-pass", "two-pass"])),
        head=head,
        k=draw(st.integers(0, max_k)),
        max_batch_rows=draw(st.integers(1, max_rows)),
        rows_shape=draw(st.sampled_from(["prefix", "batch"])),
        prompt=tuple(draw(st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=24))),
        max_tokens=budget,
        stop_at=draw(st.none() | st.integers(1, max(1, budget + 1))),
        pattern=tuple(draw(st.lists(st.booleans(), min_size=1, max_size=12)))
        if head == "pattern" else (),
        vocab_size=VOCAB,
        seed=draw(st.integers(0, 3)),
        prefill_rows=draw(st.none() | st.integers(1, 2 * max_rows)),
        verify_last=draw(st.booleans()),
    )
