"""The perfect head for a known set of prompts: it proposes the target's own greedy text.

No one deploys it: it is the ceiling a real head is measured against (every draft accepted,
so a run costs exactly the pass law's passes), for the k sweep and the acceptance tool. The
truth is computed by whoever builds the head (the tools run the target greedily once per
prompt, up front) and handed in, so the head needs nothing but the texts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


class GreedyOracleHead:
    """A one-pass `DraftHead` that proposes, after t1 at `pos`, the true tokens at
    `pos + 1 .. pos + k` of whichever known text the committed tokens are a prefix of."""

    def __init__(self, texts: Mapping[tuple[int, ...], Sequence[int]]) -> None:
        # prompt -> prompt + its greedy continuation
        self._texts = {tuple(p): tuple(p) + tuple(rest) for p, rest in texts.items()}
        self._committed: list[int] = []
        self._text: tuple[int, ...] | None = None

    def needs_last_hidden(self) -> bool:
        return False

    def reset(self) -> None:
        self._committed = []
        self._text = None

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        self._committed.extend(int(t) for t in tokens[:count])

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None) -> list[int]:
        text = self._text or self._find()
        return list(text[pos + 1 : pos + 1 + k]) if text else []

    def _find(self) -> tuple[int, ...] | None:
        """The known text whose prompt starts the committed tokens (the longest such)."""
        seen = tuple(self._committed)
        matches = [t for p, t in self._texts.items() if seen[: len(p)] == p]
        self._text = max(matches, key=len) if matches else None
        return self._text
