"""Sharp tests of a sampler's output distribution: one test per event (set of outcomes), each
exact or bounded without asymptotics, their false alarms summed (Bonferroni).

Why events: TV(Q, P) = max over events A of |Q(A) - P(A)|, and the event that attains it is
{x : q(x) > p(x)} or its complement. So a sampler whose distribution is delta away from P in
total variation moves the probability of at least one event by delta, and a test that watches
every event with power 1 - beta against a shift of delta has at least that power against the
whole alternative. Over m outcomes there are 2^(m-1) - 1 events up to complement (an event
and its complement are one two-sided test). This is about 3x sharper than bounding the
expected TV of the empirical distribution (the tests this module replaced), whose mean
sqrt(m / n) eats most of the margin at small delta: at TV 0.05 over 4 outcomes, n = 4016
against 11 556 for one sample, 11 478 against 30 830 per side for two.

- `OneSampleEvents`: P known exactly (enumerated from the model's logits). Each event's count
  is Binomial(n, P(A)) under the null; its rejection region is cut from the exact binomial
  tails at alpha / (2 E) each, and the power at P(A) +- delta is computed exactly from the
  binomial tails (they are monotone in the parameter, so a larger shift is caught more often).
  n is the smallest the search finds where every event's power reaches 1 - beta.
- `TwoSampleEvents`: P unknown (a served engine, held to its own plain sampling). The outcomes
  are fixed by a pilot sample of plain outputs taken before the test (everything else is one
  outcome, "other"), so the events are fixed before the counts are. For each event the
  difference of the two sides' frequencies is a sum of 2n independent terms of range 1 / n:
  Hoeffding gives P(|D - E D| >= t) <= 2 exp(-n t^2), so t = sqrt(ln(2 E / alpha) / n) keeps
  false alarms at alpha, and n = (sqrt(ln(2 E / alpha)) + sqrt(ln(1 / beta)))^2 / delta^2 gives
  power 1 - beta against a shift of delta in any event. What it cannot see: a shift between two
  outcomes the pilot lumped into "other" (each of them rarer than 1 in the pilot's size).

Black-box exactness is impossible: a sampler that is wrong with probability below what n
samples resolve passes. onebit's own sampled loop is proved by enumeration instead (the S
checks); these tests are for engines that can only be sampled.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

#: the outcome every sample outside the named ones counts as
OTHER = "<other>"
#: events grow as 2^(m-1): past this many outcomes the test is not the tool
MAX_OUTCOMES = 12


def _check_rates(owner: str, delta: float, alpha: float, beta: float) -> None:
    for name, value in (("delta", delta), ("alpha", alpha), ("beta", beta)):
        if not 0 < value < 1:
            raise ValueError(f"{owner}.{name} must be in (0, 1), got {value!r}")


def _events(m: int) -> list[tuple[int, ...]]:
    """Every event over outcomes 0..m-1 up to complement: the nonempty sets without the last
    outcome (the complement of each holds it)."""
    if not 1 <= m <= MAX_OUTCOMES:
        raise ValueError(f"an event test takes 1..{MAX_OUTCOMES} outcomes, got {m}")
    rest = range(m - 1)
    return [c for r in range(1, m) for c in combinations(rest, r)]


def binomial_pmf(n: int, p: float) -> np.ndarray:
    """P(X = k) for k = 0..n, X ~ Binomial(n, p), in float64 through log-factorials."""
    k = np.arange(n + 1)
    if p <= 0.0 or p >= 1.0:
        pmf = np.zeros(n + 1)
        pmf[0 if p <= 0.0 else n] = 1.0
        return pmf
    logfact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1)))))
    log = logfact[n] - logfact[k] - logfact[n - k] + k * math.log(p) + (n - k) * math.log1p(-p)
    return np.exp(log)


def _region(n: int, p: float, level: float) -> tuple[int, int]:
    """(lo, hi): reject a Binomial(n, p) count X when X <= lo or X >= hi, each tail holding at
    most `level` of the null's mass (lo = -1 / hi = n + 1 where no count qualifies)."""
    pmf = binomial_pmf(n, p)
    cdf = np.cumsum(pmf)
    sf = np.cumsum(pmf[::-1])[::-1]  # P(X >= k)
    low = np.nonzero(cdf <= level)[0]
    high = np.nonzero(sf <= level)[0]
    return (int(low[-1]) if low.size else -1, int(high[0]) if high.size else n + 1)


def _rejects(n: int, q: float, lo: int, hi: int) -> float:
    """P(X <= lo or X >= hi) for X ~ Binomial(n, q)."""
    pmf = binomial_pmf(n, q)
    return float(pmf[: lo + 1].sum() + pmf[hi:].sum())  # empty slices where lo = -1, hi = n + 1


