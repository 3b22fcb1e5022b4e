"""Running a function in a forked child with a time limit, so that a library that segfaults,
aborts or hangs is a result the parent can report, never a crashed or stuck run.

The child is a `fork` of the caller: it sees the caller's objects as they are, runs `fn`, and
pickles what `fn` returned back through a pipe. Nothing it changes reaches the parent except
that value. Linux and macOS only (fork).
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import Any

#: refuse a child's answer past this size before unpickling it (the child runs foreign code)
MAX_ANSWER = 256 << 20


class ChildFailure(RuntimeError):
    """The child died, hung, or raised; the message says which, in one line."""


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"crashed ({name})"
    return f"exited with status {os.WEXITSTATUS(status)} before answering"


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _read_answer(read_end: int, pid: int, timeout: float, what: str) -> bytes:
    """Everything the child writes until it closes the pipe; the child is killed (and
    `ChildFailure` raised) past the time limit or the size limit."""
    chunks, size = [], 0
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                _kill(pid)
                raise ChildFailure(f"{what} did not return within {timeout:g} s (killed)")
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER:
                _kill(pid)
                raise ChildFailure(f"{what} answered with more than {MAX_ANSWER} bytes")
    finally:
        os.close(read_end)


def in_child(fn: Callable[[], Any], *, timeout: float, what: str = "the library") -> Any:
    """`fn()` computed in a forked child; `ChildFailure` when the child crashes, exits, raises
    or runs past `timeout` seconds (it is then killed)."""
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into the caller's code
        os.close(read_end)
        faulthandler.disable()  # a crash in the library is the parent's to report, quietly
        try:
            try:
                data = pickle.dumps(("ok", fn()))
            except BaseException as error:  # noqa: BLE001 - reported to the parent
                data = pickle.dumps(("raised", f"{type(error).__name__}: {error}"))
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        data = _read_answer(read_end, pid, timeout, what)
    except ChildFailure:  # already killed and reaped
        raise
    except BaseException:  # an interrupt in the parent: leave no child behind
        _kill(pid)
        raise
    _, status = os.waitpid(pid, 0)
    if not data:
        raise ChildFailure(f"{what} {_describe(status)}")
    try:
        kind, value = pickle.loads(data)
    except Exception as error:  # noqa: BLE001 - a torn answer from a dying child
        raise ChildFailure(f"{what} {_describe(status)} (its answer was unreadable: "
                           f"{type(error).__name__})") from None
    if kind != "ok":
        raise ChildFailure(f"{what}: {value}")
    return value
