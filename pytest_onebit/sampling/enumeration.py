"""Exact output distributions: of a sampled run, by enumerating every answer its rng could give,
and of plain sampling, directly as prod p(t_i | prefix).

A sampled run draws all its randomness through `rng.accept(prob)` and `rng.choice(probs)`.
`ScriptedRng` answers each call from a script of branch indices and records how many branches
each call had (`accept`: True with weight prob, False with weight 1 - prob; `choice`: one branch
per nonzero entry, weighted by it; branches of weight 0 are never taken). `enumerate_leaves`
replays the run depth first until every path is taken: each leaf is one complete run, its
probability the product of its branch weights. Summed per emitted sequence that is the exact
distribution, in float64, with no sampling error: a broken rejection rule shows as a difference
of 1e-3 or more where a right one agrees to about 1e-15.

The weights are taken as given, never renormalised: a loop that hands `choice` an unnormalised
distribution shows as a total mass other than 1.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from onebit.sampling import Sampling, check_prob, warp

MAX_LEAVES = 500_000  # a tree this big is a mistake in the scenario, not something to wait for


class NondeterministicRun(AssertionError):
    """Replaying the same rng answers did not replay the same run."""


class ScriptedRng:
    """An rng that answers from `script` (branch indices) and takes branch 0 past its end,
    recording the number of branches of every call and the weight of the path taken."""

    def __init__(self, script: Sequence[int] = ()) -> None:
        self.script = list(script)
        self.branches: list[int] = []  # how many branches each call had, in call order
        self.weight = 1.0

    def _take(self, options: list[tuple[object, float]], what: str) -> object:
        depth = len(self.branches)
        index = self.script[depth] if depth < len(self.script) else 0
        if index >= len(options):
            raise NondeterministicRun(
                f"rng call {depth} ({what}) has {len(options)} branch(es) where an earlier "
                f"replay of the same answers had more: the run is not a function of its rng")
        self.branches.append(len(options))
        answer, weight = options[index]
        self.weight *= weight
        return answer

    def accept(self, prob: float) -> bool:
        p = check_prob(prob, "ScriptedRng.accept")
        options = [(True, p), (False, 1.0 - p)]
        return bool(self._take([o for o in options if o[1] > 0], f"accept({p!r})"))

    def choice(self, probs: np.ndarray) -> int:
        row = np.asarray(probs, dtype=np.float64)
        if row.ndim != 1 or row.size == 0:
            raise ValueError(f"ScriptedRng.choice needs one non-empty row, got {row.shape}")
        bad = np.flatnonzero(~np.isfinite(row) | (row < 0))
        if bad.size:
            raise ValueError(f"ScriptedRng.choice got probability {row[bad[0]]} at index "
                             f"{int(bad[0])}: not a distribution an rng can draw from")
        support = np.flatnonzero(row)
        if not support.size:
            raise ValueError("ScriptedRng.choice got an all-zero row: nothing to draw")
        return int(self._take([(int(i), float(row[i])) for i in support], "choice"))  # type: ignore[arg-type]


def enumerate_leaves(
    play: Callable[[ScriptedRng], Sequence[int]], max_leaves: int = MAX_LEAVES
) -> Iterator[tuple[tuple[int, ...], float]]:
    """Every complete run of `play` (one per path of rng answers), depth first, as (emitted
    tokens, probability). `play` must be a function of its rng's answers."""
    script: list[int] = []
    known: list[int] = []  # branch counts along the current path, from the last replay
    leaves = 0
    while True:
        rng = ScriptedRng(script)
        tokens = tuple(int(t) for t in play(rng))
        if rng.branches[: len(script)] != known[: len(script)] or len(rng.branches) < len(script):
            raise NondeterministicRun(
                f"replaying rng answers {script} gave branch counts {rng.branches}, earlier "
                f"{known[: len(script)]}: the run is not a function of its rng")
        leaves += 1
        if leaves > max_leaves:
            raise ValueError(f"more than {max_leaves} leaves: make the scenario smaller")
        yield tokens, rng.weight
        path = script + [0] * (len(rng.branches) - len(script))
        depth = len(path) - 1
        while depth >= 0 and path[depth] + 1 >= rng.branches[depth]:
            depth -= 1
        if depth < 0:
            return
        script, known = path[:depth] + [path[depth] + 1], rng.branches


@dataclass
class Distribution:
    """An exact output distribution: probability per emitted sequence."""

    probs: dict[tuple[int, ...], float] = field(default_factory=dict)
    leaves: int = 0  # complete runs enumerated (plain: sequences)
    seconds: float = 0.0

    def add(self, tokens: tuple[int, ...], weight: float) -> None:
        self.probs[tokens] = self.probs.get(tokens, 0.0) + weight
        self.leaves += 1

    @property
    def mass(self) -> float:
        return float(sum(self.probs.values()))


def distribution_of(
    play: Callable[[ScriptedRng], Sequence[int]], max_leaves: int = MAX_LEAVES
) -> Distribution:
    """The exact distribution of what `play(rng)` emits, over every path of rng answers."""
    started = time.perf_counter()
    out = Distribution()
    for tokens, weight in enumerate_leaves(play, max_leaves):
        out.add(tokens, weight)
    out.seconds = time.perf_counter() - started
    return out


