"""Draft heads for sampled runs, each with a known relation between its `q` and the target's `p`.

A sampling head keeps a twin of the base (same config, its own instance) and reads the target's
warped distribution `p` for every draft slot by stepping the twin over the committed tokens, t1
and its own earlier drafts. It then draws each draft through the run's rng from a `q` made from
that `p`:

- `same`: q = p; every draft is accepted (min(1, p/q) = 1).
- `disjoint`: uniform where p = 0 (one-hot at p's least likely token if p has no zero);
  nothing is accepted.
- `holes`: p with its most likely token removed: q = 0 where p > 0, which only the residual
  can restore.
- `spread`: (p + uniform) / 2: q > 0 where p = 0, drafts there always rejected.
- `blend`: 0.6 p + 0.4 one-hot at a token that moves with the position: a point mass beside p.
- `mixed`: same / disjoint / holes / spread, by position and slot: all of them in one run.
- `model`: the warped logits of a draft model (0.7 target + 0.3 another toy), drafted through
  `onebit.heads.choose.choose`: a real drafter's q, top-k and top-p included.
- `argmax`: a bare list (one-hot q) of the target's greedy token: deterministic drafts, like
  prompt lookup or an oracle.
- `constant`: a bare list, always token 0: deterministic drafts that are mostly wrong.

Each comes in a one-pass and a two-pass flavour. Under greedy decoding (no `use_sampling`) every
kind drafts the target's argmax as a bare list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from onebit.heads.choose import choose
from onebit.protocols import Drafts
from onebit.sampling import Rng, Sampling, is_greedy, warp
from pytest_onebit.doubles.toy import ToyBase

FLAVOURS = ("one-pass", "two-pass")


def _uniform(where: np.ndarray) -> np.ndarray:
    return where.astype(np.float64) / where.sum()


def q_same(p: np.ndarray, pos: int, slot: int) -> np.ndarray:
    return p.copy()


def q_disjoint(p: np.ndarray, pos: int, slot: int) -> np.ndarray:
    zero = p == 0
    if zero.any():
        return _uniform(zero)
    q = np.zeros_like(p)
    q[int(np.argmin(p))] = 1.0
    return q


def q_holes(p: np.ndarray, pos: int, slot: int) -> np.ndarray:
    q = p.copy()
    q[int(np.argmax(p))] = 0.0
    if q.sum() > 0:
        return q / q.sum()
    return _uniform(p == 0)  # p was one-hot: every token but its own


def q_spread(p: np.ndarray, pos: int, slot: int) -> np.ndarray:
    return 0.5 * p + 0.5 / p.size


def q_blend(p: np.ndarray, pos: int, slot: int) -> np.ndarray:
    q = 0.6 * p
    q[(int(np.argmax(p)) + 1 + pos) % p.size] += 0.4
    return q


def q_mixed(p: np.ndarray, pos: int, slot: int) -> np.ndarray:
    kinds = (q_same, q_disjoint, q_holes, q_spread)
    return kinds[(pos + slot) % len(kinds)](p, pos, slot)


Q_KINDS: dict[str, Callable[[np.ndarray, int, int], np.ndarray]] = {
    "same": q_same, "disjoint": q_disjoint, "holes": q_holes, "spread": q_spread,
    "blend": q_blend, "mixed": q_mixed,
}
DETERMINISTIC = ("argmax", "constant")
KINDS = (*Q_KINDS, "model", *DETERMINISTIC)


class ToySamplingHead:
    """A `DraftHead` (and `SamplingHead`) over a twin of a toy base, drafting by `kind`."""

    def __init__(self, base: ToyBase, kind: str, flavour: str = "one-pass") -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if flavour not in FLAVOURS:
            raise ValueError(f"flavour must be one of {FLAVOURS}, got {flavour!r}")
        config = vars(base.config)
        self.twin = ToyBase(**config)
        self.other = ToyBase(**{**config, "seed": config["seed"] + 101})  # the `model` kind's
        self.kind = kind
        self.flavour = flavour
        self.sampling: Sampling | None = None
        self.rng: Rng | None = None
        self.resets = 0
        self.committed: list[int] = []
        self._memo: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}  # kept across resets

    def __repr__(self) -> str:
        return f"<{self.kind} sampling head, {self.flavour}>"

    def needs_last_hidden(self) -> bool:
        return self.flavour == "two-pass"

    def use_sampling(self, sampling: Sampling, rng: Rng) -> None:
        self.sampling, self.rng = sampling, rng

    def reset(self) -> None:
        self.resets += 1
        self.committed = []

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        self.committed.extend(int(t) for t in tokens[:count])

    def _logits_after(self, model: ToyBase, seq: Sequence[int]) -> np.ndarray:
        """`model`'s scores after stepping `seq` from a reset, memoised per sequence (it is a
        pure function of it): the same answer as stepping, at a fraction of the cost, which is
        what keeps enumerating thousands of runs quick."""
        key = (id(model), tuple(seq))
        if key not in self._memo:
            model.reset()
            for pos, token in enumerate(seq):
                logits = model.step(token, pos)
            self._memo[key] = logits
        return self._memo[key]

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None):
        # t1 (at pos) is committed already in a two-pass round, not yet in a one-pass one
        seq = self.committed if len(self.committed) == pos + 1 else [*self.committed, token]
        drafts: list[int] = []
        rows: list[np.ndarray] = []
        for slot in range(k):
            target = self._logits_after(self.twin, [*seq, *drafts])
            token_q = self._draw(target, [*seq, *drafts], pos + 1 + slot, slot)
            drafts.append(token_q[0])
            rows.append(token_q[1])
        if is_greedy(self.sampling) or self.kind in DETERMINISTIC:
            return drafts
        return Drafts(drafts, np.stack(rows) if rows else np.zeros((0, self.twin.vocab_size)))

    def _draw(
        self, target: np.ndarray, seq: list[int], pos: int, slot: int
    ) -> tuple[int, np.ndarray]:
        """One draft for `pos` and the q it was drawn from."""
        if is_greedy(self.sampling) or self.kind == "argmax":
            return int(np.argmax(target)), warp(target, None)
        if self.kind == "constant":
            return 0, warp(np.arange(target.size, 0, -1.0), None)
        if self.kind == "model":
            mixed = 0.7 * target + 0.3 * self._logits_after(self.other, seq)
            return choose(mixed, self.sampling, self.rng)
        assert self.rng is not None
        q = Q_KINDS[self.kind](warp(target, self.sampling), pos, slot)
        return int(self.rng.choice(q)), q


def sampling_head(base: ToyBase, kind: str, flavour: str = "one-pass") -> ToySamplingHead:
    """A sampling head of `kind` (see the module table) over a twin of `base`."""
    return ToySamplingHead(base, kind, flavour)


class MemoToyBase(ToyBase):
    """A `ToyBase` that remembers the hidden row and the logits of every state it has shown.
    Both are pure functions of the state, so it answers exactly as a `ToyBase` does (same
    floats, same counters); it only spares the recomputation when a distribution is enumerated
    by replaying thousands of runs that share their prefixes."""

    def hidden_of(self, state: int) -> np.ndarray:
        memo = self.__dict__.setdefault("_hidden_memo", {})
        if state not in memo:
            memo[state] = super().hidden_of(state)
            memo[state].setflags(write=False)
        return memo[state]

    def logits_of(self, hidden: np.ndarray) -> np.ndarray:
        memo = self.__dict__.setdefault("_logits_memo", {})
        entry = memo.get(id(hidden))
        if entry is None or entry[0] is not hidden:  # only rows this memo handed out
            logits = super().logits_of(hidden)
            if not hidden.flags.writeable:
                memo[id(hidden)] = (hidden, logits)
            return logits.copy()
        return entry[1].copy()
