"""A compiled base (tests/native/toy_base.c, through the C ABI) keeps B1..B7 (B8 is not
applicable: the C ABI has no verify_last); the same base with
one bug (broken_base.c: a partial commit keeps the whole batch's state) fails B2."""

from __future__ import annotations

import pytest

from pytest_onebit.base.runner import check_base
from pytest_onebit.native.base import native_base_factory
from pytest_onebit.native.library import LibraryError


def test_the_compiled_toy_base_keeps_the_base_contract(onebit_native_build):
    """check_base passes every check, B7 included (it declares a prefill width of 8 over a
    verify width of 4); B8 is reported not applicable (no verify_last), not run."""
    factory = native_base_factory(str(onebit_native_build("toy_base.c")))
    base = factory()
    assert (base.max_batch_rows(), base.max_prefill_rows()) == (4, 8)
    report = check_base(factory, raise_on_failure=False)
    assert report.failures == []
    assert len(report.checks) == 8 and report.ran == 7
    assert report.status("B8-verify-last") == "not applicable"


def test_a_broken_compiled_base_fails_b2(onebit_native_build):
    """The broken base fails B2 (commit-exact), with a message at the first differing row."""
    factory = native_base_factory(str(onebit_native_build("broken_base.c")))
    report = check_base(factory, raise_on_failure=False)
    failed = {f.check for f in report.failures}
    assert "B2-commit-exact" in failed, report.failures


def test_a_base_library_without_its_symbols_is_refused(onebit_native_build):
    """The loop library exports no onebit_make_base: one LibraryError line naming it."""
    with pytest.raises(LibraryError, match="exports no onebit_make_base"):
        native_base_factory(str(onebit_native_build("mtp_loop.cpp")))


def test_refusals_name_the_value(onebit_native_build):
    """A refused call is a ContractError naming the call and its arguments (as B5 asks)."""
    from onebit.errors import ContractError

    base = native_base_factory(str(onebit_native_build("toy_base.c")))()
    with pytest.raises(ContractError, match=r"step\(3\) at position 5: the compiled base "
                                            r"refused it"):
        base.step(3, 5)
