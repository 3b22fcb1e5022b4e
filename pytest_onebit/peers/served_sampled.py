"""S1 on a served engine with a one-sample test: the plain server's own `top_logprobs` give
its next-token distribution exactly, when top-k is small enough that they list all of it.

A sampled request at temperature T with top-k K (top-p 1, min-p 0) draws each token from
softmax(l / T) over the K likeliest tokens, l the raw scores; `top_logprobs` report log-softmax
of those raw scores (vLLM's default `raw_logprobs`, onebit serve, llama-server unless
`post_sampling_probs`), which differ from l by one constant per row. So where they list at least
K tokens, exp(logprob / T) renormalised over the K likeliest is the sampling distribution of
that position, exactly. The outcome S1 holds is the first `kept` tokens; its probability is
the product of each position's distribution given the tokens before, read from plain answers
(a pilot) that took that prefix. A prefix the pilot never took is one outcome, whatever
follows it: its probability is still exact (its own position's), only its split is not
watched.

`plain_distribution` returns that distribution, or raises `NotCovered` saying why it cannot
(no logprobs, fewer listed than K, an answer that ended early, a plain answer outside its own
top-K, logprobs for one prefix that disagree between answers); S1 then runs the two-sample
test (`event_test.TwoSampleEvents`) instead and says which ran. The derivation rests on the
raw-logprobs reading, so the pilot is held to what it derived first (`self_check`): a server
whose logprobs are of something else fails its own plain answers and gets the two-sample test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_onebit.peers.event_test import OneSampleEvents

#: |logprob| difference between two plain answers' entries for one prefix beyond which the
#: server's scores are not one function of the prefix (nats; a batch-variant float32 kernel
#: differs by about 1e-6, a wrong row by 1e-2 or more)
AGREE = 1e-3

#: a prefix of chosen tokens (their text, as the server spells them in its logprobs)
Prefix = tuple[str, ...]


class NotCovered(Exception):
    """The plain server's logprobs do not give its sampling distribution; the message says
    why (S1 then runs the two-sample test)."""


@dataclass(frozen=True)
class Position:
    """One token of an answer: the chosen token and the listed alternatives' logprobs."""

    token: str
    top: tuple[tuple[str, float], ...]


def positions(answer: dict) -> list[Position]:
    """Each listed token of an answer with its `top_logprobs`, from either endpoint's shape
    (chat: `logprobs.content[i].top_logprobs`; completions: `logprobs.tokens` and
    `logprobs.top_logprobs`, a dict per token). NotCovered where there are none."""
    lp = answer["choices"][0].get("logprobs") or {}
    if lp.get("content"):
        return [Position(e["token"], tuple((t["token"], float(t["logprob"]))
                                           for t in e.get("top_logprobs") or []))
                for e in lp["content"]]
    tokens, tops = lp.get("tokens") or [], lp.get("top_logprobs") or []
    if not tokens:
        raise NotCovered("the plain server returned no logprobs")
    return [Position(t, tuple((k, float(v)) for k, v in (tops[i] or {}).items())
                     if i < len(tops) else ()) for i, t in enumerate(tokens)]


def warped(top: Sequence[tuple[str, float]], temperature: float, top_k: int,
           where: str) -> dict[str, float]:
    """The sampling distribution of one position: exp(logprob / T) over the top-k listed,
    renormalised (shifted by the best first, so a small T cannot overflow)."""
    listed = dict(top)
    if len(listed) < top_k or len(listed) < len(top):
        raise NotCovered(f"{where}: top_logprobs lists {len(listed)} distinct tokens, top-k is "
                         f"{top_k}: the distribution is not covered")
    kept = sorted(listed.items(), key=lambda kv: -kv[1])[:top_k]
    best = kept[0][1]
    weights = {token: math.exp((value - best) / temperature) for token, value in kept}
    total = sum(weights.values())
    return {token: w / total for token, w in weights.items()}


def _branches(pilot: Sequence[dict], kept: int) -> tuple[dict, set[Prefix]]:
    """(prefix -> the top_logprobs of the position after it, prefixes an answer ended at),
    from every pilot answer, each prefix's entries checked to agree between the answers that
    took it. An answer that ends before `kept` tokens (a stop token: servers do not list its
    text alike) ends a prefix whose split is then not read: it is one outcome."""
    seen: dict[Prefix, tuple[tuple[str, float], ...]] = {}
    ended: set[Prefix] = set()
    for answer in pilot:
        steps = positions(answer)
        if len(steps) < kept:
            ended.add(tuple(s.token for s in steps))
        for at in range(min(kept, len(steps))):
            prefix = tuple(s.token for s in steps[:at])
            top = steps[at].top
            if prefix in seen:
                before = dict(seen[prefix])
                gap = max((abs(before[t] - v) for t, v in top if t in before), default=0.0)
                if gap > AGREE or set(before) != {t for t, _ in top}:
                    raise NotCovered(f"the plain server's top_logprobs after {prefix!r} differ "
                                     f"between answers (by {gap:.2g} nats, or in the tokens)")
            else:
                seen[prefix] = top
    return seen, ended


