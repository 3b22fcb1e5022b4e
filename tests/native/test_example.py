"""examples/c_loop/loop.c, the smallest C loop, builds as its README says and keeps the whole
contract: `onebit prove --loop-lib` on it reports what `onebit prove` reports for onebit.run."""

from __future__ import annotations

from pathlib import Path

import pytest

import onebit
from pytest_onebit.loop.runner import check_loop
from pytest_onebit.native.build import CompileError, compile_library, find_compiler
from pytest_onebit.native.prove import prove_library
from pytest_onebit.native.suite import abi_scenarios

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "c_loop" / "loop.c"


@pytest.fixture(scope="module")
def onebit_example_so(tmp_path_factory) -> Path:
    if find_compiler(cpp=False) is None:
        pytest.skip("no C compiler on PATH (cc)")
    try:  # the README's flags, warnings as errors: the example must build clean
        return compile_library([EXAMPLE], out_dir=tmp_path_factory.mktemp("example"),
                               flags=("-O2", "-Wall", "-Wextra", "-Werror"))
    except CompileError as error:
        pytest.fail(str(error))


@pytest.mark.slow  # 13 s, in CI's slow step, out of README line 2's four minutes; line 2 still
# holds a compiled loop through the packaged conformance module (tests/native/test_options.py)
def test_the_example_keeps_the_contract_as_onebit_run_does(onebit_example_so):
    """Every check passes on the example, on as many scenarios per check as for onebit.run,
    and F1 passes on every fault case."""
    report = prove_library(str(onebit_example_so))
    python = check_loop(onebit.run, abi_scenarios(), raise_on_failure=False)
    assert report.ok, report.render("text")
    assert report.contract.ran_by_check == python.ran_by_check
    assert report.fault_failures == [] and report.fault_cases == 20
    assert "the loop keeps the contract (30 arms" in report.closing_line()
