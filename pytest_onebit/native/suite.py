"""The conformance suite for a compiled loop: `NativeLoopContract`, a `LoopContract` on the
float32-exact toy with check F1 (faults) added.

    from pytest_onebit.native.suite import NativeLoopContract

    class TestMyEngine(NativeLoopContract):
        pass            # holds --onebit-loop-lib; or override `loop` to bind a library
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pytest

from pytest_onebit.loop.scenarios import Scenario, standard_scenarios
from pytest_onebit.loop.suite import LoopContract
from pytest_onebit.native.faults import DOC, FaultCase, check_fault, fault_cases


def abi_scenarios(scenarios: Iterable[Scenario] | None = None) -> list[Scenario]:
    """`scenarios` (default: the standard grid) on the float32-exact toy: what crosses the ABI
    as float32 is then bit for bit what the checks compare (docs/c-abi.md, Precision). The
    knob scenarios are left out: processed scores are float64 sums, not float32-exact."""
    chosen = standard_scenarios() if scenarios is None else scenarios
    return [replace(s, float32=True) for s in chosen if s.knobs is None]


class NativeLoopContract(LoopContract):
    """I1..I13 on every standard scenario, plus F1 on every fault case."""

    scenarios = tuple(abi_scenarios())

    @pytest.mark.parametrize("fault_case", fault_cases(), ids=lambda c: c.id)
    def test_F1_fault(self, loop, fault_case: FaultCase) -> None:
        __tracebackhide__ = True
        from pytest_onebit.native.loop import NativeLoop

        if not isinstance(loop, NativeLoop):
            pytest.skip("F1 holds compiled loops (--onebit-loop-lib); a Python loop raises")
        check_fault(loop, fault_case)

    test_F1_fault.__doc__ = f"F1-fault: {DOC}."
