"""The contract core on its own: a fourth contract, declared as CONTRIBUTING.md shows (its code
block is run here as written), gets the runner, the report, the error, expected failures with
reasons, not-applicable targets and the pytest class with no framework of its own."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from pytest_onebit.contract import XFAIL, XPASS, Contract, ContractFailure

EXAMPLE = re.search(r"## Add a contract.*?```python\n(.*?)```",
                    (Path(__file__).parents[2] / "CONTRIBUTING.md").read_text(encoding="utf-8"),
                    re.S).group(1)


class Head:
    """A draft head that proposes `extra` more drafts than asked (0: a correct head)."""

    def __init__(self, extra: int = 0) -> None:
        self.extra = extra

    def propose(self, token, pos, k, hidden):
        return [token] * (k + self.extra)


def good_head():
    return Head()


def greedy_head():
    return Head(extra=1)


def exploding_head():
    raise RuntimeError("no weights here")


@pytest.fixture(scope="module")
def example():
    """The example's names, run as a module of its own (dataclasses look their module up)."""
    module = types.ModuleType("contributing_example")
    sys.modules[module.__name__] = module
    try:
        exec(compile(EXAMPLE, "CONTRIBUTING.md", "exec"), module.__dict__)  # noqa: S102
        yield module.__dict__
    finally:
        del sys.modules[module.__name__]


def test_a_declared_contract_runs_reports_and_raises(example):
    """The example's `check_head` passes a correct head on both scenarios, raises
    ContractFailure naming H1 and the scenario for a head that overdrafts, and judges a
    factory that raises (a finding naming the exception), without crashing."""
    report = example["check_head"](good_head)
    assert report.ok and report.ran == 2 and report.statuses() == {"H1-room": "passed"}
    with pytest.raises(ContractFailure, match=r"2 of 2 head checks failed \(H1-room\); first: "
                       r"H1-room on p3-k1: asked for 1 drafts, the head proposed 2"):
        example["check_head"](greedy_head)
    broken = example["check_head"](exploding_head, raise_on_failure=False)
    assert not broken.ok
    assert all("RuntimeError: no weights here" in f.message for f in broken.failures)


def test_expected_failures_have_reasons_and_stale_ones_fail(example):
    """A declared expected failure that fails is xfail and the report is ok; one that passes
    is xpass and fails the report; an unknown name or an empty reason is a ValueError."""
    declared = {"H1-room": "our head pads to k + 1"}
    report = example["check_head"](greedy_head, expected_failed_checks=declared)
    assert report.ok and report.status("H1-room") == XFAIL
    stale = example["check_head"](good_head, expected_failed_checks=declared,
                                  raise_on_failure=False)
    assert stale.status("H1-room") == XPASS and not stale.ok
    with pytest.raises(ValueError, match=r"unknown head check\(s\) \['H9'\]"):
        example["check_head"](good_head, expected_failed_checks={"H9": "x"})
    with pytest.raises(ValueError, match="needs a reason"):
        example["check_head"](good_head, expected_failed_checks={"H1-room": " "})


def test_not_applicable_is_decided_by_the_contracts_probe():
    """A contract with a probe reports every check as not applicable, with the probe's reason,
    and passes; a probe that itself trips over the target says nothing (the checks judge)."""

    def probe(target):
        if target == "refuses":
            return "it refuses the probe"
        raise KeyError("the probe broke")

    c = Contract("demo", prepare=lambda target, s: target, not_applicable=probe)

    @c.check("D1-is-text")
    def is_text(case) -> None:
        """D1: the target is a string."""
        assert isinstance(case, str), f"{case!r} is not text"

    report = c.run("refuses")
    assert report.ok and report.statuses() == {"D1-is-text": "not applicable"}
    assert report.not_applicable == {"D1-is-text": "it refuses the probe"}
    assert "not applicable: it refuses the probe" in report.to_text()
    assert not c.run(3, raise_on_failure=False).ok  # judged: the probe raised, D1 fails


def test_the_declared_contract_is_a_pytest_class(pytester):
    """`contract_suite` makes the example's HeadContract a class to subclass: one test per
    check, parametrised over its scenarios with their ids, the target fixture overridable,
    and expected failures xfail with the reason."""
    pytester.makepyfile(head_contract=EXAMPLE, heads=(
        "class Head:\n"
        "    def __init__(self, extra=0):\n        self.extra = extra\n\n"
        "    def propose(self, token, pos, k, hidden):\n"
        "        return [token] * (k + self.extra)\n"))
    pytester.makeconftest("import pytest\nfrom heads import Head\n\n\n"
                          "@pytest.fixture\ndef my_head_factory():\n    return Head\n")
    pytester.makepyfile(test_heads=(
        "import pytest\nfrom head_contract import HeadContract\nfrom heads import Head\n\n\n"
        "class TestGood(HeadContract):\n    pass\n\n\n"
        "class TestPadding(HeadContract):\n"
        "    expected_failed_checks = {'H1-room': 'pads to k + 1'}\n\n"
        "    @pytest.fixture\n    def head_factory(self):\n        return lambda: Head(1)\n"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rxX", "-v")
    result.assert_outcomes(passed=2, xfailed=2)
    result.stdout.fnmatch_lines(["*TestGood::test_H1_room[[]p3-k1[]] PASSED*",
                                 "*XFAIL*TestPadding::test_H1_room*pads to k + 1*"])
