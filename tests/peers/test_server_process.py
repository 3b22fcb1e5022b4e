"""Starting and stopping a server for a peer run (pytest_onebit/peers/server_process.py), with
real processes: a small HTTP server written here stands in for llama-server's lifecycle (the
real binary's run is in test_llama_server_peer.py, where one is present). Whatever happens, a
started server and the processes it started are gone afterwards; a server that exits or never
answers is a `ServerFailed` carrying what it printed."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from pytest_onebit.peers.server_process import (
    SERVER_ENV,
    ServerFailed,
    ServerProcess,
    find_server,
)

# A server that takes llama-server's --host / --port, answers /health, writes its pid and its
# own child's pid (a grandchild of the test) where it is told, then serves until stopped.
SERVER = textwrap.dedent("""\
    import http.server, subprocess, sys
    port = int(sys.argv[sys.argv.index("--port") + 1])
    pids = sys.argv[1]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(pids, "w") as f:
        f.write(f"{__import__('os').getpid()} {child.pid}")
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass
    print("listening", flush=True)
    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
    """)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0) until its parent reaps it: read its state
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def gone(*pids: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def server_argv(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    pids = tmp_path / "pids"
    return [sys.executable, str(script), str(pids)], pids


def test_started_server_answers_and_is_gone_with_its_children_after_stop(server_argv):
    """start() returns once /health answers 200; stop() ends the server and the process it
    started (the whole process group)."""
    argv, pids = server_argv
    server = ServerProcess(argv, name="toy").start()
    try:
        with urllib.request.urlopen(server.url + "/health", timeout=5) as answer:
            assert answer.status == 200
        assert "listening" in server.log()
        pid, child = map(int, pids.read_text().split())
        assert alive(pid) and alive(child)
    finally:
        server.stop()
    assert gone(pid, child)
    assert not server.running()


def test_a_failure_inside_the_with_block_still_stops_the_server(server_argv):
    """An exception in the body of `with ServerProcess(...)` (a check that raised, Ctrl-C's
    KeyboardInterrupt) leaves nothing running."""
    argv, pids = server_argv
    with pytest.raises(KeyboardInterrupt), ServerProcess(argv, name="toy"):
        raise KeyboardInterrupt
    assert gone(*map(int, pids.read_text().split()))


def test_a_server_that_exits_is_refused_with_what_it_printed(tmp_path):
    """A binary that exits before it is ready (a bad flag, a model it cannot load) is
    ServerFailed naming its exit status and the lines it printed."""
    argv = [sys.executable, "-c", "import sys; print('error: unknown argument --bogus'); "
            "sys.exit(3)"]
    with pytest.raises(ServerFailed, match=r"(?s)exited with status 3.*unknown argument"):
        ServerProcess(argv, name="toy").start()


def test_a_server_that_never_answers_is_stopped_after_the_timeout(tmp_path):
    """A binary that runs but never answers /health is ServerFailed after ready_timeout,
    and it is stopped."""
    marker = tmp_path / "pid"
    argv = [sys.executable, "-c", f"import os, time; open({str(marker)!r}, 'w')"
            f".write(str(os.getpid())); time.sleep(600)"]
    with pytest.raises(ServerFailed, match="not ready after 1 s"):
        ServerProcess(argv, name="toy", ready_timeout=1.0).start()
    assert gone(int(marker.read_text()))


def test_a_server_that_ignores_sigterm_is_killed(tmp_path):
    """stop() sends SIGTERM, then SIGKILL after the grace period."""
    script = tmp_path / "stubborn.py"
    script.write_text(SERVER.replace("import http.server, subprocess, sys",
                                     "import http.server, signal, subprocess, sys\n"
                                     "signal.signal(signal.SIGTERM, signal.SIG_IGN)"))
    server = ServerProcess([sys.executable, str(script), str(tmp_path / "pids")]).start()
    pid = server.process.pid
    server.stop(grace=0.5)
    assert gone(pid)
    assert server.returncode == -signal.SIGKILL


def test_find_server_order(tmp_path, monkeypatch):
    """--server-bin first, then $ONEBIT_LLAMA_SERVER, then llama-server on PATH; a named path
    that is not an executable file is refused by name, not skipped."""
    def executable(name: str) -> Path:
        path = tmp_path / name / "llama-server"
        path.parent.mkdir()
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return path

    on_path, in_env, named = executable("path"), executable("env"), executable("named")
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.delenv(SERVER_ENV, raising=False)
    beside = Path(sys.executable).parent / "llama-server"
    if beside.exists():
        pytest.skip(f"{beside} exists here: it would be found before PATH")
    assert find_server() == on_path
    monkeypatch.setenv(SERVER_ENV, str(in_env))
    assert find_server() == in_env
    assert find_server(str(named)) == named
    with pytest.raises(ServerFailed, match="--server-bin names .*not an executable"):
        find_server(str(tmp_path / "missing"))
    monkeypatch.setenv(SERVER_ENV, str(tmp_path))
    with pytest.raises(ServerFailed, match=r"\$ONEBIT_LLAMA_SERVER names"):
        find_server()
    monkeypatch.delenv(SERVER_ENV)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert find_server() is None
