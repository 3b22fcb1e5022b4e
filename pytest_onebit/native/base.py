"""A compiled base (`onebit_base`, C ABI version 1) as a Python `BaseModel`, so that
`check_base` and `--onebit-base-lib` hold it to B1..B7 like any other base.

`native_base_factory("PATH.so[:MAKE[:FREE]]")` probes the library (a `LibraryError` when it
cannot be held) and returns a factory of fresh bases; each is freed with FREE when collected.
The base runs in this process (B1..B7 make thousands of calls, each checked bit for bit), so
a base that crashes takes the run down with it: hold a new one under `pytest --forked` or in
a throwaway process first. A call the base refuses (a non-zero status) is a `ContractError`
naming the call and its arguments, as B5 asks of a refusal.
"""

from __future__ import annotations

import ctypes as C
import operator
from collections.abc import Callable, Sequence

import numpy as np

from onebit.abi import layout as L
from onebit.errors import ContractError
from pytest_onebit.native.library import LibraryError, LibrarySpec, parse_spec, probe

DEFAULT_SYMBOLS = ("onebit_make_base", "onebit_free_base")


def _token(value, where: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{where}: token {value!r} is a bool, not a token id")
    try:
        token = operator.index(value)
    except TypeError:
        raise ValueError(f"{where}: token {value!r} is not an integer") from None
    if not -(2**31) <= token < 2**31:
        raise ValueError(f"{where}: token {token} does not fit an int32")
    return token


class NativeBase:
    """One `onebit_base` made by the library's MAKE; the `BaseModel` protocol over it."""

    def __init__(self, make: Callable, free: Callable, spec: LibrarySpec) -> None:
        pointer = make()
        if not pointer:
            raise ContractError(f"{spec}: {spec.symbols[0]}() returned NULL", culprit="base")
        self._pointer, self._free, self._spec = pointer, free, spec
        self._vt = pointer.contents
        self.hidden_size = int(self._vt.hidden_size)
        if self._vt.vocab_size < 1 or self.hidden_size < 1:
            raise ContractError(f"{spec}: vocab_size {self._vt.vocab_size} and hidden_size "
                                f"{self.hidden_size} must be >= 1", culprit="base")
        if not self._vt.max_prefill_rows:
            self.max_prefill_rows = None  # optional in the ABI: absent, as for a Python base
        self._last_rows = 0  # rows of the last verify: last_hidden_rows writes at most that

    def __del__(self) -> None:
        pointer, self._pointer = getattr(self, "_pointer", None), None
        if pointer:
            self._free(pointer)

    def _call(self, name: str, what: str, *args) -> None:
        status = getattr(self._vt, name)(self._vt.self, *args)
        if status != 0:
            raise ContractError(f"{what}: the compiled base refused it (status {status})",
                                culprit="base")

    def _count(self, name: str) -> int:
        value = C.c_int32(0)
        self._call(name, f"{name}()", C.byref(value))
        return value.value

    @property
    def vocab_size(self) -> int:
        return int(self._vt.vocab_size)

    def max_batch_rows(self) -> int:
        return self._count("max_batch_rows")

    def max_prefill_rows(self) -> int:  # shadowed by None when the base has none
        return self._count("max_prefill_rows")

    def reset(self) -> None:
        self._call("reset", "reset()")
        self._last_rows = 0

    def step(self, token: int, pos: int) -> np.ndarray:
        token = _token(token, f"step at position {pos}")
        logits = np.zeros(self.vocab_size, dtype=np.float32)
        self._call("step", f"step({token}) at position {pos}", token, int(pos),
                   logits.ctypes.data_as(L.P_F32))
        return logits

    def verify(self, tokens: Sequence[int], pos: int) -> np.ndarray:
        batch = [_token(t, f"verify at position {pos}") for t in tokens]
        n = len(batch)
        if n == 0:
            raise ValueError(f"an empty verify at position {pos}: a batch has 1 row or more")
        logits = np.zeros((n, self.vocab_size), dtype=np.float32)
        c_tokens = (C.c_int32 * n)(*batch)
        self._call("verify", f"verify of {n} rows at position {pos}", c_tokens, n, int(pos),
                   logits.ctypes.data_as(L.P_F32))
        self._last_rows = n
        return logits

    def commit_verify(self, n: int) -> None:
        self._call("commit_verify", f"commit_verify({n})", int(n))

    def last_hidden(self) -> np.ndarray:
        row = np.zeros(self.hidden_size, dtype=np.float32)
        self._call("last_hidden", "last_hidden()", row.ctypes.data_as(L.P_F32))
        return row

    def last_hidden_rows(self) -> np.ndarray:
        room = max(self._last_rows, 1)
        rows = np.zeros((room, self.hidden_size), dtype=np.float32)
        count = C.c_int32(-1)
        self._call("last_hidden_rows", "last_hidden_rows()", rows.ctypes.data_as(L.P_F32),
                   C.byref(count))
        if not 0 <= count.value <= room:
            raise ContractError(f"last_hidden_rows() reported {count.value} rows after a verify "
                                f"of {self._last_rows}", culprit="base")
        return rows[:count.value].copy()


def native_base_factory(spec: str) -> Callable[[], NativeBase]:
    """A factory of fresh compiled bases from `PATH.so[:MAKE[:FREE]]`."""
    parsed = parse_spec(spec, DEFAULT_SYMBOLS, what="PATH.so[:MAKE[:FREE]]")
    probe(parsed)
    try:
        lib = C.CDLL(parsed.path)
    except OSError as error:  # pragma: no cover - the probe loaded it a moment ago
        raise LibraryError(f"{parsed.path}: cannot load it: {error}") from None
    make = L.MakeBaseFn((parsed.symbols[0], lib))
    free = L.FreeBaseFn((parsed.symbols[1], lib))

    def factory() -> NativeBase:
        return NativeBase(make, free, parsed)

    factory.library = lib  # type: ignore[attr-defined]  # keep it loaded while bases live
    factory.__name__ = factory.__qualname__ = f"native_base({parsed})"
    return factory
