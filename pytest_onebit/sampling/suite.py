"""The sampling checks S1..S4 as pytest tests: subclass `SamplingContract` to hold a loop.

Kept apart from `sampling.checks` and `sampling.runner`, which import no pytest, so
`onebit prove` runs them from an install without it. Each test is parametrised over its
check's own grid (set `scenarios` to hold every check to one list instead); a loop that does
not sample skips every test with the reason.
"""

from __future__ import annotations

from pytest_onebit.contract.suite import contract_suite
from pytest_onebit.sampling.checks import SAMPLING

__all__ = ["SamplingContract"]

SamplingContract = contract_suite(
    SAMPLING, name="SamplingContract",
    doc="S1..S4 of docs/sampling.md, one test method per check, parametrised over its "
        "scenarios; subclass it to hold a loop (onebit_loop: onebit.run, or what "
        "--onebit-loop names; override `loop` to bind another).",
    target="loop", default="onebit_loop", grid_attr="scenarios", grid=None)
SamplingContract.__module__ = __name__
