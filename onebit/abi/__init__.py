"""The C ABI (version 1) through which onebit holds a compiled loop or base to its contract.

`onebit_abi.h` ships inside this package: compile against it with `-I$(python -c "import
onebit.abi; print(onebit.abi.include_dir())")`. `onebit.abi.layout` mirrors its structs for
ctypes. docs/c-abi.md explains every field.
"""

from __future__ import annotations

from pathlib import Path

#: The version this package speaks; a library exports the same number as `onebit_abi_version`.
ABI_VERSION = 1
HEADER = "onebit_abi.h"


def include_dir() -> Path:
    """The folder that holds `onebit_abi.h` (pass it to the compiler as `-I`)."""
    return Path(__file__).resolve().parent


def header_path() -> Path:
    """The full path of `onebit_abi.h`."""
    return include_dir() / HEADER


__all__ = ["ABI_VERSION", "HEADER", "header_path", "include_dir"]
