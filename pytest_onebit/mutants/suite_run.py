"""One pytest run in a scratch copy, read back from its JUnit XML.

A failing test is credited to the check its function name starts with: `test_I7_pass_law[..]`
belongs to check `I7-pass-law` (id I7). Any project can name its checks that way; a failing
test whose name does not start with a check id counts under "other".
"""

from __future__ import annotations

import re
import shutil
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_onebit.mutants.launch import Launcher, ProcessLauncher
from pytest_onebit.mutants.scratch import scratch_env

#: How far a mutant's run goes (stop_plugin.py holds the same tuple: it must stand alone).
STOP_MODES = ("first-kill", "named", "never")
STOP_PLUGIN = "onebit_mutant_stop"  # the module name stop_plugin.py is copied under

DEFAULT_TIMEOUT_S = 300.0
OTHER = "other"
_CHECK_TEST = re.compile(r"^test_([A-Z]+[0-9]+)(?:_|$)")


def check_of_test(test_name: str) -> str:
    """`test_I7_pass_law[one-pass-...]` -> `I7-pass-law`; OTHER for a test of no check."""
    bare = test_name.split("[", 1)[0]
    if not _CHECK_TEST.match(bare):
        return OTHER
    return bare.removeprefix("test_").replace("_", "-")


def check_id(check: str) -> str:
    """`I7-pass-law` -> `I7`."""
    return check.split("-", 1)[0]


def check_order(check: str) -> tuple:
    """Natural order: I2 before I10, I12 before S1; OTHER last."""
    m = re.match(r"^([A-Z]+)([0-9]+)", check)
    return (1, check, 0) if m is None else (0, m.group(1), int(m.group(2)))


@dataclass
class SuiteRun:
    """What one pytest run in a scratch copy gave."""

    exit_code: int | None  # None: it did not run (or timed out)
    tests: int = 0
    failed: int = 0
    skipped: int = 0
    failing_checks: dict[str, int] = field(default_factory=dict)  # check (or OTHER) -> tests
    seconds: float = 0.0
    detail: str = ""  # why it is an error, or a tail of pytest's output
    imported: dict[str, str] = field(default_factory=dict)  # package -> file, when asked
    failed_ids: tuple[str, ...] = ()  # node ids of the failing tests, in the order they failed
    only: tuple[str, ...] | None = None  # the node ids the run was limited to (None: all)

    @property
    def judged(self) -> bool:
        """pytest ran and its result can be read (0: all passed, 1: some failed)."""
        return self.exit_code == 0 or (self.exit_code == 1 and self.failed > 0)


def install_stop_plugin(folder: Path) -> Path:
    """Copy stop_plugin.py into `folder` as a top-level module; return the folder (for the
    path). By file, so the run imports it without importing any package of the copy."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).with_name("stop_plugin.py"), folder / f"{STOP_PLUGIN}.py")
    return folder


def parse_junit(path: Path) -> tuple[int, int, int, dict[str, int]]:
    """(tests, failed, skipped, failing tests per check) from a JUnit XML report."""
    root = ET.parse(path).getroot()
    tests = failed = skipped = 0
    per_check: dict[str, int] = {}
    for case in root.iter("testcase"):
        tests += 1
        if case.find("skipped") is not None:
            skipped += 1
            continue
        if case.find("failure") is None and case.find("error") is None:
            continue
        failed += 1
        check = check_of_test(case.get("name", ""))
        per_check[check] = per_check.get(check, 0) + 1
    ordered = dict(sorted(per_check.items(), key=lambda kv: check_order(kv[0])))
    return tests, failed, skipped, ordered


def _tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def run_suite(scratch: Path, pytest_args: Sequence[str], *, python: str = sys.executable,
              timeout_s: float = DEFAULT_TIMEOUT_S, breaks: Sequence[str] = (),
              stop: str = "never", server: Launcher | None = None,
              modules: Sequence[str] = (), only: Sequence[str] | None = None) -> SuiteRun:
    """Run pytest with `pytest_args` inside `scratch` and read its JUnit XML.

    `breaks` and `stop` (`first-kill`, `named`, `never`): the tests of the named checks run
    first and the run ends once the verdict is known (stop_plugin). `server`: a fork server to
    run in (None: a fresh `python -m pytest`). `modules`: packages whose files the run reports
    in `SuiteRun.imported` (the shadowing check). `only`: node ids; every other test is
    deselected (the targeted baseline)."""
    if stop not in STOP_MODES:
        raise ValueError(f"stop must be one of {STOP_MODES}, got {stop!r}")
    xml = scratch.parent / "junit.xml"
    log = scratch.parent / "pytest.log"
    plugin_dir = install_stop_plugin(scratch.parent / "plugins")
    # --tb=line: the JUnit XML keeps each failure's message, and a mutant that fails hundreds
    # of tests spends a second less formatting tracebacks nobody reads.
    args = [*pytest_args, "-q", "-p", "no:cacheprovider", "--tb=line", f"--junitxml={xml}",
            "-p", STOP_PLUGIN]
    env = scratch_env(scratch, extra_path=(plugin_dir,))
    env["ONEBIT_MUTANT_BREAKS"] = " ".join(breaks)
    env["ONEBIT_MUTANT_STOP"] = stop
    failed_log = scratch.parent / "failed.txt"
    env["ONEBIT_MUTANT_FAILED"] = str(failed_log)
    if only is not None:
        only = tuple(only)
        listed = scratch.parent / "only.txt"
        listed.write_text("".join(f"{nodeid}\n" for nodeid in only), encoding="utf-8")
        env["ONEBIT_MUTANT_ONLY"] = str(listed)
    launcher = server if server is not None else ProcessLauncher(python)
    start = time.perf_counter()
    outcome = launcher.launch(scratch, args, env, log, timeout_s, modules,
                              path=(str(scratch), str(plugin_dir)))
    seconds = time.perf_counter() - start
    tail = _tail(log)
    failed_ids = _failed_ids(failed_log)
    if outcome.timed_out:
        return SuiteRun(None, seconds=seconds, imported=outcome.imported,
                        detail=f"the suite did not finish in {timeout_s:.0f} s (a hang?)",
                        only=only)
    if outcome.exit_code is None:
        return SuiteRun(None, seconds=seconds, imported=outcome.imported,
                        detail=f"pytest died of signal {outcome.signal} (a crash):\n{tail}",
                        only=only)
    code = outcome.exit_code
    if code not in (0, 1) or not xml.is_file():
        return SuiteRun(code, seconds=seconds, imported=outcome.imported,
                        detail=f"pytest exited {code} (not a test failure):\n{tail}",
                        only=only)
    tests, failed, skipped, per_check = parse_junit(xml)
    if code == 1 and not failed:
        return SuiteRun(code, tests, seconds=seconds, imported=outcome.imported,
                        detail=f"pytest exited 1 but the JUnit XML shows no failure:\n{tail}",
                        only=only)
    return SuiteRun(code, tests, failed, skipped, per_check, seconds, tail,
                    imported=outcome.imported, failed_ids=failed_ids, only=only)


def _failed_ids(path: Path) -> tuple[str, ...]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return ()
    return tuple(dict.fromkeys(line for line in lines if line))
