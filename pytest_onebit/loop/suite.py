"""The conformance suite as pytest tests: subclass `LoopContract` to hold a loop to it.

    from pytest_onebit import LoopContract

    class TestMyLoop(LoopContract):
        pass                      # holds onebit_loop (onebit.run, or --onebit-loop)

    class TestOtherLoop(LoopContract):
        @pytest.fixture
        def loop(self):
            return my_engine.run  # or bind a loop directly

Each check of `pytest_onebit.loop.checks.CHECKS` becomes one test method named after it
(`test_I7_pass_law`), parametrised over the scenarios it applies to, so a test id reads
`TestMyLoop::test_I7_pass_law[one-pass-perfect-k7-r8-prefix-n40]`. Override `scenarios` to
change the grid, set a check's method to None to leave it out, or declare known failures
with reasons in `expected_failed_checks = {"I7-pass-law": "our k is capped at 4"}`.
"""

from __future__ import annotations

from pytest_onebit.contract.suite import check_test_name, contract_suite
from pytest_onebit.loop.checks import LOOP
from pytest_onebit.loop.scenarios import standard_scenarios

__all__ = ["LoopContract", "check_test_name"]


LoopContract = contract_suite(
    LOOP, name="LoopContract",
    doc="Invariants I1..I13 of docs/contract.md, one test method per named check.",
    target="loop", default="onebit_loop", grid_attr="scenarios",
    grid=tuple(standard_scenarios()))
LoopContract.__module__ = __name__
