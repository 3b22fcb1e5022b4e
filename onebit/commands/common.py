"""What every `onebit` command shares: one-line errors on stderr, quiet ends on a closed pipe,
the report formats, and where the project checkout is."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

#: Exit statuses: 0 all good, 1 a check failed or a mutant survived, 2 bad input or usage.
OK, FAILED, BAD_INPUT = 0, 1, 2


def fail(command: str, error: BaseException | str) -> int:
    """Print `error` as one line on stderr; return the exit status of bad input."""
    text = str(error) if not isinstance(error, str) else error
    message = " ".join(text.split()) or type(error).__name__
    print(f"onebit {command}: error: {message}", file=sys.stderr)
    return BAD_INPUT


def quiet_stdout() -> None:
    """The reader went away (`| head`): send the rest of stdout nowhere, without a traceback."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def emit(text: str) -> None:
    """Print a report; a reader that stops early is no error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        quiet_stdout()
    except OSError as error:  # a full disk, a device that refuses: the report is lost; say so
        quiet_stdout()  # what is left in the buffer would fail again at exit
        print(f"onebit: error: cannot write the report to stdout: {error.strerror or error}",
              file=sys.stderr)
        raise SystemExit(BAD_INPUT) from None


def add_format(parser: argparse.ArgumentParser, choices=("text", "md", "json"),
               default: str = "text") -> None:
    parser.add_argument("--format", choices=choices, default=default,
                        help=f"how to print the report (default {default}): plain text, "
                        "Markdown for a pull request, or JSON")


def positive(name: str, least: int = 1):
    """An argparse type: an int >= `least` (1: positive; 0: none or more), with the flag named
    in the error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} wants an integer, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{name} must be >= {least}, got {value}")
        return value

    return parse


def duration(name: str):
    """An argparse type for a length of time: `90s`, `30m`, `2h30m`, `1.5h` or plain seconds;
    refused by name unless above zero and below 100 days."""
    import re

    part = re.compile(r"(\d+(?:\.\d+)?)([hms])")

    def parse(text: str) -> float:
        text = text.strip().lower()
        try:
            seconds = float(text)
        except ValueError:
            pieces = part.findall(text)
            if not pieces or "".join(n + u for n, u in pieces) != text:
                raise argparse.ArgumentTypeError(
                    f"{name} takes a time such as 90s, 30m, 2h30m or 1.5h, got {text!r}"
                ) from None
            seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in pieces)
        if not 0 < seconds < 100 * 86400:
            raise argparse.ArgumentTypeError(f"{name} must be above 0 and below 100 days, "
                                             f"got {text!r}")
        return seconds

    return parse


def project_root() -> Path | None:
    """The project checkout the installed package lives in (an editable install), or None."""
    import onebit

    root = Path(onebit.__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "tests").is_dir():
        return root
    return None
