"""The progress bar: silent for short runs, redrawn in place on a terminal, plain lines
elsewhere."""

from __future__ import annotations

import io

from onebit.progress import Progress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_silent_until_the_run_is_long():
    """Nothing is written in the first second, however far the run gets."""
    clock, stream = Clock(), io.StringIO()
    bar = Progress(10, "x", stream=stream, clock=clock)
    for _ in range(10):
        clock.now += 0.05
        bar.advance()
    bar.close()
    assert stream.getvalue() == ""


def test_terminal_redraws_one_line_and_ends_it():
    """On a terminal the bar is redrawn with a carriage return, at most every 0.2 s (and when
    done), and close() ends the line."""
    clock, stream = Clock(), Terminal()
    bar = Progress(4, "sweep", stream=stream, clock=clock)
    for _ in range(4):
        clock.now += 1.5
        bar.advance(note="k 1")
    bar.close()
    out = stream.getvalue()
    assert out.count("\r") == 4 and out.endswith("\n")
    assert "sweep [" in out and "100% k 1" in out


def test_log_gets_plain_lines_seldom():
    """Elsewhere (a log file) the bar is a plain line at most every 10 s, plus the last."""
    clock, stream = Clock(), io.StringIO()
    bar = Progress(100, "acceptance", stream=stream, clock=clock)
    for _ in range(100):
        clock.now += 0.5
        bar.advance()
    lines = stream.getvalue().splitlines()
    assert 4 <= len(lines) <= 7 and "\r" not in stream.getvalue()
    assert "100%" in lines[-1]


def test_log_stays_quiet_for_a_slow_short_run():
    """Elsewhere than a terminal nothing is written for a run under 10 s, even one slowed past
    the terminal's 1 s threshold (a loaded CI machine): tools' stderr stays clean."""
    clock, stream = Clock(), io.StringIO()
    bar = Progress(4, "sweep", stream=stream, clock=clock)
    for _ in range(4):
        clock.now += 2.0
        bar.advance()
    bar.close()
    assert stream.getvalue() == ""
