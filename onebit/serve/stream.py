"""A streamed answer's text on its way from the decode thread to the event loop.

Each Server-Sent Event costs a write to the client's socket, and on a small box that write is
most of what streaming costs: profiled on two cores, a loopback `send` took about 0.2 ms of a
5 ms token, and the cores it runs on are the ones the forward's threads need. So the pieces a
decode produces are handed over at most once per `interval` seconds: the first piece goes at
once (the time to the first token is the decode's), later ones that come within the interval
of the last hand-over wait for it and go together, in order, as one event. A piece never
waits longer than the interval; the end of the answer (or its error) goes at once, after
every piece. `interval=0` hands over every piece as it comes (an event a piece, as long as the
event loop keeps up).
"""

from __future__ import annotations

import asyncio
import threading
import time

#: the default least time between two events of a streamed answer, in seconds: 50 events a
#: second at most, below what a reader sees, and a few tokens an event at this CPU's speed
STREAM_INTERVAL = 0.02


class PieceChannel:
    """`put` / `end` from one decode thread; `await get()` in the event loop, which returns
    (the text of every piece since the last get, joined; the extras put with them, in order;
    the end or None). The end is ("done", value) or ("error", exception), given once,
    after the last piece."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float) -> None:
        self._extras: list = []  # what goes with the pieces (their logprob entries), in order
        if interval < 0:
            raise ValueError(f"the stream interval is {interval} s; it must be >= 0")
        self.loop = loop
        self.interval = interval
        self._lock = threading.Lock()
        self._pieces: list[str] = []
        self._end: tuple[str, object] | None = None
        self._woken = asyncio.Event()  # touched in the event loop only
        self._scheduled = False  # a wake-up is on its way (at once, or at the interval's end)
        self._last = -float("inf")  # when the event loop last took the pieces

    # the decode thread's side

    def put(self, piece: str, extras=()) -> None:
        """A piece of text, and what goes with it (its logprob entries), handed over
        together."""
        with self._lock:
            self._pieces.append(piece)
            self._extras.extend(extras)
            if self._scheduled:
                return
            self._scheduled = True
            delay = self._last + self.interval - time.monotonic()
        if delay <= 0:
            self.loop.call_soon_threadsafe(self._wake)
        else:  # one wake-up for every piece until then, not one each
            self.loop.call_soon_threadsafe(self.loop.call_later, delay, self._wake)

    def end(self, kind: str, value: object) -> None:
        with self._lock:
            self._end = (kind, value)
            self._scheduled = True
        self.loop.call_soon_threadsafe(self._wake)  # at once, even when a timer is pending

    # the event loop's side

    def _wake(self) -> None:
        self._woken.set()

    async def get(self) -> tuple[str, list, tuple[str, object] | None]:
        await self._woken.wait()
        self._woken.clear()
        with self._lock:
            text = "".join(self._pieces)
            self._pieces.clear()
            extras, self._extras = self._extras, []
            end = self._end
            self._scheduled = False
            self._last = time.monotonic()
        return text, extras, end