def plain_distribution(pilot: Sequence[dict], *, temperature: float, top_k: int,
                       kept: int) -> dict[Prefix, float]:
    """The exact distribution of the first `kept` tokens of plain sampling, outcome (a prefix
    of chosen tokens: `kept` long, or shorter where the pilot never took it further or an
    answer ended there) -> probability. NotCovered where the logprobs do not give it."""
    if not pilot:
        raise ValueError("plain_distribution needs pilot answers, got none")
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) \
            or not temperature > 0:
        raise ValueError(f"plain_distribution needs a temperature > 0, got {temperature!r}")
    if top_k < 1:
        raise NotCovered(f"top_k {top_k!r} keeps every token: top_logprobs cannot list them all")
    branches, ended = _branches(pilot, kept)
    exact: dict[Prefix, float] = {}

    def walk(prefix: Prefix, mass: float) -> None:
        if len(prefix) == kept or prefix not in branches or prefix in ended:
            exact[prefix] = exact.get(prefix, 0.0) + mass
            return
        dist = warped(branches[prefix], temperature, top_k, f"after {prefix!r}")
        for token, p in dist.items():
            walk((*prefix, token), mass * p)

    walk((), 1.0)
    for i, answer in enumerate(pilot):  # the server samples as its logprobs say it does
        steps = positions(answer)[:kept]
        for at, step in enumerate(steps):
            prefix = tuple(s.token for s in steps[:at])
            if prefix in ended:
                break
            if step.token not in warped(branches[prefix], temperature, top_k, ""):
                raise NotCovered(f"plain answer {i} chose {step.token!r} after {prefix!r}, "
                                 f"outside the top-{top_k} its own top_logprobs list: its "
                                 "sampler is not plain top-k at the temperature")
    return exact


def outcome(answer: dict, exact: dict[Prefix, float], kept: int) -> Prefix:
    """An answer's outcome in `exact`'s terms: its first `kept` chosen tokens, cut where the
    pilot's outcome ends (a prefix lumped as one). An answer with fewer than `kept` tokens,
    or a token no outcome starts with, gives a prefix `exact` holds at probability 0."""
    tokens = tuple(s.token for s in positions(answer))[:kept]
    for length in range(len(tokens) + 1):
        if tokens[:length] in exact:
            return tokens[:length]
    return tokens


@dataclass
class ServedOneSample:
    """The one-sample S1 on a served engine: the plain distribution derived from a pilot of
    plain answers (`plain_distribution`), the pilot held to it (`self_check`), then the
    speculative answers held to it (`judge`) by `OneSampleEvents` at the stated power."""

    exact: dict[Prefix, float]
    kept: int
    delta: float
    alpha: float = 1e-3
    beta: float = 1e-2

    def __post_init__(self) -> None:
        self.test = OneSampleEvents(self.exact, self.delta, self.alpha, self.beta)

    @classmethod
    def from_pilot(cls, pilot: Sequence[dict], *, temperature: float, top_k: int, kept: int,
                   delta: float, alpha: float = 1e-3, beta: float = 1e-2) -> ServedOneSample:
        test = cls(plain_distribution(pilot, temperature=temperature, top_k=top_k, kept=kept),
                   kept, delta, alpha, beta)
        test.self_check(pilot)
        return test

    @property
    def samples(self) -> int:
        return self.test.samples

    def self_check(self, pilot: Sequence[dict]) -> None:
        """The pilot (plain sampling itself) held to the distribution derived from its own
        logprobs, at the same false-alarm rate: a server whose logprobs are not its raw scores
        (post-sampling probabilities, another temperature) fails here, not on speculation."""
        try:
            self.test.judge([outcome(a, self.exact, self.kept) for a in pilot],
                            where="the plain pilot")
        except AssertionError as error:
            raise NotCovered(f"the plain server's own answers do not follow the distribution "
                             f"its top_logprobs give ({str(error).split('; the test')[0]}): "
                             "its logprobs are not the raw scores S1 reads them as") from None

    def judge(self, answers: Sequence[dict], *, where: str) -> str:
        """AssertionError naming the event that moved (OneSampleEvents.judge), else a line
        with the largest shift and the test's power."""
        __tracebackhide__ = True
        return self.test.judge([outcome(a, self.exact, self.kept) for a in answers],
                               where=where)

    def describe(self) -> str:
        outcomes = ", ".join(f"{' '.join(map(repr, o)) or '(none)'}: {p:.4f}"
                             for o, p in sorted(self.exact.items(), key=lambda kv: -kv[1]))
        return f"one-sample against the plain server's top_logprobs ({outcomes})"
