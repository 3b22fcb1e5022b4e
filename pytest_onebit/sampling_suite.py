"""The sampling checks S1..S4 as pytest tests: subclass `SamplingContract` to hold a loop.

Kept apart from `sampling_contract` (the checks and `check_sampling`), which import no pytest,
so `onebit prove` runs them from an install without it.
"""

from __future__ import annotations

import pytest

from pytest_onebit.sampling_contract import (
    SAMPLING_CHECKS,
    SamplingCheck,
    SamplingScenario,
    forget_traces,
)
from pytest_onebit.trace import RunFn


def _test_name(check_name: str) -> str:
    return "test_" + check_name.replace("-", "_")


def _make_test(check: SamplingCheck):
    def test(self, loop: RunFn, onebit_sampling_scenario: SamplingScenario) -> None:
        __tracebackhide__ = True
        check.verify(loop, onebit_sampling_scenario)

    test.__name__ = test.__qualname__ = _test_name(check.name)
    test.__doc__ = check.doc
    scenarios = check.scenarios()
    return pytest.mark.parametrize("onebit_sampling_scenario", scenarios,
                                   ids=[s.id for s in scenarios])(test)


class SamplingContract:
    """S1..S4, one test method per check, parametrised over its scenarios; subclass it to hold
    a loop (`spec_run`: onebit.run, or what --onebit-loop names; override `loop` to bind
    another)."""

    @pytest.fixture
    def loop(self, spec_run: RunFn) -> RunFn:
        return spec_run

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _fresh_traces(cls) -> None:
        """Each class enumerates its loop afresh: a trace cached by an earlier test session in
        this process (a forked mutmut child inherits its parent's) is never reused."""
        forget_traces()


for _check in SAMPLING_CHECKS.values():
    setattr(SamplingContract, _test_name(_check.name), _make_test(_check))
del _check
