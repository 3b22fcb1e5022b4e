"""A one-sample test of a sampler's output distribution against an exact one, with its sample
size derived from the power it must have.

The exact distribution P over whole outputs is enumerated (plain sampling's rule applied to
the model's logits, token by token); n outputs of the engine under test give the empirical
distribution Q_n over the same m outcomes. The statistic is D = TV(Q_n, P).

- Its mean under the null (the engine samples from P) is at most sum_i sqrt(p_i / n) / 2 <=
  sqrt(m / n) / 2 (Cauchy-Schwarz on E|X_i / n - p_i|).
- One output moves D by at most 1 / n, so McDiarmid bounds each tail:
  P(D - E D >= t) <= exp(-2 n t^2).

Reject when D > tau = sqrt(m / n) / 2 + sqrt(ln(1 / alpha) / (2 n)): a false alarm has
probability at most alpha. If the engine samples from Q with TV(Q, P) >= delta, then
E D >= delta - sqrt(m / n) / 2, and D <= tau has probability at most beta once
delta >= sqrt(m / n) + sqrt(ln(1 / alpha) / (2 n)) + sqrt(ln(1 / beta) / (2 n)); solving for
n gives the sample size. Nothing here is asymptotic: both rates hold for every n.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Power:
    """What the test detects: a total-variation distance `delta` with probability at least
    1 - `beta`, at a false-alarm rate of at most `alpha`, over `outcomes` outcomes."""

    delta: float
    alpha: float
    beta: float
    outcomes: int

    def __post_init__(self) -> None:
        for name in ("delta", "alpha", "beta"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise ValueError(f"Power.{name} must be in (0, 1), got {value!r}")
        if self.outcomes < 1:
            raise ValueError(f"Power.outcomes must be >= 1, got {self.outcomes}")

    @property
    def samples(self) -> int:
        """The n at which the bound above is met."""
        root = (math.sqrt(self.outcomes) + math.sqrt(math.log(1 / self.alpha) / 2)
                + math.sqrt(math.log(1 / self.beta) / 2)) / self.delta
        return math.ceil(root * root)

    def threshold(self, n: int) -> float:
        return math.sqrt(self.outcomes / n) / 2 + math.sqrt(math.log(1 / self.alpha) / (2 * n))

    def describe(self) -> str:
        return (f"detects a total-variation distance of {self.delta:g} with "
                f"{100 * (1 - self.beta):g} % power at a false-alarm rate of at most "
                f"{self.alpha:g} ({self.outcomes} outcomes, n = {self.samples})")


def total_variation(samples: Sequence[Hashable], exact: Mapping[Hashable, float]) -> float:
    """TV between the empirical distribution of `samples` and `exact` (outcomes missing
    from `exact` have probability 0 there)."""
    n = len(samples)
    if n == 0:
        raise ValueError("total_variation needs at least one sample")
    counts = Counter(samples)
    keys = set(counts) | set(exact)
    return 0.5 * sum(abs(counts.get(key, 0) / n - exact.get(key, 0.0)) for key in keys)


def assert_distribution(samples: Sequence[Hashable], exact: Mapping[Hashable, float],
                        power: Power, *, where: str) -> str:
    """S1: reject when TV(samples, exact) exceeds the test's threshold; return the measured
    distance and the test's power for the report."""
    __tracebackhide__ = True
    outside = [s for s in set(samples) if exact.get(s, 0.0) == 0.0]
    distance = total_variation(samples, exact)
    tau = power.threshold(len(samples))
    if outside:
        raise AssertionError(f"{where}: sampled {sorted(outside)[0]}, which plain sampling "
                             "never produces")
    if distance > tau:
        raise AssertionError(f"{where}: TV from plain sampling {distance:.4f} > threshold "
                             f"{tau:.4f} over {len(samples)} samples; the test "
                             f"{power.describe()}")
    return f"TV {distance:.4f} <= {tau:.4f}; {power.describe()}"
