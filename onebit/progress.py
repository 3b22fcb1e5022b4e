"""A progress bar on stderr for long runs, silent for short ones.

Nothing is shown until a run has taken `after` seconds on a terminal (`every_plain` seconds
elsewhere), so tests and quick runs print nothing even on a loaded machine; then a terminal
gets one line redrawn in place (at most every `every` seconds), and anything else (a log
file) a plain line every `every_plain` seconds. No dependency.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, label: str, *, stream: TextIO | None = None,
                 after: float = 1.0, every: float = 0.2, every_plain: float = 10.0,
                 clock=time.monotonic) -> None:
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.after, self.clock = after, clock
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every if self.tty else every_plain
        if not self.tty:  # a log needs no line for a run shorter than its spacing
            self.after = max(after, every_plain)
        self.done = 0
        self.note = ""
        self.start = clock()
        self.last = None  # when the bar was last drawn
        self.shown = False

    def advance(self, n: int = 1, note: str | None = None) -> None:
        self.done = min(self.done + n, self.total)
        if note is not None:
            self.note = note
        now = self.clock()
        if now - self.start < self.after:
            return
        if self.last is not None and now - self.last < self.every and self.done < self.total:
            return
        self.last = now
        self.draw(now)

    def line(self, now: float) -> str:
        width = 24
        filled = int(width * self.done / self.total)
        bar = "#" * filled + "." * (width - filled)
        elapsed = now - self.start
        left = elapsed * (self.total - self.done) / self.done if self.done else 0.0
        note = f" {self.note}" if self.note else ""
        return (f"{self.label} [{bar}] {100 * self.done // self.total:3d}%{note} "
                f"{elapsed:.0f}s, ~{left:.0f}s left")

    def draw(self, now: float) -> None:
        self.shown = True
        if self.tty:
            self.stream.write("\r" + self.line(now) + "\x1b[K")
        else:
            self.stream.write(self.line(now) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.shown and self.tty:
            self.stream.write("\n")
            self.stream.flush()
