"""A pool of threads that takes the most urgent waiting task first.

The runner puts every mutant run of every catalogue in at once, and a catalogue's baseline
only once that catalogue's mutants are done (runner.py says why). In a first-in first-out
pool that baseline would wait behind every other catalogue's mutants, and no report could be
printed until the very end. Here it waits only for the runs already started: a lower
`priority` goes first, and equal priorities go in the order they were submitted.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_STOP = float("inf")  # a worker's last item sorts after every task


class PriorityPool:
    """`workers` threads running submitted calls by priority; use it as a context manager.
    Leaving the context waits for what was submitted (cancel futures to skip them)."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._tasks: queue.PriorityQueue = queue.PriorityQueue()
        self._order = itertools.count()  # ties in priority: first submitted, first run
        self._closed = False
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._work, daemon=True,
                                          name=f"onebit-mutants-{n}") for n in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, priority: float = 1) -> Future:
        """Run `fn(*args)` on a worker when no task of lower priority waits; RuntimeError
        once the pool is closed."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is closed: no new tasks")
            self._tasks.put((priority, next(self._order), future, fn, args))
        return future

    def _work(self) -> None:
        while True:
            priority, _, future, fn, args = self._tasks.get()
            if priority == _STOP:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as error:  # the future carries it to whoever waits
                future.set_exception(error)
            else:
                future.set_result(result)

    def close(self) -> None:
        """Take no new task, let the workers finish the queued ones, and wait for them."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for _ in self._threads:
                self._tasks.put((_STOP, next(self._order), None, None, ()))
        for thread in self._threads:
            thread.join()

    def __enter__(self) -> PriorityPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
