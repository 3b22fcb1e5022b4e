"""The loop's contract as a property: every check holds on every scenario Hypothesis draws."""

from hypothesis import given

from pytest_onebit.loop.runner import check_trace
from pytest_onebit.loop.strategies import scenarios
from pytest_onebit.loop.trace import execute


@given(scenario=scenarios())
def test_every_check_holds_on_random_scenarios(onebit_loop, scenario):
    """For random prompts, k (0..12), budgets (0..48), row limits (1..10) and shapes, both
    round kinds, oracle heads with per-slot right / wrong patterns, consumer stops and toy
    seeds, the loop under test passes every applicable check I1..I13 (thousands of cases
    under CI=true, the same ones every run)."""
    findings = check_trace(execute(onebit_loop, scenario))
    assert not findings, "\n".join(f"{f.check}: {f.message}" for f in findings)