@dataclass
class OneSampleEvents:
    """Holds n samples to an exactly known distribution `exact` (outcome -> probability; the
    outcomes it leaves out have probability 0, and a sample of one of them is a failure on
    its own). Detects a total-variation distance `delta` with probability at least 1 - `beta`,
    false alarms at most `alpha`, both computed from binomial tails, nothing asymptotic."""

    exact: Mapping[Hashable, float]
    delta: float
    alpha: float = 1e-3
    beta: float = 1e-2
    outcomes: list = field(init=False)
    events: list = field(init=False)
    _p: list = field(init=False, repr=False)  # each event's probability under `exact`
    _n: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        _check_rates("OneSampleEvents", self.delta, self.alpha, self.beta)
        support = sorted((k for k, p in self.exact.items() if p > 0), key=repr)
        if abs(sum(self.exact[k] for k in support) - 1.0) > 1e-9:
            raise ValueError("OneSampleEvents.exact must sum to 1, got "
                             f"{sum(self.exact[k] for k in support)!r}")
        self.outcomes = [*support, OTHER]
        self.events = _events(len(self.outcomes))
        self._p = [sum(self.exact.get(self.outcomes[i], 0.0) for i in e) for e in self.events]

    def _regions(self, n: int) -> list[tuple[int, int]]:
        level = self.alpha / (2 * len(self.events))
        return [_region(n, p, level) for p in self._p]

    def power(self, n: int) -> float:
        """The least probability, over every event and both directions, of rejecting when that
        event's probability is moved by delta (so: the power against any TV >= delta)."""
        worst = 1.0
        for p, (lo, hi) in zip(self._p, self._regions(n), strict=True):
            for q in (p - self.delta, p + self.delta):
                if 0.0 <= q <= 1.0:
                    worst = min(worst, _rejects(n, q, lo, hi))
        return worst

    @property
    def samples(self) -> int:
        """The smallest n the search finds with power >= 1 - beta: the normal approximation's n
        at worst variance as a start, then up in steps of 2 % (binomial power is not monotone
        in n by a hair, so the n returned is checked, not assumed)."""
        if self._n is None:
            z = _z(self.alpha / (2 * len(self.events))) + _z(self.beta)
            n = max(8, int((0.5 * z / self.delta) ** 2 * 0.6))
            while self.power(n) < 1 - self.beta:
                n = int(n * 1.02) + 1
            self._n = n
        return self._n

    def describe(self) -> str:
        return (f"detects a total-variation distance of {self.delta:g} with "
                f"{100 * (1 - self.beta):g} % power at a false-alarm rate of at most "
                f"{self.alpha:g}, exactly (binomial tails of {len(self.events)} events over "
                f"{len(self.outcomes) - 1} outcomes and other, n = {self.samples})")

    def judge(self, samples: Sequence[Hashable], *, where: str) -> str:
        """Raise AssertionError naming the event whose count falls in its rejection region
        (the one furthest out), else the largest shift seen and the test's power."""
        __tracebackhide__ = True
        n = len(samples)
        if n == 0:
            raise ValueError("OneSampleEvents.judge needs samples")
        index = {o: i for i, o in enumerate(self.outcomes)}
        counts = Counter(index.get(s, len(self.outcomes) - 1) for s in samples)
        never = sorted((s for s in set(samples) if s not in index), key=repr)
        if never:
            raise AssertionError(f"{where}: sampled {never[0]!r}, which plain sampling never "
                                 "produces")
        worst, shift = None, 0.0
        for event, p, (lo, hi) in zip(self.events, self._p, self._regions(n), strict=True):
            x = sum(counts[i] for i in event)
            if abs(x / n - p) > shift:
                shift = abs(x / n - p)
            outside = x <= lo or x >= hi
            if outside and (worst is None or abs(x / n - p) > abs(worst[1] / n - worst[2])):
                worst = (event, x, p)
        if worst is not None:
            event, x, p = worst
            names = ", ".join(repr(self.outcomes[i]) for i in event)
            raise AssertionError(f"{where}: P({{{names}}}) is {p:.4f} under plain sampling, seen "
                                 f"{x}/{n} = {x / n:.4f} under speculation; the test "
                                 f"{self.describe()}")
        return f"largest event shift {shift:.4f}; {self.describe()}"

    def rejection_rate(self, probs: Mapping[Hashable, float], *, n: int | None = None,
                       trials: int = 10_000, seed: int = 0) -> float:
        """The fraction of `trials` samples of size n (default: `samples`) drawn from `probs`
        (outcome -> probability) that `judge` would reject: the power measured by simulation
        where `probs` is an alternative, the false-alarm rate where it is `exact`. Counts are
        drawn as multinomials and held to the same regions `judge` uses, all trials at once
        (a sample of an outcome `exact` never gives is rejected, as `judge` rejects it)."""
        n = self.samples if n is None else n
        keys = list(probs)
        weights = np.array([probs[k] for k in keys], dtype=np.float64)
        if (weights < 0).any() or abs(weights.sum() - 1.0) > 1e-9:
            raise ValueError(f"rejection_rate needs a distribution, got {dict(probs)!r}")
        counts = np.random.default_rng(seed).multinomial(n, weights, size=trials)
        index = {o: i for i, o in enumerate(self.outcomes[:-1])}
        named = np.zeros((len(keys), len(self.outcomes) - 1))
        impossible = np.zeros(len(keys), dtype=bool)
        for j, key in enumerate(keys):
            if key in index:
                named[j, index[key]] = 1.0
            else:
                impossible[j] = True
        per_outcome = counts @ named  # trials x named outcomes (OTHER is never counted)
        rejected = (counts[:, impossible] > 0).any(axis=1)
        for event, (lo, hi) in zip(self.events, self._regions(n), strict=True):
            x = per_outcome[:, list(event)].sum(axis=1)
            rejected |= (x <= lo) | (x >= hi)
        return float(rejected.mean())


