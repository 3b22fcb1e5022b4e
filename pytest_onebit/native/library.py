"""`PATH.so[:SYMBOL]` specs, and the one probe that says whether a library can be held at all:
it exists, loads, exports the symbol, and speaks this package's ABI version.

Every problem is one `LibraryError` line naming the library and what is wrong. The probe runs in
a child process, so a library whose constructor crashes is a refusal, not a crash.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from onebit.abi import ABI_VERSION
from pytest_onebit.loader import LoadError
from pytest_onebit.native.isolate import ChildFailure, in_child

VERSION_SYMBOL = "onebit_abi_version"
PROBE_TIMEOUT = 20.0


class LibraryError(LoadError):
    """A library spec that cannot be held: missing file, no symbol, another ABI version."""


@dataclass(frozen=True)
class LibrarySpec:
    path: str
    symbols: tuple[str, ...]

    def __str__(self) -> str:
        return ":".join((self.path, *self.symbols))


def parse_spec(spec: str, defaults: tuple[str, ...], *, what: str) -> LibrarySpec:
    """`PATH[:SYM[:SYM...]]` with the symbols not given taken from `defaults`."""
    if not isinstance(spec, str) or not spec.strip():
        raise LibraryError(f"wants {what}, got {spec!r}")
    path, *symbols = spec.split(":")
    if len(symbols) > len(defaults) or any(not s.isidentifier() for s in symbols):
        raise LibraryError(f"wants {what}, got {spec!r}")
    if not os.path.isfile(path):
        raise LibraryError(f"{path}: no such file")
    return LibrarySpec(os.path.abspath(path), (*symbols, *defaults[len(symbols):]))


def _look(path: str, symbols: tuple[str, ...]) -> tuple[str | None, list[str], int | None]:
    """In the child: (load error, missing symbols, exported ABI version or None)."""
    try:
        lib = ctypes.CDLL(path)
    except OSError as error:
        return " ".join(str(error).split()), [], None
    missing = [s for s in symbols if not hasattr(lib, s)]
    version = None
    if hasattr(lib, VERSION_SYMBOL):
        version = ctypes.c_int32.in_dll(lib, VERSION_SYMBOL).value
    return None, missing, version


def probe(spec: LibrarySpec) -> None:
    """Refuse, with one `LibraryError`, a library that cannot be held to the contract."""
    try:
        error, missing, version = in_child(lambda: _look(spec.path, spec.symbols),
                                           timeout=PROBE_TIMEOUT, what=f"loading {spec.path}")
    except ChildFailure as failure:
        raise LibraryError(str(failure)) from None
    if error is not None:
        raise LibraryError(f"{spec.path}: cannot load it: {error}")
    if missing:
        raise LibraryError(f"{spec.path}: exports no {', '.join(missing)}")
    if version is None:
        raise LibraryError(f"{spec.path}: exports no {VERSION_SYMBOL} (the ABI version it was "
                           f"built for; this onebit speaks version {ABI_VERSION})")
    if version != ABI_VERSION:
        raise LibraryError(f"{spec.path}: built for ABI version {version}, this onebit "
                           f"speaks version {ABI_VERSION}")
