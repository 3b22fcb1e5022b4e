"""The conformance suite as pytest tests: subclass `LoopContract` to hold a loop to it.

    from pytest_onebit import LoopContract

    class TestMyLoop(LoopContract):
        pass                      # holds spec_run (onebit.run, or --onebit-loop)

    class TestOtherLoop(LoopContract):
        @pytest.fixture
        def loop(self):
            return my_engine.run  # or bind a loop directly

Each check of `pytest_onebit.contract.CHECKS` becomes one test method named after it
(`test_I7_pass_law`), parametrised over the scenarios it applies to, so a test id reads
`TestMyLoop::test_I7_pass_law[one-pass-perfect-k7-r8-prefix-n40]`. Override `scenarios` to
change the grid, set a check's method to None to leave it out, or declare known failures
with reasons in `expected_failed_checks = {"I7-pass-law": "our k is capped at 4"}`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from pytest_onebit.checks import CHECKS, Check, run_check
from pytest_onebit.scenarios import Scenario, standard_scenarios
from pytest_onebit.trace import RunFn


def check_test_name(check_name: str) -> str:
    """`I7-pass-law` -> `test_I7_pass_law` (the mutant runner reads it back by that shape)."""
    return "test_" + check_name.replace("-", "_")


def _make_test(check: Check):
    def test(self, loop: RunFn, onebit_scenario: Scenario, onebit_traces) -> None:
        __tracebackhide__ = True
        run_check(check, onebit_traces.trace(loop, onebit_scenario))

    test.__name__ = test.__qualname__ = check_test_name(check.name)
    test.__doc__ = check.doc
    test.onebit_check = check.name  # read by the plugin's pytest_generate_tests
    return pytest.mark.onebit_check(check.name)(test)


class LoopContract:
    """Invariants I1..I13 of docs/contract.md, one test method per named check."""

    scenarios: Sequence[Scenario] = tuple(standard_scenarios())
    #: check name -> why it is expected to fail; each test of that check is an xfail with the
    #: reason when it fails and an XPASS (reported, not a failure) when it passes. Unknown
    #: names are a collection error. `check_loop` judges per check, and fails a stale one.
    expected_failed_checks: Mapping[str, str] = {}

    @pytest.fixture
    def loop(self, spec_run: RunFn) -> RunFn:
        """The run() under test; override to bind another implementation."""
        return spec_run


for _check in CHECKS.values():
    setattr(LoopContract, check_test_name(_check.name), _make_test(_check))
del _check
