"""A fork server for mutant suite runs: one interpreter imports pytest, numpy, Hypothesis and the
pytest plugins once, then forks a child per run, and the child runs pytest in a scratch copy.

A fresh `python -m pytest` per mutant pays the interpreter's start and those imports every
time (about 0.7 s of CPU of the 2 s a catalogue's run spends before its first test). The
forked child starts with them loaded and imports everything else (the project's packages,
its tests) from the scratch copy, exactly as a fresh process would: the server never imports
the packages under test, and refuses to start if a preload drags one in.

This file is run as a script (`python -P forkserver.py PACKAGE...`) and imports nothing from
onebit: it must not load the code under test. It reads one JSON request a line on stdin and
answers one JSON line on stdout:

    {"cwd": SCRATCH, "args": [...], "env": {...}, "log": FILE, "timeout": S, "modules": [...]}
    -> {"exit_code": N | null, "signal": N | null, "timed_out": bool, "imported": {...}}

`modules`: packages whose `__file__` the child reports (the shadowing check) before pytest
runs. A child that outlives `timeout` is killed with its process group.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
import time


def preload(shadowed: set[str]) -> None:
    """Import what every run would import anyway, but none of the packages under test."""
    for name in ("numpy", "pytest", "hypothesis"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    from importlib.metadata import entry_points

    for ep in entry_points(group="pytest11"):
        if ep.value.split(".", 1)[0].split(":", 1)[0] in shadowed:
            continue
        # a plugin that fails to load here fails in the child too, where pytest reports it
        with contextlib.suppress(Exception):
            ep.load()
    loaded = sorted(p for p in shadowed if p in sys.modules)
    if loaded:
        raise SystemExit(f"forkserver: preloading imported the packages under test {loaded}")


def child(request: dict, result_fd: int) -> None:
    """In the forked child: become a fresh pytest run in the scratch copy. Never returns."""
    code = 3
    try:
        os.setpgid(0, 0)  # so a timeout can kill the run and whatever it started
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # as `python -m pytest` in the scratch copy: the copy first on the path
        sys.path[:] = [request["cwd"], *request.get("path", []),
                       *(p for p in sys.path if p and p != request["cwd"])]
        imported = {}
        for name in request.get("modules", []):
            try:
                imported[name] = importlib.import_module(name).__file__
            except Exception as error:  # noqa: BLE001 - reported, not raised
                imported[name] = f"!{type(error).__name__}: {error}"
        os.write(result_fd, json.dumps(imported).encode())
        os.close(result_fd)
        import pytest

        sys.argv = ["pytest", *request["args"]]
        code = int(pytest.main(list(request["args"])))
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:  # noqa: BLE001 - the traceback goes to the run's log
        import traceback

        traceback.print_exc()
        code = 3
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve_one(request: dict) -> dict:
    """Fork a child for `request`, wait for it (or kill it at the timeout), report."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        child(request, write_fd)
    os.close(write_fd)
    deadline = time.monotonic() + float(request.get("timeout", 300))
    status, timed_out = None, False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            timed_out = True
            for kill in (lambda: os.killpg(pid, signal.SIGKILL),
                         lambda: os.kill(pid, signal.SIGKILL)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill()
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.02)
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    try:
        imported = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        imported = {}
    exit_code = os.waitstatus_to_exitcode(status)
    return {"exit_code": None if timed_out or exit_code < 0 else exit_code,
            "signal": -exit_code if exit_code < 0 else None,
            "timed_out": timed_out, "imported": imported}


def main(argv: list[str]) -> None:
    preload(set(argv))
    out = sys.stdout
    out.write(json.dumps({"ready": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        out.write(json.dumps(serve_one(json.loads(line))) + "\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
