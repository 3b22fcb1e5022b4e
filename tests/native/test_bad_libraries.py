"""Libraries that cannot be held, or that break the ABI, are a one-line error or a failed check
saying what happened; never a crashed or stuck run."""

from __future__ import annotations

import pytest

from onebit.cli import main
from pytest_onebit.loop.runner import check_loop
from pytest_onebit.loop.scenarios import Scenario
from pytest_onebit.native.library import LibraryError
from pytest_onebit.native.loop import native_loop
from pytest_onebit.native.suite import abi_scenarios

ONE = abi_scenarios([Scenario(head="perfect", k=4, max_tokens=9)])


def first_failure(loop) -> str:
    """The message of the first failed check when `loop` runs one scenario."""
    report = check_loop(loop, ONE, raise_on_failure=False)
    assert report.failures, "the bad library passed every check"
    assert {f.check for f in report.failures} >= {"I1-text", "I2-state"}
    return report.failures[0].message


def test_a_path_that_does_not_exist_is_one_line(tmp_path, capsys):
    """A missing file is a LibraryError naming it, and `onebit prove` exits 2 with one line."""
    missing = tmp_path / "nope.so"
    with pytest.raises(LibraryError, match=f"{missing}: no such file"):
        native_loop(str(missing))
    assert main(["prove", "--loop-lib", str(missing), "--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"onebit prove: error: --loop-lib {missing}: no such file"


def test_a_library_without_the_symbol_is_refused(onebit_native_build):
    """bad_loops.so has no onebit_run: the default symbol is missing; a named one is found."""
    path = onebit_native_build("bad/bad_loops.c")
    with pytest.raises(LibraryError, match=r"exports no onebit_run$"):
        native_loop(str(path))
    with pytest.raises(LibraryError, match=r"exports no not_there$"):
        native_loop(f"{path}:not_there")
    assert native_loop(f"{path}:hangs").symbol == "hangs"


def test_another_abi_version_is_refused(onebit_native_build):
    """A library built for version 2 is refused naming both versions; one that exports no
    version is refused too."""
    with pytest.raises(LibraryError, match="built for ABI version 2, this onebit speaks "
                                           "version 1"):
        native_loop(str(onebit_native_build("bad/abi_v2.c")))
    with pytest.raises(LibraryError, match="exports no onebit_abi_version"):
        native_loop(str(onebit_native_build("bad/no_version.c")))


def test_a_library_that_is_not_a_library_is_refused(tmp_path):
    """A file the dynamic loader cannot load is one line naming it."""
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"not an ELF file")
    with pytest.raises(LibraryError, match=f"{junk}: cannot load it"):
        native_loop(str(junk))


def test_more_tokens_than_max_tokens_fails_the_checks(onebit_native_build):
    """n_out past max_tokens is a failed check naming the count and the budget."""
    loop = native_loop(f"{onebit_native_build('bad/bad_loops.c')}:too_many")
    assert "returned n_out = 10, outside [0, max_tokens = 9]" in first_failure(loop)


def test_a_write_past_out_fails_the_checks(onebit_native_build):
    """A write into the guard region after out is a failed check naming the slot."""
    loop = native_loop(f"{onebit_native_build('bad/bad_loops.c')}:past_out")
    assert "wrote past out: out[9] changed, and out holds max_tokens = 9" in first_failure(loop)


def test_a_loop_that_never_returns_is_killed(onebit_native_build):
    """A hang is killed at the time limit and every check fails saying so."""
    loop = native_loop(f"{onebit_native_build('bad/bad_loops.c')}:hangs", timeout=1.0)
    assert "did not return within 1 s (killed)" in first_failure(loop)


def test_a_segfault_fails_the_checks(onebit_native_build):
    """A crash in the library is a failed check naming the signal; the run goes on."""
    loop = native_loop(f"{onebit_native_build('bad/bad_loops.c')}:segfaults")
    assert "crashed (SIGSEGV)" in first_failure(loop)
