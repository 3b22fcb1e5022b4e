"""The bundled loop (or the one --onebit-loop names) held to I1..I13 on the toy base."""

from pytest_onebit import LoopContract


class TestBundledLoop(LoopContract):
    """Every conformance check on every standard scenario: perfect, garbage and half-right
    heads at k = 1, 2, 4, 7, 12 (12 clamps to the row limit), both row shapes, both round
    kinds, budgets that end mid-round, consumer stops, 1-, 2- and 3-row bases."""
