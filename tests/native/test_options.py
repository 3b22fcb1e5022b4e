"""`pytest --onebit-loop-lib` and `--onebit-base-lib` hold a compiled loop or base from the
command line, and a library that cannot be held stops the run at start-up with one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


# builds a C library and proves it through the CLI (6 s); `onebit prove`'s c_loop catalogue holds
# the same path
@pytest.mark.slow
def test_loop_lib_runs_the_contract_on_the_library(onebit_native_build):
    """The packaged conformance module holds the port through --onebit-loop-lib: I12 and F1
    pass on every scenario and fault case; the header names the library."""
    so = onebit_native_build("mtp_loop.cpp")
    args = ("--pyargs", "pytest_onebit.native.conformance", f"--onebit-loop-lib={so}",
            "-k", "I12 or F1")
    done = pytest_run(*args)
    assert done.returncode == 0, done.stdout[-2000:]
    # every selected test ran and passed: one I12 test per ABI scenario, one F1 per fault case
    from pytest_onebit.native.faults import fault_cases
    from pytest_onebit.native.suite import abi_scenarios

    selected = len(abi_scenarios()) + len(fault_cases())
    assert f"{selected} passed" in done.stdout, done.stdout[-500:]


def test_loop_lib_with_a_bad_library_is_a_usage_error(onebit_native_build):
    """A library of another ABI version stops pytest before collection, in one line."""
    so = onebit_native_build("bad/abi_v2.c")
    done = pytest_run("--pyargs", "pytest_onebit.native.conformance", f"--onebit-loop-lib={so}")
    assert done.returncode == 4  # pytest's usage error
    assert f"--onebit-loop-lib {so}: built for ABI version 2" in done.stderr


@pytest.mark.slow  # builds a C library and holds it through pytest in a subprocess (4 s)
def test_base_lib_holds_a_compiled_base(onebit_native_build):
    """--onebit-base-lib runs B1..B7 on the compiled toy base (all pass) and on the broken one
    (B2 fails)."""
    good = pytest_run("--pyargs", "pytest_onebit.base.conformance",
                      f"--onebit-base-lib={onebit_native_build('toy_base.c')}")
    assert good.returncode == 0, good.stdout[-2000:]
    bad = pytest_run("--pyargs", "pytest_onebit.base.conformance",
                     f"--onebit-base-lib={onebit_native_build('broken_base.c')}")
    assert bad.returncode == 1
    assert "B2_commit_exact" in bad.stdout
