"""`expected_failed_checks` works for a compiled loop as for a Python one: a declared check
that fails is xfail and the report is ok; a declared check that passes is XPASS and fails the
report."""

from __future__ import annotations

import pytest

from pytest_onebit.contract.report import XFAIL, XPASS
from pytest_onebit.loop.runner import check_loop
from pytest_onebit.loop.scenarios import Scenario
from pytest_onebit.native.loop import native_loop
from pytest_onebit.native.prove import prove_library
from pytest_onebit.native.suite import abi_scenarios

SCENARIOS = abi_scenarios([Scenario(head="perfect", k=4, max_tokens=9),
                           Scenario(flavour="two-pass", head="half", k=3, max_tokens=9)])


def test_a_declared_failure_is_xfail(onebit_native_build):
    """The loop that claims too many tokens fails every check; declaring them all with a reason
    makes the report ok, each check xfail."""
    loop = native_loop(f"{onebit_native_build('bad/bad_loops.c')}:too_many")
    plain = check_loop(loop, SCENARIOS, raise_on_failure=False)
    failed = {f.check for f in plain.failures}
    report = check_loop(loop, SCENARIOS, raise_on_failure=False,
                        expected_failed_checks={c: "claims one token too many" for c in failed})
    assert report.ok
    assert {report.status(c) for c in failed} == {XFAIL}


@pytest.mark.slow  # the whole contract twice on the C++ loop, 8-11 s; the XFAIL case stays
def test_a_declared_check_that_passes_fails_the_proof(onebit_native_build):
    """Declaring I7 on the port, which keeps it, is an XPASS: `onebit prove --loop-lib
    --expect-fail` reports the proof failed."""
    so = onebit_native_build("mtp_loop.cpp")
    report = check_loop(native_loop(str(so)), SCENARIOS, raise_on_failure=False,
                        expected_failed_checks={"I7-pass-law": "k capped"})
    assert report.status("I7-pass-law") == XPASS and not report.ok
    proof = prove_library(str(so), expected_failed_checks={"I7-pass-law": "k capped"})
    assert not proof.ok and proof.contract.status("I7-pass-law") == XPASS
