"""Deliberately broken bases (broken_bases.py) fail the base contract with the check named:
through `check_base`, and through `pytest --onebit-base=MODULE:FACTORY` in a fresh project."""

from __future__ import annotations

from pathlib import Path

import broken_bases
import pytest

from pytest_onebit import BASE_CHECKS, check_base

HERE = Path(__file__).parent


@pytest.mark.parametrize("factory", sorted(broken_bases.BROKEN))
def test_check_base_names_the_broken_check(factory):
    """check_base on each broken base reports the check that base was built to break, with a
    message that says what differed or what was accepted."""
    report = check_base(getattr(broken_bases, factory), raise_on_failure=False)
    failed = [f.check for f in report.failures]
    assert broken_bases.BROKEN[factory] in failed, report.to_text()
    assert report.checks == list(BASE_CHECKS) and not report.ok


def test_check_base_reports_only_the_broken_checks():
    """A base with one refusal fault fails B5 alone: the other checks do not cry wolf."""
    report = check_base(broken_bases.silent_commit, raise_on_failure=False)
    assert [f.check for f in report.failures] == ["B5-refusals"]


def _project(pytester) -> None:
    pytester.makepyfile(broken_bases=(HERE / "broken_bases.py").read_text(encoding="utf-8"))
    pytester.makepyfile(test_mine="from pytest_onebit import BaseContract\n\n\n"
                                  "class TestMyBase(BaseContract):\n    pass\n")


def test_onebit_base_option_fails_a_broken_base_with_the_check_named(pytester):
    """`pytest --onebit-base=broken_bases:last_row_hidden` against a one-line BaseContract
    subclass fails test_B2_commit_exact (the surviving forward mutant, on the toy), and B3 and
    B6, which read last_hidden() after their batches too; it passes the other checks but B8,
    skipped as not applicable (no verify_last), and the header names the base under test."""
    _project(pytester)
    result = pytester.runpytest_subprocess("--onebit-base=broken_bases:last_row_hidden",
                                           "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(failed=3, passed=4, skipped=1)  # B8: the toy has no verify_last
    result.stdout.fnmatch_lines([
        "onebit: loop onebit.loop:run, base broken_bases:last_row_hidden",
        "E   AssertionError: commit_verify(1) of a 8-row verify at 0: last_hidden(): 16 of 16 "
        "values differ from stepping's*",
        "FAILED test_mine.py::TestMyBase::test_B2_commit_exact - *",
        "FAILED test_mine.py::TestMyBase::test_B3_sequences - *",
        "FAILED test_mine.py::TestMyBase::test_B6_determinism - *",
    ])


@pytest.mark.slow  # pytest --pyargs in a subprocess (4 s)
def test_pyargs_conformance_module_runs_the_contract_on_a_named_base(pytester):
    """With no test file of one's own, `pytest --pyargs pytest_onebit.base.conformance
    --onebit-base=...` holds the named base to B1..B8: a base that runs a verify wider than
    its bound fails B5 only; the default (no option) is the strict toy, which passes."""
    _project(pytester)
    (pytester.path / "test_mine.py").unlink()
    broken = pytester.runpytest_subprocess("--pyargs", "pytest_onebit.base.conformance",
                                           "--onebit-base=broken_bases:wide_verify",
                                           "-p", "no:cacheprovider", "-rf")
    broken.assert_outcomes(failed=1, passed=6, skipped=1)  # B8: no verify_last
    broken.stdout.fnmatch_lines(["E   AssertionError: verify of 9 rows (max_batch_rows() = 8) "
                                 "was accepted; the base must refuse it",
                                 "FAILED *TestBase::test_B5_refusals - *"])
    default = pytester.runpytest_subprocess("--pyargs", "pytest_onebit.base.conformance",
                                            "-p", "no:cacheprovider")
    default.assert_outcomes(passed=7, skipped=1)


def test_bad_onebit_base_option_is_a_usage_error(pytester):
    """An --onebit-base that names nothing callable stops the run before collection."""
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("--onebit-base=onebit.models:no_such_factory")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--onebit-base*onebit.models has no callable "
                                 "'no_such_factory'*"])
