"""A server binary started for a peer run, and always stopped again.

`find_server()` looks for llama.cpp's `llama-server`: the path given, then
`$ONEBIT_LLAMA_SERVER`, then `llama-server` beside the running Python (a package installed in
the same environment that ships the binary), then on `PATH`. `ServerProcess(argv)` starts a
binary on a free 127.0.0.1 port in a process group of its own, waits until its health path
answers 200, and stops the whole group on `stop()`, on leaving a `with` block (a failed
check, an exception, Ctrl-C), at interpreter exit, and, on Linux, when the process that
started it dies (the kernel's parent-death signal). A server that exits or never becomes
healthy is `ServerFailed` with the last lines it printed; nothing is left running.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

SERVER_ENV = "ONEBIT_LLAMA_SERVER"
SERVER_NAME = "llama-server"
_LIVE: set[ServerProcess] = set()


class ServerFailed(RuntimeError):
    """The server could not be started, or stopped answering before it was ready."""


def find_server(explicit: str | Path | None = None) -> Path | None:
    """The llama-server binary to run (see the module docstring), or None. A path that was
    named but is not an executable file is `ServerFailed` naming it, not a silent fallback."""
    named = [(explicit, "--server-bin"), (os.environ.get(SERVER_ENV), f"${SERVER_ENV}")]
    for value, where in named:
        if value:
            path = Path(value).expanduser()
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise ServerFailed(f"{where} names {str(path)!r}, which is not an executable "
                                   f"file")
            return path.resolve()
    beside = Path(sys.executable).parent / SERVER_NAME
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(SERVER_NAME)
    return Path(found) if found else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: its own process group, and (Linux) SIGTERM when the
    process that started it dies, so a killed peer run leaves no server behind."""
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class ServerProcess:
    """One server: `argv` plus `--host 127.0.0.1 --port PORT`, started by `start()` or
    `with`. `url` is its root; `log()` what it printed."""

    def __init__(self, argv: Sequence[str], *, name: str = "server", health: str = "/health",
                 ready_timeout: float = 120.0) -> None:
        self.argv = [str(a) for a in argv]
        self.name = name
        self.health = health
        self.ready_timeout = ready_timeout
        self.port = 0
        self.process: subprocess.Popen | None = None
        # the child writes through this handle; log() reads through a handle of its own, so
        # reading never moves the child's write offset; it lives as long as this object
        self._log = tempfile.NamedTemporaryFile(prefix="onebit-server-", suffix=".log")  # noqa: SIM115

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self, lines: int = 20) -> str:
        with open(self._log.name, "rb") as f:
            text = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(text[-lines:])

    def start(self) -> ServerProcess:
        self.port = free_port()
        argv = [*self.argv, "--host", "127.0.0.1", "--port", str(self.port)]
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                            stderr=subprocess.STDOUT,
                                            preexec_fn=_die_with_parent)
        except OSError as error:
            raise ServerFailed(f"{self.name}: cannot run {argv[0]}: {error}") from None
        _LIVE.add(self)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerFailed(f"{self.name} exited with status {code} before it was "
                                   f"ready; it printed:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + self.health, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # not listening yet, or 503 while the model loads
            if time.monotonic() > deadline:
                raise ServerFailed(f"{self.name} was not ready after {self.ready_timeout:.0f} "
                                   f"s; it printed:\n{self.log()}")
            time.sleep(0.1)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after `grace` seconds."""
        process, self.process = self.process, None
        _LIVE.discard(self)
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.returncode = process.returncode

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop(grace=2.0)