def exact_distribution(
    run: Callable,
    base,
    head,
    prompt: Sequence[int],
    *,
    max_tokens: int,
    k: int,
    sampling: Sampling,
    on_leaf: Callable | None = None,
    max_leaves: int = MAX_LEAVES,
) -> Distribution:
    """The exact output distribution of the speculative `run` (onebit.run's signature, with
    `sampling` and `rng`) on `base` with `head`. The loop resets both for every leaf.
    `on_leaf(base, head, result)` sees every leaf's run as it ends (to check its state)."""

    def play(rng: ScriptedRng) -> list[int]:
        result = run(base, head, list(prompt), max_tokens=max_tokens, k=k, sampling=sampling,
                     rng=rng)
        if on_leaf is not None:
            on_leaf(base, head, result)
        return result.tokens

    return distribution_of(play, max_leaves)


def sample_distribution(
    sample: Callable, base, prompt: Sequence[int], *, max_tokens: int, sampling: Sampling
) -> Distribution:
    """The exact output distribution of a plain sampler (onebit.sample's signature)."""
    return distribution_of(lambda rng: sample(base, list(prompt), max_tokens=max_tokens,
                                              sampling=sampling, rng=rng).tokens)


def plain_distribution(
    base, prompt: Sequence[int], *, max_tokens: int, sampling: Sampling
) -> Distribution:
    """The exact distribution of plain sampling, computed directly: every sequence of
    `max_tokens` tokens with prod_i p(t_i | prompt + t_<i) > 0, each p read by stepping the
    base from a reset (no loop, no rng)."""
    started = time.perf_counter()
    out = Distribution()
    stack: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    while stack:
        prefix, weight = stack.pop()
        if len(prefix) == max_tokens:
            out.add(prefix, weight)
            continue
        base.reset()
        for pos, token in enumerate([*prompt, *prefix]):
            logits = base.step(token, pos)
        p = warp(logits, sampling)
        stack.extend((prefix + (int(t),), weight * float(p[t])) for t in np.flatnonzero(p))
    out.seconds = time.perf_counter() - started
    return out


# ---------------------------------------------------------------------------------------------
# Comparing two distributions


Probs = Mapping[tuple[int, ...], float] | Distribution


def _probs(d: Probs) -> Mapping[tuple[int, ...], float]:
    return d.probs if isinstance(d, Distribution) else d


def _gap(a: float, b: float) -> float:
    gap = abs(a - b)
    return gap if gap == gap else float("inf")  # NaN: as far apart as can be


def distance(a: Probs, b: Probs) -> tuple[float, tuple[int, ...] | None]:
    """The largest per-sequence difference of two distributions, and the sequence it is at."""
    pa, pb = _probs(a), _probs(b)
    worst, at = 0.0, None
    for seq in sorted(set(pa) | set(pb)):
        gap = _gap(pa.get(seq, 0.0), pb.get(seq, 0.0))
        if gap > worst or at is None:
            worst, at = gap, seq
    return worst, at


def _marginal(p: Mapping[tuple[int, ...], float], prefix: tuple[int, ...]) -> float:
    n = len(prefix)
    return sum(w for seq, w in p.items() if seq[:n] == prefix)


def _parting(pa, pb, seq: tuple[int, ...], atol: float) -> str:
    """Where along `seq` the conditionals of `pa` and `pb` first differ by more than atol."""
    for j in range(len(seq)):
        prefix = seq[:j]
        ma, mb = _marginal(pa, prefix), _marginal(pb, prefix)
        ca = _marginal(pa, seq[: j + 1]) / ma if ma else 0.0
        cb = _marginal(pb, seq[: j + 1]) / mb if mb else 0.0
        if _gap(ca, cb) > atol:
            return (f"the conditionals first part after prefix {list(prefix)}: "
                    f"P({seq[j]} | prefix) = {ca!r} vs {cb!r}")
    return "the conditionals agree along it: the difference is in the total mass"


def assert_distribution_equivalent(
    a: Probs, b: Probs, atol: float = 1e-12, names: tuple[str, str] = ("speculative", "plain")
) -> None:
    """Fail unless every sequence has the same probability in `a` and `b` to `atol`. The
    failure names the sequence with the largest difference, both probabilities, and the first
    prefix along it where the conditional distributions part."""
    __tracebackhide__ = True
    pa, pb = _probs(a), _probs(b)
    worst, seq = distance(pa, pb)
    if worst <= atol:
        return
    assert seq is not None
    differing = sum(1 for s in set(pa) | set(pb) if _gap(pa.get(s, 0.0), pb.get(s, 0.0)) > atol)
    mass_a, mass_b = sum(pa.values()), sum(pb.values())
    raise AssertionError(
        f"the output distributions differ by {worst:.3e} (atol {atol:g}) at sequence "
        f"{list(seq)}: {names[0]} {pa.get(seq, 0.0)!r}, {names[1]} {pb.get(seq, 0.0)!r}; "
        f"{_parting(pa, pb, seq, atol)}. {differing} of {len(set(pa) | set(pb))} sequences "
        f"differ; total mass {names[0]} {mass_a!r}, {names[1]} {mass_b!r}")
