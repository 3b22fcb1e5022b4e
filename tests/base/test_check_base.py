"""check_base's API: selection by name or id, the report, the error, and bad arguments."""

from __future__ import annotations

import broken_bases
import pytest

from pytest_onebit import BASE_CHECKS, BaseModelContractError, BaseSettings, ToyBase, check_base
from pytest_onebit.base.checks import Subject, same


def test_check_base_passes_the_strict_toy_and_reports_every_check():
    """A correct base passes every check; the report lists each with its time."""
    report = check_base(lambda: ToyBase(strict=True))
    assert report.ok and report.checks == list(BASE_CHECKS)
    assert set(report.seconds) == set(BASE_CHECKS)
    assert report.to_text().splitlines()[-1] == "7 of 7 base checks passed"


def test_checks_are_selected_by_id_or_name_and_unknown_ones_refused():
    """`checks` takes ids (B2) or names (B5-refusals); an unknown one is a ValueError naming it
    before any base is made."""
    report = check_base(broken_bases.last_row_hidden, checks=["B2", "B5-refusals"],
                        raise_on_failure=False)
    assert report.checks == ["B2-commit-exact", "B5-refusals"]
    assert [f.check for f in report.failures] == ["B2-commit-exact"]
    with pytest.raises(ValueError, match=r"unknown base check\(s\) \['B9'\]"):
        check_base(ToyBase, checks=["B9"])


def test_the_error_names_the_failed_checks_and_carries_the_report():
    """A broken base raises BaseModelContractError (an AssertionError) naming every failed
    check and the first message; `.report` has them all."""
    with pytest.raises(BaseModelContractError, match=r"3 of 7 base checks failed "
                       r"\(B2-commit-exact, B3-sequences, B6-determinism\); first: "
                       r"B2-commit-exact: ") as info:
        check_base(broken_bases.last_row_hidden)
    assert isinstance(info.value, AssertionError)
    assert "FAILED: commit_verify(1)" in info.value.report.to_text()


def test_a_base_that_raises_on_a_legal_call_fails_the_check_with_the_error():
    """An exception from a legal call is a failure of the check that made it, not a crash of
    check_base."""

    class Refuses(ToyBase):
        def commit_verify(self, n):
            raise RuntimeError("no rollback on this device")

    report = check_base(lambda: Refuses(strict=True), checks=["B2"], raise_on_failure=False)
    assert report.failures[0].message == "raised RuntimeError: no rollback on this device"


def test_bad_arguments_are_refused_with_the_value():
    """A factory that is not callable, or settings that exercise nothing, are refused naming
    the value; so is a factory whose product is not a base."""
    with pytest.raises(TypeError, match="must be callable"):
        check_base(ToyBase(strict=True))
    with pytest.raises(ValueError, match=r"positions must be non-negative.*\(-1,\)"):
        BaseSettings(positions=(-1,))
    with pytest.raises(ValueError, match=r"positions must be integers, got \[0.5\]"):
        BaseSettings(positions=[0.5])
    assert BaseSettings(positions=[0, 7]).positions == (0, 7)  # hashable: a session cache key
    with pytest.raises(ValueError, match="examples must be >= 1, got 0"):
        BaseSettings(examples=0)
    report = check_base(dict, checks=["B1"], raise_on_failure=False)
    assert "has no 'step': not a onebit.BaseModel" in report.failures[0].message


def test_same_is_bit_exact_and_says_where():
    """`same` accepts only identical shape, dtype and bits (NaN equals NaN) and names the first
    differing index."""
    import numpy as np

    a = np.array([1.0, np.nan, 3.0])
    same(a.copy(), a, "x")
    with pytest.raises(AssertionError, match=r"x: 1 of 3 values differ from stepping's; first "
                       r"at index \(2,\)"):
        same(np.array([1.0, np.nan, np.nextafter(3.0, 4.0)]), a, "x")
    with pytest.raises(AssertionError, match="dtype float32"):
        same(a.astype(np.float32), a, "x")


def test_the_truth_is_long_enough_for_every_batch():
    """The stepped script covers the furthest position plus a full batch and a closing step,
    whatever script_length says."""
    subject = Subject(lambda: ToyBase(strict=True, max_batch_rows=8),
                      BaseSettings(positions=(30,), script_length=2))
    assert len(subject.truth.script) >= 30 + 8 + 2
