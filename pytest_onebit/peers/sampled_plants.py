"""Planted sampled faults for the served S1 (tests/peers/test_served_sampled.py): onebit serve
on the fabricated `ServedToy` with a real drafter whose `q` overlaps the target's `p`, decoded
by onebit's speculative loop with one thing wrong, each the shape of a bug found upstream.

The drafter (`TwinDrafter`) is a twin of the served model (another instance of the same
fabricated Qwen3) and drafts by sampling its own logits, as a draft model does:

- `perfect`: the twin's logits as they are (q = p): every draft is accepted when the loop is
  right, so a fault in how the draft was drawn shows whole;
- `swapped`: the twin's two likeliest tokens trade places (q on p's top two, ranked the other
  way), so drafts are accepted with a fractional probability and rejections reach the
  residual.

Its logits carry a constant offset (`OFFSET`): softmax does not see a shift, but a bfloat16
cast does. The toy's logits sit within 2 of 0, where bfloat16 rounds by 1/128; a real model's
sit tens of units out, where it rounds by 1/8 to 1/4. The offset puts the twin's there.

The faults (`PLANTS`):

- (a) `accept-if-equal`: a draft accepted when it equals a token sampled from p, the residual
  drawn otherwise (mlx-swift-lm #459: the acceptance probability becomes sum p q, biased to the
  modes both agree on); a loop copy.
- (b) `draft-ignores-temperature`: the draft drawn at temperature 1, judged by the rejection
  test as drawn at the request's temperature (z-lab/dflash #74); a drafter fault.
- (c) `residual-unnormalised`: the residual max(0, p - q) drawn by inverse CDF without dividing
  by its total, a draw past the total clamped to the last candidate of p's top-k; a loop copy.
- (d) `draft-low-precision`: the draft drawn from a softmax computed in bfloat16 while the
  rejection test uses the float64 q (DeepSpec #31); a drafter fault.

Nothing here is reachable from `onebit serve`: a planted server exists only where a test
builds one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onebit.heads.choose import choose
from onebit.protocols import Drafts
from onebit.sampling import Sampling, is_greedy, warp
from onebit.serve.engine import Engine
from pytest_onebit.peers.openai_plants import loop_copy

#: the twin's logits offset: where a real model's logits sit, and bfloat16 rounds them by 1/4
OFFSET = 40.0
#: drafts a round: the second token of an answer is the first judged draft (S1 reads two)
K = 2


def bfloat16(x: np.ndarray) -> np.ndarray:
    """`x` rounded to bfloat16 (float32's top 16 bits, round to nearest even), back in float64:
    what a tensor in that dtype holds."""
    bits = np.asarray(x, np.float32).copy().view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) \
        & np.uint32(0xFFFF0000)
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def draw_right(row: np.ndarray, sampling: Sampling, rng) -> tuple[int, np.ndarray]:
    """onebit's own draw (`onebit.heads.choose`): the token from exactly the q returned."""
    return choose(row, sampling, rng)


def draw_at_temperature_one(row: np.ndarray, sampling: Sampling, rng) -> tuple[int, np.ndarray]:
    """(b) The draft drawn with the temperature left out; q as the rejection test expects."""
    plain = Sampling(1.0, sampling.top_k, sampling.top_p)
    return int(rng.choice(warp(row, plain))), warp(row, sampling)


def draw_in_bfloat16(row: np.ndarray, sampling: Sampling, rng) -> tuple[int, np.ndarray]:
    """(d) The draft drawn from logits, temperature and softmax in bfloat16 (the model's native
    dtype), q computed in float64 for the rejection test."""
    q = warp(row, sampling)
    kept = np.flatnonzero(q)
    scaled = bfloat16(bfloat16(row[kept]) / np.float32(sampling.temperature))
    weights = bfloat16(np.exp(scaled - scaled.max()))
    low = np.zeros_like(q)
    low[kept] = weights / weights.sum()
    return int(rng.choice(low)), q


class TwinDrafter:
    """A one-pass draft head: a twin of the served toy that drafts K tokens a round by
    sampling its own logits (`perfect` or `swapped`, plus OFFSET) through `draw`, and
    returns them with their q rows. Greedy, it drafts the argmax as a bare list."""

    def __init__(self, kind: str, draw: Callable = draw_right, k: int = K) -> None:
        from pytest_onebit.serve.toy import load_toy_model

        if kind not in ("perfect", "swapped"):
            raise ValueError(f"TwinDrafter kind must be 'perfect' or 'swapped', got {kind!r}")
        self.kind, self.draw, self.k = kind, draw, k
        self.twin = load_toy_model()
        self.sampling: Sampling | None = None
        self.rng = None
        self.committed: list[int] = []

    def needs_last_hidden(self) -> bool:
        return False

    def use_sampling(self, sampling, rng) -> None:
        self.sampling, self.rng = sampling, rng

    def reset(self) -> None:
        self.twin.reset()
        self.committed = []

    def commit_rows(self, tokens, rows, count: int) -> None:
        """The twin steps what the target committed, in chunks its verify takes."""
        new = [int(t) for t in tokens[:count]]
        width = self.twin.max_batch_rows()
        for at in range(0, len(new), width):
            chunk = new[at:at + width]
            self.twin.verify(chunk, len(self.committed))
            self.twin.commit_verify(len(chunk))
            self.committed.extend(chunk)

    def logits(self, pending: list[int]) -> np.ndarray:
        """The twin's logits after the committed text and `pending`, shaped by `kind`; the
        twin is left at the committed text."""
        row = np.asarray(self.twin.verify(pending, len(self.committed))[-1], np.float64)
        self.twin.commit_verify(0)
        if self.kind == "swapped":
            first, second = np.lexsort((np.arange(row.size), -row))[:2]
            row[[first, second]] = row[[second, first]]
        return row + OFFSET

    def propose(self, token: int, pos: int, k: int, hidden):
        pending = [int(token)]  # t1 is not committed yet in a one-pass round
        drafts, rows = [], []
        for _ in range(min(k, self.k)):
            row = self.logits(pending + drafts)
            if is_greedy(self.sampling) or self.rng is None:
                drafts.append(int(np.argmax(row)))
                continue
            draft, q = self.draw(row, self.sampling, self.rng)
            drafts.append(int(draft))
            rows.append(q)
        if not rows:
            return drafts
        return Drafts(drafts, np.stack(rows))


class DrafterEngine(Engine):
    """onebit serve's engine drafting with a head object (`drafter`), named `name` in each
    answer's `onebit` field (a head object is not JSON). One request at a time: every request
    drafts, `speculative: false` included, so the plain reference is a server of its own."""

    def __init__(self, model, drafter, name: str, **options) -> None:
        super().__init__(model, head=drafter, k=drafter.k, **options)
        self.drafter_name = name

    def _answer(self, params, on_text, on_logprobs, cancelled):
        done = super()._answer(params, on_text, on_logprobs, cancelled)
        done.stats["head"] = self.drafter_name
        return done


#: (a) accepted when equal to a token drawn from p; the residual drawn on a mismatch
ACCEPT_IF_EQUAL = ("if rng.accept(min(1.0, p[draft] / q[draft])):",
                   "if int(rng.choice(p)) == draft:")
#: (c) the residual drawn by inverse CDF over p's top-k (likeliest first), never divided by
#: its total: the mass past the total falls on the last candidate
RESIDUAL_UNNORMALISED = (
    "    return rng.choice(residual / total if total > 0 else p)",
    "    order = np.lexsort((np.arange(p.size), -p))[: int(np.count_nonzero(p))]\n"
    "    drawn = int(rng.choice(np.append(residual[order], max(0.0, 1.0 - total))))\n"
    "    return int(order[min(drawn, order.size - 1)])")


@dataclass(frozen=True)
class Plant:
    """One planted server: the drafter's kind and draw, the loop's edit (None: onebit's), and
    the upstream bug it has the shape of."""

    kind: str
    draw: Callable = draw_right
    edit: tuple[str, str] | None = None
    shape: str = ""

    def engine(self, name: str) -> Engine:
        from pytest_onebit.serve.toy import ServedToy

        run = loop_copy(name, *self.edit) if self.edit is not None else None
        return DrafterEngine(ServedToy(), TwinDrafter(self.kind, self.draw), name, run=run)


PLANTS = {
    "accept-if-equal": Plant("swapped", edit=ACCEPT_IF_EQUAL, shape="mlx-swift-lm #459"),
    "draft-ignores-temperature": Plant("perfect", draw_at_temperature_one,
                                       shape="z-lab/dflash #74"),
    "residual-unnormalised": Plant("swapped", edit=RESIDUAL_UNNORMALISED,
                                   shape="a residual max(0, p - q) not renormalised"),
    "draft-low-precision": Plant("perfect", draw_in_bfloat16, shape="DeepSpec #31"),
}
#: the same servers with nothing planted: S1 must pass them
CLEAN = {"clean-swapped": Plant("swapped"), "clean-perfect": Plant("perfect")}


def plain_engine() -> Engine:
    """The plain reference: onebit serve on a ServedToy of its own, no head."""
    from pytest_onebit.serve.toy import ServedToy

    return Engine(ServedToy(), head="none")
