"""How a suite run is started: a fresh `python -m pytest`, or a child forked from a warm server.

Both give the run the same thing: the scratch copy as its working directory and first on the
import path, the scratch environment, its output in a log file, a timeout after which it is
killed with everything it started. The fork server (forkserver.py) saves each run the
interpreter's start and the imports of pytest, numpy, Hypothesis and the pytest plugins.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pytest_onebit.mutants.scratch import outer_env

FORKSERVER = Path(__file__).with_name("forkserver.py")
START_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Outcome:
    """How a run ended: its exit code, or the signal that ended it, or the timeout."""

    exit_code: int | None
    signal: int | None = None
    timed_out: bool = False
    imported: dict[str, str] = field(default_factory=dict)


class Launcher(Protocol):
    def launch(self, cwd: Path, args: Sequence[str], env: dict[str, str], log: Path,
               timeout_s: float, modules: Sequence[str] = (),
               path: Sequence[str] = ()) -> Outcome: ...


_REPORT = ("import importlib, json, sys\n"
           "files = {}\n"
           "for n in sys.argv[1:]:\n"
           "    try:\n"
           "        files[n] = importlib.import_module(n).__file__\n"
           "    except Exception as e:\n"
           "        files[n] = '!%s: %s' % (type(e).__name__, e)\n"
           "print(json.dumps(files))\n")


class ProcessLauncher:
    """A fresh interpreter per run (where there is no fork, or when asked for)."""

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python

    def launch(self, cwd, args, env, log, timeout_s, modules=(), path=()) -> Outcome:
        imported: dict[str, str] = {}
        if modules:
            proc = subprocess.run([self.python, "-c", _REPORT, *modules], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=120)
            lines = proc.stdout.strip().splitlines()
            imported = json.loads(lines[-1]) if proc.returncode == 0 and lines else {
                m: f"!the import check exited {proc.returncode}: {proc.stderr.strip()[-400:]}"
                for m in modules}
        with open(log, "wb") as out:
            proc = subprocess.Popen([self.python, "-m", "pytest", *args], cwd=cwd, env=env,
                                    stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.wait()
                return Outcome(None, timed_out=True, imported=imported)
        if code < 0:
            return Outcome(None, signal=-code, imported=imported)
        return Outcome(code, imported=imported)


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill()


class ForkServerError(RuntimeError):
    """The fork server could not start or stopped answering."""


class ForkServer:
    """One warm interpreter that forks a child per run; one run at a time."""

    def __init__(self, python: str, shadowed: Sequence[str]) -> None:
        # a file, not a pipe: nothing can fill it
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [python, "-P", str(FORKSERVER), *shadowed], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.errors, env=outer_env(), text=True,
            start_new_session=True)
        self.ready = False

    def wait_ready(self) -> None:
        if self.ready:
            return
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.errors.seek(0)
            err = self.errors.read().decode(errors="replace")
            raise ForkServerError(f"the fork server did not start: {err.strip()[-800:]}")
        self.ready = True

    def launch(self, cwd, args, env, log, timeout_s, modules=(), path=()) -> Outcome:
        self.wait_ready()
        request = {"cwd": str(cwd), "args": list(args), "env": env, "log": str(log),
                   "timeout": timeout_s, "modules": list(modules), "path": list(path)}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError) as error:
            raise ForkServerError(f"the fork server stopped: {error}") from error
        if not line:
            raise ForkServerError("the fork server stopped answering")
        answer = json.loads(line)
        return Outcome(answer["exit_code"], answer["signal"], answer["timed_out"],
                       answer["imported"])

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            _kill_group(self.proc.pid)
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.errors.close()


class ForkPool:
    """`jobs` fork servers shared by the runner's threads: each run borrows an idle one.
    Used as a Launcher; a server that fails is replaced by a fresh process launch."""

    def __init__(self, jobs: int, python: str = sys.executable,
                 shadowed: Sequence[str] = ()) -> None:
        self.python = python
        self.servers = [ForkServer(python, shadowed) for _ in range(jobs)]
        self.idle: queue.Queue[ForkServer] = queue.Queue()
        for server in self.servers:
            self.idle.put(server)

    def launch(self, cwd, args, env, log, timeout_s, modules=(), path=()) -> Outcome:
        server = self.idle.get()
        try:
            return server.launch(cwd, args, env, log, timeout_s, modules, path)
        except ForkServerError:
            return ProcessLauncher(self.python).launch(cwd, args, env, log, timeout_s,
                                                       modules, path)
        finally:
            self.idle.put(server)

    def close(self) -> None:
        for server in self.servers:
            server.close()

    def __enter__(self) -> ForkPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def can_fork() -> bool:
    return hasattr(os, "fork") and sys.platform != "win32"

