"""A compiled loop as a `run()`: `native_loop("PATH.so[:SYMBOL]")`.

Each call forks a child that loads the library, hands it the caller's base and head through
`Bridge`, and calls `onebit_run`. The child sends back the result and the state the base and
head recorded; the parent copies that state onto its own objects and replays the tokens the
consumer was handed, so the checks read exactly what they read for a Python loop.

What the library does wrong becomes an exception of `run()`, which every check reports as
"the loop raised ...": a crash, a hang past the time limit, a write past `out` (a guard region
follows it), a count outside `[0, max_tokens]`, a failing callback it ignored. A failure the
library reports (a negative status) is a `NativeRunError`, a `DecodeError` carrying what was
emitted, as a Python loop's would.
"""

from __future__ import annotations

import ctypes as C
import pickle
from dataclasses import dataclass

from onebit.abi import layout as L
from onebit.errors import DecodeError
from onebit.loop import RunResult, RunStats
from pytest_onebit.native.bridge import Bridge, Fault
from pytest_onebit.native.isolate import ChildFailure, in_child
from pytest_onebit.native.library import LibrarySpec, parse_spec, probe

DEFAULT_SYMBOL = "onebit_run"
DEFAULT_TIMEOUT = 10.0
GUARD = 64  # int32 slots after `out`, filled with SENTINEL: a write past out shows there
SENTINEL = 0x5EADBEEF


class NativeLoopError(AssertionError):
    """The library broke the ABI (crashed, hung, overran `out`, ignored a failure)."""


class NativeRunError(DecodeError):
    """`onebit_run` returned a negative status; `.status` is it, `.emitted` what it emitted."""

    def __init__(self, message: str, *, culprit: str, pos: int | None, status: int,
                 emitted: list[int], calls: list[str]) -> None:
        super().__init__(message, culprit=culprit, pos=pos)
        self.status = status
        self.emitted = emitted
        self.calls = calls  # the callbacks the library called, in order (check F1 reads it)


def _picklable_state(obj) -> dict:
    """The attributes of `obj` that can travel back (callables such as rules stay behind;
    a run does not change them)."""
    state = {}
    for name, value in vars(obj).items():
        try:
            pickle.dumps(value)
        except Exception:  # noqa: BLE001 - lambdas, closures, handles
            continue
        state[name] = value
    return state


@dataclass
class _Answer:
    status: int
    n_out: int
    stopped: int
    out: list[int]
    stats: dict
    failures: list
    handed: list[int]
    calls: list[str]
    base: dict
    head: dict | None


class NativeLoop:
    """`run(base, head, prompt, *, max_tokens, k, on_token=None)` backed by a library."""

    def __init__(self, spec: LibrarySpec, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.spec = spec
        self.path, (self.symbol,) = spec.path, spec.symbols
        self.timeout = timeout
        self.fault: Fault | None = None  # inject into the next calls (tests of faults)

    def __repr__(self) -> str:
        return f"native_loop({self.spec})"

    def _in_child(self, base, head, prompt, max_tokens, k, on_token) -> _Answer:
        lib = C.CDLL(self.path)
        fn = getattr(lib, self.symbol)
        fn.argtypes, fn.restype = L.RUN_ARGTYPES, C.c_int32
        bridge = Bridge(base, head, on_token, self.fault)
        c_prompt = (C.c_int32 * len(prompt))(*prompt)
        out = (C.c_int32 * (max_tokens + GUARD))(*([SENTINEL] * (max_tokens + GUARD)))
        n_out, stopped, stats = C.c_int32(-1), C.c_int32(0), L.Stats()
        status = fn(C.byref(bridge.c_base),
                    C.byref(bridge.c_head) if bridge.c_head is not None else None,
                    c_prompt, len(prompt), max_tokens, k, bridge.c_on_token, None,
                    out, C.byref(n_out), C.byref(stopped), C.byref(stats))
        return _Answer(status, n_out.value, stopped.value, list(out),
                       {f: getattr(stats, f) for f in L.STATS_FIELDS},
                       [(f.callback, f.pos, f.message) for f in bridge.failures],
                       bridge.handed, bridge.log, _picklable_state(base),
                       _picklable_state(head) if head is not None else None)

    def __call__(self, base, head, prompt, *, max_tokens: int, k: int, on_token=None,
                 fallback=None) -> RunResult:
        if fallback is not None:
            raise ValueError("a compiled loop takes no fallback (the ABI has none)")
        prompt = [int(t) for t in prompt]
        try:
            answer = in_child(lambda: self._in_child(base, head, prompt, max_tokens, k,
                                                     on_token),
                              timeout=self.timeout, what=f"{self.symbol} in {self.path}")
        except ChildFailure as failure:
            raise NativeLoopError(str(failure)) from None
        vars(base).update(answer.base)
        if head is not None:
            vars(head).update(answer.head)
        for token in answer.handed:  # the consumer sees in the parent what it saw in the child
            try:
                if on_token is not None:
                    on_token(token)
            except Exception:  # noqa: BLE001 - it raised in the child too; reported below
                break
        return self._result(answer, prompt, max_tokens)

    def _result(self, a: _Answer, prompt: list[int], max_tokens: int) -> RunResult:
        name = self.symbol
        overrun = [i for i in range(max_tokens, max_tokens + GUARD) if a.out[i] != SENTINEL]
        if overrun:
            raise NativeLoopError(f"{name} wrote past out: out[{overrun[0]}] changed, and out "
                                  f"holds max_tokens = {max_tokens}")
        if not 0 <= a.n_out <= max_tokens:
            raise NativeLoopError(f"{name} returned n_out = {a.n_out}, outside [0, max_tokens "
                                  f"= {max_tokens}]")
        tokens = a.out[:a.n_out]
        if a.status >= 0 and a.failures:
            callback, pos, message = a.failures[0]
            raise NativeLoopError(f"{name} returned {a.status} although {callback} failed "
                                  f"(at position {pos}: {message}): it ignored the failure")
        if a.status < 0:
            culprit, pos, why = "loop", len(prompt) + len(tokens), "no callback failed"
            if a.failures:
                callback, at, why = a.failures[0]
                culprit = "consumer" if callback == "on_token" else callback.split(".")[0]
                why = f"{callback} failed: {why}"
            raise NativeRunError(f"{name} returned status {a.status} after {len(tokens)} "
                                 f"tokens ({why})", culprit=culprit, pos=pos, status=a.status,
                                 emitted=tokens, calls=a.calls)
        stats = RunStats(**a.stats)
        return RunResult(tokens=tokens, stats=stats, stopped=bool(a.stopped))


def native_loop(spec: str, *, timeout: float = DEFAULT_TIMEOUT) -> NativeLoop:
    """The compiled loop `PATH.so[:SYMBOL]` names (default symbol `onebit_run`), probed:
    a missing file, symbol or ABI version is a `LibraryError` now, not a failed check later."""
    parsed = parse_spec(spec, (DEFAULT_SYMBOL,), what="PATH.so[:SYMBOL]")
    probe(parsed)
    return NativeLoop(parsed, timeout=timeout)
