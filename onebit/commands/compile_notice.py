"""What the text commands say while numba compiles: a line on stderr when the first compile
starts (on an empty kernel cache `onebit generate` would otherwise sit silent for some 20 s
before its first token), and the seconds spent compiling, for the report line.

numba announces a compile as a "numba:compile" event, and only a compile: a kernel loaded from
the on-disk cache (onebit/models/kernel_cache.py) raises none. Compiles nest (a kernel compiles
the kernels it calls), so only the outermost ones are timed. Without numba nothing is watched.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


def notice_line() -> str:
    """The line printed when the first compile starts: what is happening and whether it will
    happen again."""
    from onebit.models.kernel_cache import cache_dir

    where = cache_dir()
    if where is None:
        return ("[compiling the kernels for this CPU; the kernel cache is off "
                "(ONEBIT_KERNEL_CACHE), so every run compiles them]")
    return (f"[compiling the kernels for this CPU, once (up to half a minute); later runs load "
            f"them from {where}]")


class CompileWatch:
    """Counts the seconds of the outermost compiles since the last `take`; says `notice_line`
    on `stream` when the first one starts."""

    def __init__(self, stream: TextIO, clock=time.perf_counter) -> None:
        self.stream = stream
        self.clock = clock
        self.said = False
        self._depth = 0
        self._started = 0.0
        self._seconds = 0.0

    def started(self) -> None:
        if self._depth == 0:
            self._started = self.clock()
            if not self.said:
                self.said = True
                print(notice_line(), file=self.stream, flush=True)
        self._depth += 1

    def ended(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._seconds += self.clock() - self._started

    def take(self) -> float:
        """The compile seconds since the last call."""
        seconds, self._seconds = self._seconds, 0.0
        return seconds


@contextmanager
def watching_compiles(stream: TextIO | None = None) -> Iterator[CompileWatch]:
    """A `CompileWatch` fed by numba's compile events for the duration of the block, saying
    its line on `stream` (sys.stderr as it is when the block starts)."""
    watch = CompileWatch(stream if stream is not None else sys.stderr)
    try:
        from numba.core import event
    except ImportError:
        yield watch
        return

    class Listener(event.Listener):
        def on_start(self, _event) -> None:
            watch.started()

        def on_end(self, _event) -> None:
            watch.ended()

    with event.install_listener("numba:compile", Listener()):
        yield watch
