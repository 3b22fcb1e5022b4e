"""The base contract (B1..B8) on the toy base, in every shape the loop tests use."""

from __future__ import annotations

import pytest

from pytest_onebit import BaseContract, ToyBase, check_base


class TestStrictToy(BaseContract):
    """The default base under test (--onebit-base unset): the strict toy, 8 prefix rows."""


def batch_rows_toy() -> ToyBase:
    return ToyBase(strict=True, max_batch_rows=3, rows_shape="batch", seed=7)


def one_row_toy() -> ToyBase:
    return ToyBase(strict=True, max_batch_rows=1, vocab_size=5)


class TestBatchShapedToy(BaseContract):
    """A toy whose last_hidden_rows() is the whole batch (the other legal shape), 3 rows."""

    @pytest.fixture
    def base_factory(self):
        return batch_rows_toy


class TestOneRowToy(BaseContract):
    """A degenerate toy: one row per verify, a vocabulary of 5."""

    @pytest.fixture
    def base_factory(self):
        return one_row_toy


def verify_last_toy() -> ToyBase:
    return ToyBase(strict=True, verify_last=True, max_batch_rows=3, max_prefill_rows=6)


class TestVerifyLastToy(BaseContract):
    """A toy with the optional verify_last and a prefill wider than its verify: B8 runs on it
    (the toy without verify_last skips B8 as not applicable) and every check passes."""

    @pytest.fixture
    def base_factory(self):
        return verify_last_toy


def test_B8_is_not_applicable_without_verify_last():
    """check_base on a base with no verify_last reports B8 not applicable, with the reason
    naming what is missing, and still judges B1..B7 (the report is ok)."""
    report = check_base(lambda: ToyBase(strict=True), raise_on_failure=False)
    assert report.ok, report.to_text()
    assert report.status("B8-verify-last") == "not applicable"
    assert "has no verify_last" in report.not_applicable["B8-verify-last"]
    assert "B7-prefill-rows" not in report.not_applicable
    assert report.ran_by_check["B8-verify-last"] == 0 and report.ran == 7


def test_B8_runs_on_a_base_with_verify_last():
    """On a toy with verify_last B8 is judged (it runs and passes), not set aside."""
    report = check_base(verify_last_toy, raise_on_failure=False)
    assert report.ok, report.to_text()
    assert report.status("B8-verify-last") == "passed"
    assert report.ran_by_check["B8-verify-last"] == 1


class TestLaxToy(BaseContract):
    """The lax toy with its B5 failure declared: B5 is an xfail with the reason, the rest
    pass (a stale declaration would show as XPASS)."""

    expected_failed_checks = {"B5-refusals": "the loop tests' toy counts misuse, it does not "
                              "refuse it"}

    @pytest.fixture
    def base_factory(self):
        return ToyBase


def test_an_unknown_expected_failure_is_an_error():
    """A BaseContract subclass that declares an expected failure of a check that does not
    exist is refused when the class is made, naming the check."""
    with pytest.raises(ValueError, match=r"expected_failed_checks names unknown base "
                       r"check\(s\) \['B9-nothing'\]"):
        type("TestWrong", (BaseContract,), {"expected_failed_checks": {"B9-nothing": "x"}})


def test_B5_refusals_fail_the_lax_toy():
    """The lax toy (the loop tests' default) counts misuse instead of refusing it, so it fails
    B5 and only B5: B5 sees a base that accepts what it must refuse, and strict=True is the
    one difference between the toy the loop tests use and the one the base contract passes."""
    report = check_base(ToyBase, raise_on_failure=False)
    assert [f.check for f in report.failures] == ["B5-refusals"]
    assert "was accepted; the base must refuse it" in report.failures[0].message
