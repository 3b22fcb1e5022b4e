"""The negative controls of sampling (mutants/sampling) are wrong by a margin, not only broken:
each moves the exact output distribution at least 1e-3 away from plain sampling's on some S1
scenario, and the bundled loop stays within 1e-12 of it on every one."""

from pathlib import Path

import pytest

import onebit
from pytest_onebit.mutants.controls import MARGIN, measure_catalogue, render
from pytest_onebit.sampling.gaps import gaps, largest_gap
from pytest_onebit.sampling.scenarios import SamplingScenario

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "mutants" / "sampling"


@pytest.fixture(scope="module")
def controls():
    return measure_catalogue(ROOT, CATALOGUE)


@pytest.mark.slow  # nine enumerations in scratch copies: the suite's slowest test
def test_negative_controls_differ(controls, capsys):
    """Every mutant of the sampling catalogue applies and, on at least one S1 scenario where it
    runs to the end, gives some sequence a probability at least 1e-3 away from plain sampling's.
    The table of margins is printed (run with -s to see it)."""
    table = render(controls)
    with capsys.disabled():
        print("\n" + table)
    assert len(controls) >= 7, table
    problems = [f"{c.mutant}: {c.problem}" for c in controls if c.problem]
    assert not problems, "\n".join(problems)
    short = [(c.mutant, c.margin) for c in controls if c.margin < MARGIN]
    assert not short, f"controls within {MARGIN:g} of plain sampling: {short}\n{table}"


def test_the_bundled_loop_has_no_gap():
    """The unmutated loop, measured the same way on a few S1 scenarios (both round kinds, a
    head that is rejected and one that is accepted), is within 1e-12 of plain sampling and
    never raises: the margin above is the mutants', not the measure's."""
    scenarios = [SamplingScenario(flavour, head, k=2, top_k=2)
                 for flavour in ("one-pass", "two-pass") for head in ("mixed", "spread")]
    found = gaps(onebit.run, scenarios)
    assert [g.error for g in found] == [None] * len(scenarios)
    worst = largest_gap(found)
    assert worst is not None and worst.gap <= 1e-12, worst
