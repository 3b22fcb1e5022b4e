"""Stop strings over streamed text: where the text ends, and what may be sent yet.

The loop hands over one token at a time, and a token's text can complete a stop string that
began tokens earlier, or end in the first characters of one that may or may not follow. So
`StopText` keeps every character that could still be the start of a stop string back from the
stream until the next piece decides it, and when a stop completes it cuts the text at the
stop's first character: the stop and everything after it are never sent. Joined, what
`push` and `finish` release is exactly `text`, streamed or not.
"""

from __future__ import annotations


class StopText:
    """`push(piece) -> str` releases the text that can no longer be part of a stop string;
    `hit` turns True once a stop string completes (the caller then ends the run); `finish()`
    releases what was held back when the run ends without a stop. `text` is the whole
    answer: everything before the first stop string."""

    def __init__(self, stops: tuple[str, ...] = ()) -> None:
        self.stops = tuple(stops)
        self._longest = max((len(s) for s in self.stops), default=0)
        self._text = ""    # everything pushed, cut at the stop once it is hit
        self._sent = 0     # how many characters of it have been released
        self.hit: str | None = None

    @property
    def text(self) -> str:
        return self._text

    def push(self, piece: str) -> str:
        if self.hit is not None:
            return ""  # the answer ended at the stop: nothing after it belongs to it
        self._text += piece
        if not self.stops:
            return self._release(len(self._text))
        # a stop can only complete in the new piece, so search from where one ending in it
        # could start (an earlier start would already have been found)
        start = max(0, len(self._text) - len(piece) - self._longest + 1)
        found = [(at, stop) for stop in self.stops
                 if (at := self._text.find(stop, start)) >= 0]
        if found:
            at, self.hit = min(found)
            return self._cut(at)
        return self._release(len(self._text) - self._held())

    def finish(self) -> str:
        """The run ended (budget, EOS, context): what was held back is text after all."""
        return self._release(len(self._text))

    def _cut(self, at: int) -> str:
        self._text = self._text[:at]
        return self._release(at)

    def _held(self) -> int:
        """The longest tail of the text that is the beginning of some stop string."""
        for size in range(min(self._longest - 1, len(self._text)), 0, -1):
            tail = self._text[-size:]
            if any(stop.startswith(tail) for stop in self.stops):
                return size
        return 0

    def _release(self, upto: int) -> str:
        upto = max(upto, self._sent)
        out = self._text[self._sent:upto]
        self._sent = upto
        return out
