"""The closing line of `onebit prove --loop-lib` counts every check it judged: a compiled loop
that fails only the fault checks (F1) reads `N failed` beside its failing verdict, and the
table's rows add up to the line's counts."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pytest_onebit.mutants.scratch import apply_diff
from pytest_onebit.native.build import CompileError, compile_library, find_compiler
from pytest_onebit.native.faults import NAME
from pytest_onebit.native.prove import prove_library

HERE = Path(__file__).resolve().parent
# The field bug that breaks F1 alone: an error from commit_rows swallowed (its header says so).
ONLY_F1 = HERE.parents[1] / "mutants" / "c_loop" / "10-swallow-commit-rows-error.diff"


@pytest.fixture(scope="module")
def fails_only_faults(tmp_path_factory) -> Path:
    """tests/native/mtp_loop.cpp with the swallowed-error mutant applied, built."""
    diff = ONLY_F1.read_text(encoding="utf-8")
    assert "# breaks: F1\n" in diff, "the mutant no longer breaks F1 alone: pick another"
    scratch = tmp_path_factory.mktemp("only_f1") / "tree"
    (scratch / "tests" / "native").mkdir(parents=True)
    shutil.copy(HERE / "mtp_loop.cpp", scratch / "tests" / "native" / "mtp_loop.cpp")
    complaint = apply_diff(scratch, diff)
    assert complaint is None, complaint
    return build_copy(tmp_path_factory, scratch / "tests" / "native" / "mtp_loop.cpp")


def build_copy(tmp_path_factory, source: Path) -> Path:
    """`source` compiled as the suite's own sources are (a skip without g++)."""
    if find_compiler(True) is None:
        pytest.skip("no C++ compiler on PATH (g++)")
    try:
        return compile_library([source], out_dir=tmp_path_factory.mktemp("only_f1_build"))
    except CompileError as error:
        pytest.fail(str(error))


@pytest.mark.slow  # builds a mutant C++ loop and proves it in a fresh process: 9-11 s
def test_a_loop_failing_only_f1_is_counted_failed_in_the_closing_line(fails_only_faults):
    """The contract holds, F1 does not: the verdict fails, the closing line's failed count is
    F1's failures (not 0), and passed + failed is every I-, S- and F-check judged."""
    report = prove_library(str(fails_only_faults))
    assert report.contract.ok and report.fault_failures, report.render("text")
    line = report.closing_line()
    counts = re.match(r"(\d+) passed, (\d+) failed", line)
    assert counts, line
    passed, failed = map(int, counts.groups())
    assert "THE LOOP BREAKS THE CONTRACT" in line
    assert failed == len(report.fault_failures) > 0, line
    rows = report.check_rows()
    assert rows[-1][0] == NAME and rows[-1][2] == failed
    assert passed + failed == sum(p + f for _, p, f, _, _ in rows), (line, rows)
