"""Serving the app with uvicorn: in the foreground (`onebit serve`), or in a thread on a free
loopback port (tests, and anything that wants a real server for a while)."""

from __future__ import annotations

import socket
import threading
import time

LOOPBACK = "127.0.0.1"


def _config(app, host: str, port: int, log_level: str):
    import uvicorn

    # one worker process: the engine holds the model and its lock in this process
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, workers=1,
                          access_log=log_level in ("info", "debug"))


def serve(app, *, host: str = LOOPBACK, port: int = 8000, log_level: str = "info") -> None:
    """Serve until interrupted (uvicorn handles SIGINT / SIGTERM)."""
    import uvicorn

    uvicorn.Server(_config(app, host, port, log_level)).run()


class ServerThread:
    """`with ServerThread(app) as server:` serves `app` on `server.url` (a free port on
    127.0.0.1) in a daemon thread, and stops it on leaving, whatever happened inside."""

    def __init__(self, app, *, host: str = LOOPBACK, startup_timeout: float = 30.0) -> None:
        import uvicorn

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, 0))
        self.host, self.port = self._socket.getsockname()[:2]
        self.url = f"http://{self.host}:{self.port}"
        self._server = uvicorn.Server(_config(app, self.host, self.port, "warning"))
        self._server.install_signal_handlers = lambda: None  # not the main thread's to take
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._socket]}, daemon=True,
                                        name=f"onebit-serve-{self.port}")
        self._timeout = startup_timeout

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + self._timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self._socket.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
