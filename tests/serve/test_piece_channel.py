"""The streamed text's hand-over from a decode thread to the event loop (`PieceChannel`): every
piece arrives, in order, before the end; the first at once, later ones joined at most once an
interval, none held past it."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from onebit.serve.stream import PieceChannel


def _drain(interval: float, produce) -> list[tuple[float, str, object]]:
    """Run `produce(channel)` in a thread; return (seconds since start, text, end) per get."""

    async def main():
        channel = PieceChannel(asyncio.get_running_loop(), interval)
        start = time.monotonic()
        threading.Thread(target=produce, args=(channel,), daemon=True).start()
        got, end = [], None
        while end is None:
            text, _, end = await asyncio.wait_for(channel.get(), timeout=30)
            got.append((time.monotonic() - start, text, end))
        return got

    return asyncio.run(main())


@pytest.mark.parametrize("interval", [0.0, 0.01, 0.05])
def test_every_piece_arrives_in_order_before_the_end(interval):
    """Whatever the interval, the joined text is every piece in the order put, and the end
    comes once, in the last get, after all of them."""
    pieces = [f"<{i}>" for i in range(300)]

    def produce(channel):
        for i, piece in enumerate(pieces):
            channel.put(piece)
            if i % 7 == 0:
                time.sleep(0.001)
        channel.end("done", 42)

    got = _drain(interval, produce)
    assert "".join(text for _, text, _ in got) == "".join(pieces)
    assert [end for _, _, end in got if end is not None] == [("done", 42)]


def test_the_first_piece_goes_at_once_and_later_ones_are_joined():
    """With a long interval the first piece is not held; pieces put within the interval after
    it come together in one get, at about the interval's end."""
    def produce(channel):
        channel.put("a")
        time.sleep(0.2)
        for piece in "bcdef":
            channel.put(piece)
        time.sleep(2.3)
        channel.end("done", None)

    got = _drain(1.0, produce)
    assert got[0][1] == "a" and got[0][0] < 0.5  # not held for the 1 s interval
    assert got[1][1] == "bcdef"  # five puts, one hand-over
    assert 0.9 <= got[1][0] < 2.2  # held to the interval's end, not to the answer's


def test_the_end_is_not_held_behind_the_interval():
    """An answer that ends while its last pieces wait for the interval sends them and the end
    at once: the client is not kept waiting for a timer."""
    def produce(channel):
        channel.put("a")
        channel.put("b")  # held: within the interval of "a"
        time.sleep(0.05)
        channel.end("error", ValueError("x"))

    got = _drain(10.0, produce)
    assert "".join(text for _, text, _ in got) == "ab"
    assert got[-1][2][0] == "error" and got[-1][0] < 5.0


def test_a_negative_interval_is_refused():
    """A negative interval is a ValueError naming it, before any stream opens."""
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(ValueError, match="-1"):
            PieceChannel(loop, -1)
    finally:
        loop.close()
