"""Sampling: the warp from logits to probabilities, and the one seam all randomness goes through.

`Sampling(temperature, top_k, top_p)` says how to sample; `warp(logits, sampling)` turns one row
of scores into float64 probabilities (temperature, then top-k, then top-p, ties broken by token
id). Every random decision of a sampled run (the loop's accept / reject, its residual and bonus
draws, a sampling head's drafts) is one call on an rng object with two methods:

    rng.accept(prob) -> bool      # True with probability `prob`
    rng.choice(probs) -> int      # an index drawn from the distribution `probs`

The default, `SeededRng`, is a seeded numpy Generator, so a seeded run replays exactly. The
conformance harness swaps in an rng that answers from a script and enumerates every branch,
which is how a sampled loop is proved to keep the target's distribution exactly
(docs/sampling.md).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

# How far a distribution handed to `SeededRng.choice` may sum from 1 (float64 rounding of a
# softmax over a large vocabulary stays far inside this). A power of two (about 9.3e-10), so a
# row that is off by exactly the tolerance exists in float64 and the boundary can be tested.
SUM_TOLERANCE = 2.0**-30


@dataclass(frozen=True)
class Sampling:
    """How to sample the next token. `temperature=0` is greedy (argmax, ties to the lowest id);
    `top_k=0` keeps every token; `top_p=1.0` keeps every token."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
            raise ValueError(f"Sampling.temperature must be a finite number >= 0, got {t!r}")
        if isinstance(self.top_k, bool):
            raise ValueError(f"Sampling.top_k must be an integer >= 0, got {self.top_k!r}")
        try:
            top_k = operator.index(self.top_k)
        except TypeError:
            raise ValueError(
                f"Sampling.top_k must be an integer >= 0, got {self.top_k!r}") from None
        if top_k < 0:
            raise ValueError(f"Sampling.top_k must be an integer >= 0, got {self.top_k!r}")
        p = self.top_p
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
            raise ValueError(f"Sampling.top_p must be in (0, 1], got {p!r}")
        object.__setattr__(self, "temperature", float(t))
        object.__setattr__(self, "top_k", top_k)
        object.__setattr__(self, "top_p", float(p))

    @property
    def greedy(self) -> bool:
        """True when this is plain argmax (temperature 0)."""
        return self.temperature == 0.0


def is_greedy(sampling: Sampling | None) -> bool:
    """None and temperature 0 both mean greedy decoding."""
    return sampling is None or sampling.greedy


def warp(logits: np.ndarray, sampling: Sampling | None) -> np.ndarray:
    """Probabilities (float64, summing to 1) of sampling one token from `logits`.

    Order: divide by the temperature, keep the `top_k` highest, softmax, then keep the smallest
    set of the most likely tokens whose probability reaches `top_p`, and renormalise. Equal
    scores are ranked by token id (the lower id first), so the kept set is never ambiguous.
    Greedy (`None` or temperature 0) is one-hot at the argmax."""
    row = np.asarray(logits, dtype=np.float64)
    if row.ndim != 1 or row.size == 0:
        raise ValueError(f"warp needs one non-empty row of logits, got shape {row.shape}")
    if not np.isfinite(row).all():
        bad = int(np.flatnonzero(~np.isfinite(row))[0])
        raise ValueError(f"warp got a non-finite logit at token {bad}: {row[bad]}")
    out = np.zeros(row.size)
    if is_greedy(sampling):
        out[int(np.argmax(row))] = 1.0
        return out
    assert sampling is not None
    order = np.lexsort((np.arange(row.size), -row))  # highest first, ties by the lower id
    keep = order[: sampling.top_k] if sampling.top_k else order
    # Shift by the best score before dividing: every exponent is <= 0, so a small temperature
    # underflows to 0 instead of overflowing to inf.
    with np.errstate(over="ignore", under="ignore"):
        weights = np.exp((row[keep] - row[keep[0]]) / sampling.temperature)
    probs = weights / weights.sum()
    if sampling.top_p < 1.0:
        # searchsorted's default side ("left") finds the first token whose running mass
        # reaches top_p: that token is the last one kept.
        reach = int(np.searchsorted(np.cumsum(probs), sampling.top_p)) + 1
        keep, probs = keep[:reach], probs[:reach]
        probs = probs / probs.sum()
    out[keep] = probs
    return out


