"""Fixtures for the compiled-loop tests: the sources under tests/native built once per session
into a temporary folder with the system compiler; a test skips with the reason when there is
none."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def build(config, tmp_path_factory, *sources: str) -> Path:
    """`sources` (relative to tests/native) compiled into a .so, or a skip saying why not
    (a failure under --onebit-require-compiler)."""
    from pytest_onebit.native.build import CompileError, compile_library, find_compiler

    paths = [HERE / s for s in sources]
    cpp = any(p.suffix == ".cpp" for p in paths)
    if find_compiler(cpp) is None:
        why = f"no {'C++' if cpp else 'C'} compiler on PATH (g++ / cc)"
        if config.getoption("onebit_require_compiler"):
            pytest.fail(f"{why}, and --onebit-require-compiler was given")
        pytest.skip(why)
    try:
        return compile_library(paths, out_dir=tmp_path_factory.getbasetemp() / "native")
    except CompileError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="session")
def onebit_native_build(request, tmp_path_factory):
    """`onebit_native_build("file.c", ...)`: the path of the compiled library (cached per
    session)."""
    built: dict = {}

    def get(*sources: str) -> Path:
        if sources not in built:
            built[sources] = build(request.config, tmp_path_factory, *sources)
        return built[sources]

    return get


@pytest.fixture(scope="session")
def onebit_mtp_loop(onebit_native_build):
    """The NPU engine's loop, ported (tests/native/mtp_loop.cpp), as a run()."""
    from pytest_onebit.native.loop import native_loop

    return native_loop(str(onebit_native_build("mtp_loop.cpp")))
