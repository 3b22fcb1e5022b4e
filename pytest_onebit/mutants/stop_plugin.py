"""The pytest plugin a mutant's suite run loads: the tests of the checks the mutant names run
first, and the run stops as soon as the verdict is known.

It is loaded by file, not by package (`-p onebit_mutant_stop` with a copy of this file on the
path), so it imports nothing but pytest and the standard library: it must work in any project's
scratch copy, and must not import the code under test before pytest does.

The environment says what to do:

- `ONEBIT_MUTANT_BREAKS`: the check ids the mutant's header names (`I2 I3 I5`);
- `ONEBIT_MUTANT_STOP`: `first-kill` (stop after the first failing test of a named check),
  `named` (run every test of the named checks, then stop if one of them failed, so each named
  check that kills the mutant is credited in full) or `never` (run everything, in pytest's
  order);
- `ONEBIT_MUTANT_FAILED`: a file the node id of every failing test is written to, one a line
  (the runner's targeted baseline reruns those tests unmutated);
- `ONEBIT_MUTANT_ONLY`: a file of node ids, one a line: every other collected test is
  deselected (that targeted baseline).

A mutant none of whose named checks fails always runs the whole suite, so *off-target* and
*survived* are told apart exactly as without this plugin.
"""

from __future__ import annotations

import os
import re

import pytest

MODES = ("first-kill", "named", "never")
# The same rule as suite_run.check_of_test (kept apart: this file must stand alone).
_CHECK_TEST = re.compile(r"^test_([A-Z]+[0-9]+)(?:_|$)")


def _check_id(name: str) -> str | None:
    m = _CHECK_TEST.match(name.split("[", 1)[0])
    return m.group(1) if m else None


class MutantStop:
    """Orders the named checks' tests first and ends the session once the mutant is killed."""

    def __init__(self, breaks: set[str], mode: str) -> None:
        self.breaks = breaks
        self.mode = mode
        self.named_left: set[str] = set()  # node ids of named tests not yet finished
        self.killed = False
        self.session: pytest.Session | None = None

    def _named(self, name: str) -> bool:
        return _check_id(name) in self.breaks

    @pytest.hookimpl(trylast=True)  # after pytest's own fixture-scope ordering
    def pytest_collection_modifyitems(self, session, config, items) -> None:
        self.session = session
        named = [item for item in items if self._named(item.name)]
        rest = [item for item in items if not self._named(item.name)]
        items[:] = named + rest
        self.named_left = {item.nodeid for item in named}

    def pytest_runtest_logreport(self, report) -> None:
        if report.failed and self._named(report.nodeid.rsplit("::", 1)[-1]):
            self.killed = True
            if self.mode == "first-kill":
                self._stop("the first test of a named check failed")

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        self.named_left.discard(nodeid)
        if self.mode == "named" and self.killed and not self.named_left:
            self._stop("every test of the named checks ran and one failed")

    def _stop(self, why: str) -> None:
        # shouldfail, not shouldstop: pytest then exits 1 (tests failed), not 2 (interrupted)
        if self.session is not None and not self.session.shouldfail:
            self.session.shouldfail = f"mutant killed: {why}"


class FailedTests:
    """Writes the node id of each failing test (setup, call or teardown) to a file."""

    def __init__(self, path: str) -> None:
        self.path = path
        open(path, "w").close()  # noqa: SIM115 - an empty file says "none failed"

    def pytest_runtest_logreport(self, report) -> None:
        if report.failed:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(report.nodeid + "\n")


class OnlyTests:
    """Keeps the collected tests whose node ids the file lists; deselects the rest."""

    def __init__(self, path: str) -> None:
        with open(path, encoding="utf-8") as listed:
            self.wanted = {line.strip() for line in listed if line.strip()}

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items) -> None:
        kept = [item for item in items if item.nodeid in self.wanted]
        dropped = [item for item in items if item.nodeid not in self.wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_configure(config) -> None:
    failed = os.environ.get("ONEBIT_MUTANT_FAILED")
    if failed:
        config.pluginmanager.register(FailedTests(failed), "onebit-mutant-failed")
    only = os.environ.get("ONEBIT_MUTANT_ONLY")
    if only:
        config.pluginmanager.register(OnlyTests(only), "onebit-mutant-only")
    mode = os.environ.get("ONEBIT_MUTANT_STOP", "never")
    if mode not in MODES:
        raise pytest.UsageError(f"ONEBIT_MUTANT_STOP={mode!r}; known: {list(MODES)}")
    breaks = set(os.environ.get("ONEBIT_MUTANT_BREAKS", "").split())
    if mode != "never" and breaks:
        config.pluginmanager.register(MutantStop(breaks, mode), "onebit-mutant-stop")
