"""Drive `onebit` in-process with any argv and judge what it did.

`judge_cli(argv)` runs `onebit.cli.main(argv)` with stdout and stderr captured and returns:
- "clear error": exit status 2, nothing on stdout, and on stderr no traceback and exactly one
  line `onebit COMMAND: error: ...` (usage errors too);
- "right answer": exit status 0 and a report on stdout (or --help);
and raises AssertionError otherwise ("traceback": an exception escaped; "wrong stream or
exit code": an error on stdout, exit 1 where no check failed, several error lines, ...).
"""

from __future__ import annotations

import contextlib
import io
import re
import signal

from onebit import cli


@contextlib.contextmanager
def deadline(seconds: int):
    """A hang fails the case instead of the suite."""
    def hung(signum, frame):
        raise TimeoutError(f"hang: no answer in {seconds} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_cli(argv: list[str], seconds: int = 60) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        with deadline(seconds), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = cli.main([str(a) for a in argv])
            except SystemExit as done:  # argparse: usage errors and --help
                status = done.code if isinstance(done.code, int) else 1
    except BaseException as error:
        raise AssertionError(f"traceback: onebit {argv} raised {type(error).__name__}: "
                             f"{error}") from error
    return int(status or 0), out.getvalue(), err.getvalue()


def judge_cli(argv: list[str], *, may_fail_check: bool = False) -> str:
    status, out, err = run_cli(argv)
    where = f"onebit {' '.join(map(str, argv))}"
    if "Traceback" in err or "Traceback" in out:
        raise AssertionError(f"traceback: {where}:\n{err[-2000:]}")
    if status == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        errors = [line for line in lines if re.match(r"onebit( [a-z]+)?: error: ", line)]
        if out or len(errors) != 1 or len(lines) != 1:
            raise AssertionError(f"wrong stream: {where}: stdout {out[:200]!r}, stderr "
                                 f"{err[-600:]!r}")
        return "clear error"
    if status == 0:
        if not out.strip():
            raise AssertionError(f"wrong stream: {where} exited 0 with nothing on stdout")
        return "right answer"
    if status == 1 and may_fail_check:
        return "clear error"
    raise AssertionError(f"wrong exit code: {where} exited {status}; stderr {err[-600:]!r}")