def hardest_samples(delta: float, outcomes: int, alpha: float = 1e-3,
                    beta: float = 1e-2) -> int:
    """The n `OneSampleEvents` needs over `outcomes` equally likely outcomes: with an even
    number of them some event has probability 1/2, where a binomial count varies most, so
    this bounds (to within the search's 2 % steps) the n of any distribution over as many
    outcomes. Known before anything is sampled: what a served S1 states up front."""
    return OneSampleEvents({i: 1 / outcomes for i in range(outcomes)}, delta, alpha,
                           beta).samples


@dataclass
class TwoSampleEvents:
    """Holds a speculative sample to a plain one when neither distribution is known. The
    outcomes are named by a `pilot`, a plain sample drawn before (and apart from) the two
    compared: its most frequent distinct outcomes, at most `max_outcomes - 1`; everything else
    is `OTHER`. The events (and so n) are counted for `max_outcomes` whatever the pilot
    names, so n is known before anything is sampled."""

    max_outcomes: int
    delta: float
    alpha: float = 1e-3
    beta: float = 1e-2
    events: list = field(init=False)

    def __post_init__(self) -> None:
        _check_rates("TwoSampleEvents", self.delta, self.alpha, self.beta)
        if not 2 <= self.max_outcomes <= MAX_OUTCOMES:
            raise ValueError(f"TwoSampleEvents.max_outcomes must be in 2..{MAX_OUTCOMES}, "
                             f"got {self.max_outcomes}")
        self.events = _events(self.max_outcomes)

    @property
    def _log_events(self) -> float:
        return math.log(2 * len(self.events) / self.alpha)

    @property
    def samples(self) -> int:
        root = (math.sqrt(self._log_events) + math.sqrt(math.log(1 / self.beta))) / self.delta
        return math.ceil(root * root)

    def threshold(self, n: int) -> float:
        return math.sqrt(self._log_events / n)

    def describe(self) -> str:
        return (f"detects a total-variation distance of {self.delta:g} with "
                f"{100 * (1 - self.beta):g} % power at a false-alarm rate of at most "
                f"{self.alpha:g} (Hoeffding on {len(self.events)} events over at most "
                f"{self.max_outcomes - 1} outcomes named by a plain pilot and other, "
                f"n = {self.samples} per side)")

    def judge(self, spec: Sequence[Hashable], plain: Sequence[Hashable], *,
              pilot: Sequence[Hashable], where: str) -> str:
        """Raise AssertionError naming the event whose frequencies differ most when that
        difference passes the threshold, else the largest difference seen."""
        __tracebackhide__ = True
        n = min(len(spec), len(plain))
        if n == 0 or not pilot:
            raise ValueError("TwoSampleEvents.judge needs a pilot and samples on both sides")
        named = [o for o, _ in Counter(pilot).most_common(self.max_outcomes - 1)]
        outcomes = [*named, *[OTHER] * (self.max_outcomes - len(named))]
        index = {o: i for i, o in enumerate(named)}
        last = self.max_outcomes - 1

        def counts(sample):
            return Counter(index.get(s, last) for s in sample[:n])

        a, b = counts(spec), counts(plain)
        tau = self.threshold(n)
        shift, at = 0.0, ()
        for event in self.events:
            d = abs(sum(a[i] for i in event) - sum(b[i] for i in event)) / n
            if d > shift:
                shift, at = d, event
        if shift > tau:
            names = ", ".join(sorted({repr(outcomes[i]) for i in at}))
            raise AssertionError(f"{where}: P({{{names}}}) differs by {shift:.4f} between "
                                 f"speculative and plain samples > threshold {tau:.4f} over {n} "
                                 f"per side; the test {self.describe()}")
        return f"largest event shift {shift:.4f} <= {tau:.4f}; {self.describe()}"


def _z(tail: float) -> float:
    """The standard normal's upper `tail` quantile (bisection on erfc; a start value only)."""
    lo, hi = 0.0, 40.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(mid / math.sqrt(2)) > tail:
            lo = mid
        else:
            hi = mid
    return hi
