"""How the mutant runner runs a mutant: forked from a warm server or as a fresh pytest, stopped
once its verdict is known, and still judged right when the mutated code crashes or hangs."""

from __future__ import annotations

import argparse
import signal

import pytest

from onebit.commands import prove as prove_command
from pytest_onebit.mutants import (
    ERROR,
    KILLED,
    OFF_TARGET,
    SURVIVED,
    find_catalogues,
    load_catalogue,
    run_catalogue,
    run_catalogues,
)
from pytest_onebit.mutants.launch import can_fork

CALC = "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n"
# A1 has three tests and sorts after A2 in the file, so "named first" is visible in the order.
CALC_TESTS = '''from calc import add, neg


def test_A2_neg():
    assert neg(4) == -4


def test_helper_unrelated():
    assert True


def test_A1_add():
    assert add(2, 3) == 5


def test_A1_add_zero():
    assert add(0, 0) == 0


def test_A1_add_negative():
    assert add(-1, -1) == -2
'''
TESTS = 5


def calc_mutant(name: str, breaks: str, old: str, new: str) -> str:
    return (f"# mutant: {name}\n# breaks: {breaks}\n# why: a fresh project's own bug\n"
            "--- a/calc/__init__.py\n+++ b/calc/__init__.py\n@@ -1,6 +1,6 @@\n"
            + "".join(("-" + line + "\n+" + line.replace(old, new) + "\n") if old in line
                      else " " + line + "\n" for line in CALC.splitlines()))


MUTANTS = {
    "01-add-subtracts": ("A1", "a + b", "a - b"),  # fails A1 three times: killed
    "02-neg-named-wrong": ("A1", "-a", "a"),  # fails A2 only: off-target
    "03-equivalent": ("A1", "a + b", "b + a"),  # fails nothing: survived
    "04-add-kills-its-process": ("A1", "return a + b",
                                 "return __import__('os').kill(__import__('os').getpid(), 9)"),
    "05-add-hangs": ("A1", "return a + b", "return __import__('time').sleep(600)"),
}


@pytest.fixture(scope="module")
def calc_project(tmp_path_factory):
    """A project that is not onebit, with a catalogue of a killed, an off-target, a surviving,
    a crashing and a hanging mutant."""
    root = tmp_path_factory.mktemp("calc")
    (root / "calc").mkdir()
    (root / "calc" / "__init__.py").write_text(CALC)
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(CALC_TESTS)
    folder = root / "mutants" / "calc"
    folder.mkdir(parents=True)
    (folder / "catalogue.toml").write_text('[catalogue]\ndescription = "calc"\n'
                                           'tests = ["tests"]\n')
    for name, (breaks, old, new) in MUTANTS.items():
        (folder / f"{name}.diff").write_text(calc_mutant(name, breaks, old, new))
    return root


# What mutant 05 hangs for before it is killed: well above a normal calc run in a fresh process
# on a loaded two-core machine, and not more, since README line 2 sleeps it twice.
TIMEOUT_S = 8
ALL = {"01": KILLED, "02": OFF_TARGET, "03": SURVIVED, "04": ERROR, "05": ERROR}


# forked is how the catalogues run on Linux; the fresh-process run (10 s) is in the slow step
@pytest.fixture(scope="module", params=["fork", pytest.param("process", marks=pytest.mark.slow)])
def first_kill(request, calc_project):
    """The calc catalogue run with --stop first-kill, forked (every mutant) and as fresh
    processes (the killed, crashing and hanging ones: the rest is the same code)."""
    fork = request.param == "fork"
    if fork and not can_fork():
        pytest.skip("this platform cannot fork")
    (folder,) = find_catalogues(calc_project / "mutants")
    report = run_catalogue(calc_project, folder, jobs=2, stop="first-kill", fork=fork,
                           timeout_s=TIMEOUT_S, only=None if fork else ["01", "04", "05"])
    return report, {r.mutant.number: r for r in report.results}


def test_verdicts_do_not_depend_on_stopping_or_forking(first_kill):
    """Stopping at the first kill, forked or not, gives every verdict a full run gives:
    killed, off-target, survived, and an error for the mutant that kills its own run and the
    one that hangs past the timeout, each named as such. The baseline reran, unmutated, the
    tests that failed in a judged run (not the crashed or hung ones), and they passed."""
    report, by = first_kill
    failed = {t for r in by.values() if r.run.judged for t in r.run.failed_ids}
    assert report.baseline_ok and set(report.baseline.only) == failed
    assert report.baseline.tests == len(failed) >= 1
    assert set(report.imported_from) == {"calc"}
    assert {n: r.verdict for n, r in by.items()} == {n: ALL[n] for n in by}
    assert f"signal {int(signal.SIGKILL)}" in by["04"].run.detail
    assert f"did not finish in {TIMEOUT_S} s" in by["05"].run.detail
    assert not report.ok


def test_first_kill_stops_at_the_first_failing_named_test(first_kill):
    """A killed mutant's run ends at its first failing test of a named check, run before the
    rest: one test, credited to A1. A mutant no named check kills runs the whole suite, so
    off-target and survived are as exact as in a full run."""
    _, by = first_kill
    assert (by["01"].run.tests, by["01"].run.failed) == (1, 1)
    assert by["01"].run.failing_checks == {"A1-add": 1}
    if "02" not in by:
        return
    assert by["02"].run.tests == TESTS and by["02"].run.failing_checks == {"A2-neg": 1}
    assert by["03"].run.tests == TESTS and by["03"].run.failed == 0


def test_named_and_never_credit_every_killing_check(calc_project):
    """--stop named runs every test of the named checks (the three A1 tests; the two that
    fail are credited), then stops; --stop never runs all five tests. A forked run that is
    killed does not take the server down: the runs after it, in the next catalogue too, are
    still judged."""
    catalogue = load_catalogue(calc_project / "mutants" / "calc", calc_project)
    first, again = run_catalogues(calc_project, [catalogue, catalogue], jobs=1,
                                  only=["04", "01"], stop="named", timeout_s=TIMEOUT_S)
    for named in (first, again):
        by = {r.mutant.number: r for r in named.results}
        assert by["01"].verdict == KILLED
        assert (by["01"].run.tests, by["01"].run.failing_checks) == (
            3, {"A1-add": 1, "A1-add-negative": 1})
        assert by["04"].verdict == ERROR
        assert named.stop == "named" and "credits the named checks in full" in named.to_text()
    full = run_catalogue(calc_project, catalogue=catalogue, only=["01"], stop="never")
    assert (full.results[0].run.tests, full.results[0].run.failed) == (TESTS, 2)
    assert "stopped" not in full.to_text()


def test_a_surviving_mutant_fails_onebit_prove(first_kill):
    """`onebit prove` exits 1 when a catalogue holds a mutant that is not killed, even though
    the contract itself passed."""
    report, _ = first_kill

    class Passed:
        ok = True

    assert prove_command.exit_code(Passed(), [report]) == 1
    assert prove_command.exit_code(Passed(), []) == 0


def test_prove_stops_at_the_first_kill_by_default():
    """`onebit prove` runs the catalogues with --stop first-kill and forks; `onebit mutants`
    keeps the full table (--stop never)."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    prove_command.add_parser(sub)
    args = parser.parse_args(["prove"])
    assert (args.stop, args.fork) == ("first-kill", True)
    assert parser.parse_args(["prove", "--stop", "never", "--no-fork"]).fork is False
