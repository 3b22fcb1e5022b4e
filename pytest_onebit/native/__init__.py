"""Holding compiled loops and bases (C ABI version 1, `onebit_abi.h`) to the contract.

`native_loop("PATH.so[:SYMBOL]")` is a `run()` like any other: each call runs the library's
`onebit_run` in a child process, with the toy base and the oracle heads handed to it as
ctypes callbacks, and brings back everything they recorded. `native_base(...)` wraps a
compiled `onebit_base` as a Python `BaseModel` for B1..B7. docs/c-abi.md tells the story.
"""

from pytest_onebit.native.build import CompileError, compile_library, find_compiler
from pytest_onebit.native.isolate import ChildFailure, in_child
from pytest_onebit.native.library import LibraryError, LibrarySpec, parse_spec, probe
from pytest_onebit.native.loop import NativeLoop, NativeLoopError, NativeRunError, native_loop

__all__ = [
    "ChildFailure",
    "CompileError",
    "LibraryError",
    "LibrarySpec",
    "NativeLoop",
    "NativeLoopError",
    "NativeRunError",
    "compile_library",
    "find_compiler",
    "in_child",
    "native_loop",
    "parse_spec",
    "probe",
]
