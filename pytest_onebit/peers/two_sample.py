"""A two-sample test of two samplers' output distributions, with its sample size derived from
the power it must have (the served peer has no exact distribution to hold one sample to, as
`stats.py` does: it has the same server's plain sampling).

n outputs of each engine give empirical distributions P_n and Q_n over m outcomes; the
statistic is D = TV(P_n, Q_n).

- Under the null (both sample from P): D <= TV(P_n, P) + TV(Q_n, P), and each has mean at
  most sqrt(m / n) / 2 (Cauchy-Schwarz), so E D <= sqrt(m / n).
- One of the 2n outputs moves D by at most 1 / n, so McDiarmid bounds each tail:
  P(D - E D >= t) <= exp(-2 t^2 / (2n / n^2)) = exp(-n t^2).

Reject when D > tau = sqrt(m / n) + sqrt(ln(1 / alpha) / n): a false alarm has probability
at most alpha. If TV(P, Q) >= delta, then E D >= delta - sqrt(m / n), and D <= tau has
probability at most beta once delta >= 2 sqrt(m / n) + sqrt(ln(1 / alpha) / n) +
sqrt(ln(1 / beta) / n); solving for n gives the sample size. Both rates hold for every n.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TwoSamplePower:
    """Detects a total-variation distance `delta` with probability >= 1 - `beta`, false alarms
    at most `alpha`, over at most `outcomes` outcomes, with `samples` outputs per side."""

    delta: float
    alpha: float
    beta: float
    outcomes: int

    def __post_init__(self) -> None:
        for name in ("delta", "alpha", "beta"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise ValueError(f"TwoSamplePower.{name} must be in (0, 1), got {value!r}")
        if self.outcomes < 1:
            raise ValueError(f"TwoSamplePower.outcomes must be >= 1, got {self.outcomes}")

    @property
    def samples(self) -> int:
        root = (2 * math.sqrt(self.outcomes) + math.sqrt(math.log(1 / self.alpha))
                + math.sqrt(math.log(1 / self.beta))) / self.delta
        return math.ceil(root * root)

    def threshold(self, n: int) -> float:
        return math.sqrt(self.outcomes / n) + math.sqrt(math.log(1 / self.alpha) / n)

    def describe(self) -> str:
        return (f"detects a total-variation distance of {self.delta:g} with "
                f"{100 * (1 - self.beta):g} % power at a false-alarm rate of at most "
                f"{self.alpha:g} (<= {self.outcomes} outcomes, n = {self.samples} per side)")


def distance(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """TV between the empirical distributions of `a` and `b`."""
    if not a or not b:
        raise ValueError("distance needs samples on both sides")
    ca, cb = Counter(a), Counter(b)
    return 0.5 * sum(abs(ca[k] / len(a) - cb[k] / len(b)) for k in set(ca) | set(cb))


def compare(a: Sequence[Hashable], b: Sequence[Hashable], power: TwoSamplePower,
            *, where: str) -> str:
    """Raise AssertionError when the two samples differ beyond the test's threshold, or hold
    more outcomes than the power was computed for; else the measured distance."""
    n = min(len(a), len(b))
    seen = len(set(a) | set(b))
    if seen > power.outcomes:
        raise AssertionError(f"{where}: {seen} distinct outcomes, more than the "
                             f"{power.outcomes} the test's power assumes")
    d, tau = distance(a, b), power.threshold(n)
    if d > tau:
        raise AssertionError(f"{where}: TV between speculative and plain samples {d:.4f} > "
                             f"threshold {tau:.4f} over {n} per side; the test "
                             f"{power.describe()}")
    return f"TV {d:.4f} <= {tau:.4f}; {power.describe()}"