def check_distribution(probs: np.ndarray, where: str = "choice") -> np.ndarray:
    """`probs` as a float64 row if it is a distribution (finite, >= 0, sums to 1); a ValueError
    naming the first fault otherwise."""
    row = np.asarray(probs, dtype=np.float64)
    if row.ndim != 1 or row.size == 0:
        raise ValueError(f"{where} needs one non-empty row of probabilities, got {row.shape}")
    bad = np.flatnonzero(~np.isfinite(row) | (row < 0))
    if bad.size:
        raise ValueError(f"{where} got probability {row[bad[0]]} at index {int(bad[0])}")
    total = float(row.sum())
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"{where} got probabilities summing to {total!r}, not 1")
    return row


def check_prob(prob: float, where: str = "accept") -> float:
    """`prob` as a float if it lies in [0, 1]; a ValueError otherwise (NaN included)."""
    value = float(prob)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{where} got probability {value!r}; it must lie in [0, 1]")
    return value


@runtime_checkable
class Rng(Protocol):
    """The one source of randomness of a sampled run (the loop's and the heads')."""

    def accept(self, prob: float) -> bool:
        """True with probability `prob` (in [0, 1])."""
        ...

    def choice(self, probs: np.ndarray) -> int:
        """An index drawn from `probs` (a distribution); never an index of probability 0."""
        ...


class SeededRng:
    """The default rng: a numpy Generator seeded with `seed`, so a run replays exactly. With
    `seed=None` a fresh seed is drawn from the OS and kept in `.seed` (to replay the run)."""

    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            seed = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
        if isinstance(seed, bool):
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
        try:
            seed = operator.index(seed)
        except TypeError:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}") from None
        if seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed}")
        self.seed = seed
        self.generator = np.random.default_rng(seed)

    def __repr__(self) -> str:
        return f"SeededRng(seed={self.seed})"

    def accept(self, prob: float) -> bool:
        # one Bernoulli draw: prob 0 is never True and prob 1 always, by construction
        return bool(self.generator.binomial(1, check_prob(prob)))

    def choice(self, probs: np.ndarray) -> int:
        # numpy draws from the normalised cumulative sum and never returns an index of
        # probability 0; the row is checked first so the error names this seam
        row = check_distribution(probs)
        return int(self.generator.choice(row.size, p=row))


def make_rng(rng: Rng | None, seed: int | None) -> Rng:
    """The rng a sampled run uses: `rng` if given, else a `SeededRng(seed)`. Passing both is
    ambiguous and rejected."""
    if rng is None:
        return SeededRng(seed)
    if seed is not None:
        raise ValueError(f"pass rng or seed, not both (got rng={rng!r} and seed={seed!r})")
    if not callable(getattr(rng, "accept", None)) or not callable(getattr(rng, "choice", None)):
        raise ValueError(f"rng must have accept(prob) and choice(probs) methods, got {rng!r}")
    return rng


def answer_seeds(seed: int | None, n: int) -> list[int | None]:
    """The seeds of `n` independent answers to one request: answer i draws from `seed + i`,
    a stream of its own, so each answer replays alone (the same request with `seed + i` and
    one answer gives answer i) and none depends on how far another got or on the order the
    answers were decoded in. Without a seed every answer draws a fresh one of its own."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if seed is None:
        return [None] * n
    SeededRng(seed)  # refuses a seed that is not an integer >= 0, naming it
    return [seed + i for i in range(n)]


def one_hot_rows(tokens: list[int], vocab: int) -> np.ndarray:
    """The `q` rows of deterministic drafts: all mass on the drafted token."""
    q = np.zeros((len(tokens), vocab))
    q[np.arange(len(tokens)), tokens] = 1.0
    return q
