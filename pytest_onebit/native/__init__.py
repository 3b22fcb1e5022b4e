"""Holding compiled loops and bases (C ABI version 1, `onebit_abi.h`) to the contract.

`native_loop("PATH.so[:SYMBOL]")` is a `run()` like any other: each call runs the library's
`onebit_run` in a child process, with the toy base and the oracle heads handed to it as
ctypes callbacks, and brings back everything they recorded. `native_base(...)` wraps a
compiled `onebit_base` as a Python `BaseModel` for B1..B7. docs/c-abi.md tells the story.
"""

from importlib import import_module

# Lazy: the pytest plugin imports `pytest_onebit.native.plugin` in every run, and that must not
# pull numpy and ctypes in before an option asks for them.
_WHERE = {
    "CompileError": "build", "compile_library": "build", "find_compiler": "build",
    "ChildFailure": "isolate", "in_child": "isolate",
    "LibraryError": "library", "LibrarySpec": "library", "parse_spec": "library",
    "probe": "library",
    "NativeLoop": "loop", "NativeLoopError": "loop", "NativeRunError": "loop",
    "native_loop": "loop",
    "NativeBase": "base", "native_base_factory": "base",
    "NativeLoopContract": "suite", "abi_scenarios": "suite",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
