"""A Python base and head seen from C: `onebit_base` and `onebit_head` vtables whose callbacks
call the Python objects, so every call is recorded where the checks read it.

Values cross as the header says: tokens as int32, logits and hidden rows as float32. A Python
exception inside a callback (or an answer the ABI cannot carry: a wrong shape, too many rows)
is caught, recorded in `failures`, and returned to the loop as status 1. An injected `fault`
makes the n-th call of one callback fail the same way, so a test can watch the loop stop.
"""

from __future__ import annotations

import ctypes as C
import operator
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from onebit.abi import layout as L

FAILED = 1


@dataclass(frozen=True)
class Fault:
    """Make the `nth` (1-based) call of `callback` ("base.step", "head.propose", ...) fail."""

    callback: str
    nth: int = 1


@dataclass
class CallbackFailure:
    callback: str
    pos: int | None
    message: str


@dataclass
class Bridge:
    """The vtables for one run; keep it alive while the loop runs (it owns the callbacks)."""

    base: object
    head: object | None
    on_token: Callable[[int], object] | None
    fault: Fault | None = None
    failures: list[CallbackFailure] = field(default_factory=list)
    handed: list[int] = field(default_factory=list)  # tokens handed to on_token, in order
    calls: dict[str, int] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)  # every callback called, in order

    def __post_init__(self) -> None:
        self.vocab = int(self.base.vocab_size)
        config = getattr(self.base, "config", None)
        self.hidden = int(getattr(config, "hidden", 0) or len(self.base.last_hidden()))
        self._keep: list = []
        self.c_base = L.Base(None, self.vocab, self.hidden, *self._base_callbacks())
        self.c_head = L.Head(None, *self._head_callbacks()) if self.head is not None else None
        self.c_on_token = L.OnTokenFn(self._on_token)

    # -- plumbing ---------------------------------------------------------------------------

    def _wrap(self, name: str, kind, body, pos_arg: int | None = None):
        """A C callback running `body`; any exception is recorded and becomes status 1."""

        def callback(_self, *args):
            self.calls[name] = self.calls.get(name, 0) + 1
            self.log.append(name)
            pos = args[pos_arg] if pos_arg is not None else None
            try:
                if self.fault is not None and self.fault.callback == name \
                        and self.calls[name] == self.fault.nth:
                    raise RuntimeError(f"injected fault: call {self.fault.nth} of {name}")
                body(*args)
                return 0
            except BaseException as error:  # noqa: BLE001 - must not unwind into C
                self.failures.append(CallbackFailure(name, pos, f"{type(error).__name__}: "
                                                                f"{error}"))
                return FAILED

        fn = kind(callback)
        self._keep.append(fn)
        return fn

    @staticmethod
    def _put(ptr, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values, dtype=np.float32)
        C.memmove(ptr, values.ctypes.data, values.nbytes)

    def _rows(self, value, n: int | None, what: str) -> np.ndarray:
        rows = np.asarray(value, dtype=np.float64)
        width = self.vocab if what == "logits" else self.hidden
        if rows.ndim != 2 or rows.shape[1] != width or (n is not None and rows.shape[0] != n):
            raise ValueError(f"{what} of shape {rows.shape}, the ABI carries "
                             f"[{n if n is not None else 'rows'}, {width}]")
        return rows

    # -- onebit_base ------------------------------------------------------------------------

    def _base_callbacks(self) -> list:
        base = self.base
        pending = {"rows": 0}

        def rows_of(method):
            def body(out):
                value = method()
                out[0] = operator.index(value)
            return body

        def step(token, pos, logits):
            self._put(logits, self._rows(np.asarray(base.step(token, pos))[None], 1, "logits"))

        def verify(tokens, n, pos, logits):
            batch = [tokens[i] for i in range(n)]
            pending["rows"] = n
            self._put(logits, self._rows(base.verify(batch, pos), n, "logits"))

        def last_hidden(out):
            self._put(out, self._rows(np.asarray(base.last_hidden())[None], 1, "hidden"))

        def last_hidden_rows(out, n_rows):
            rows = self._rows(base.last_hidden_rows(), None, "hidden rows")
            if rows.shape[0] > pending["rows"]:
                raise ValueError(f"{rows.shape[0]} hidden rows after a verify of "
                                 f"{pending['rows']}: more than the caller's buffer holds")
            self._put(out, rows)
            n_rows[0] = rows.shape[0]

        prefill = getattr(base, "max_prefill_rows", None)
        return [
            self._wrap("base.max_batch_rows", L.MaxRowsFn, rows_of(base.max_batch_rows)),
            self._wrap("base.max_prefill_rows", L.MaxRowsFn, rows_of(prefill)) if prefill
            else L.MaxRowsFn(),
            self._wrap("base.reset", L.ResetFn, lambda: base.reset()),
            self._wrap("base.step", L.StepFn, step, pos_arg=1),
            self._wrap("base.verify", L.VerifyFn, verify, pos_arg=2),
            self._wrap("base.commit_verify", L.CommitVerifyFn, lambda n: base.commit_verify(n)),
            self._wrap("base.last_hidden", L.LastHiddenFn, last_hidden),
            self._wrap("base.last_hidden_rows", L.LastHiddenRowsFn, last_hidden_rows),
        ]

    # -- onebit_head ------------------------------------------------------------------------

    def _head_callbacks(self) -> list:
        head = self.head

        def needs(out):
            out[0] = 1 if head.needs_last_hidden() else 0

        def propose(token, pos, k, hidden, drafts, n_drafts):
            row = None
            if hidden:  # NULL for a one-pass head
                row = np.ctypeslib.as_array(hidden, (self.hidden,)).astype(np.float64)
            answer = head.propose(token, pos, k, row)
            answer = [] if answer is None else [operator.index(t) for t in answer]
            # The ABI's buffer holds k drafts: an over-answering head is cut here, as the
            # Python loop would cut it (I7's over-proposing scenarios cost the same either way).
            answer = answer[:max(k, 0)]
            for i, t in enumerate(answer):
                drafts[i] = t
            n_drafts[0] = len(answer)

        def commit_rows(tokens, rows, count):
            toks = [tokens[i] for i in range(count)]
            block = (np.ctypeslib.as_array(rows, (count, self.hidden)).astype(np.float64)
                     if count else np.zeros((0, self.hidden)))
            head.commit_rows(toks, block, count)

        return [
            self._wrap("head.needs_last_hidden", L.NeedsHiddenFn, needs),
            self._wrap("head.propose", L.ProposeFn, propose, pos_arg=1),
            self._wrap("head.commit_rows", L.CommitRowsFn, commit_rows),
            self._wrap("head.reset", L.ResetFn, lambda: head.reset()),
        ]

    # -- the consumer -----------------------------------------------------------------------

    def _on_token(self, _ctx, token: int) -> int:
        self.handed.append(int(token))
        if self.on_token is None:
            return 1
        try:
            return 0 if self.on_token(int(token)) is False else 1
        except BaseException as error:  # noqa: BLE001 - a raising consumer stops the run
            self.failures.append(CallbackFailure("on_token", None, f"{type(error).__name__}: "
                                                                   f"{error}"))
            return 0
