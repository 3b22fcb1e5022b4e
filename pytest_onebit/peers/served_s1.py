"""S1-distribution on one endpoint of a served engine (`EndpointArm.distribution`): sampled
answers with speculation held to plain sampling, by the sharpest test the server allows.

1. A pilot of PILOT plain answers, with `top_logprobs`, on seeds of their own.
2. Where those logprobs give plain sampling's distribution of the first SAMPLED_KEPT tokens
   exactly (`served_sampled.plain_distribution`; top-k no wider than what they list), the
   **one-sample** test: n speculative answers held to it (`OneSampleEvents`, n from the
   distribution; at most about 4000 at TV 0.05 over four outcomes).
3. Otherwise the **two-sample** test (`TwoSampleEvents`): n speculative and n plain answers,
   the outcomes named by the pilot (11 478 per side at TV 0.05).

The detail of the cell says which ran, and why the one-sample test could not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_onebit.peers.answers import (
    accepted_note,
    answer_ids,
    answer_text,
    counted_note,
    drafted,
)
from pytest_onebit.peers.event_test import MAX_OUTCOMES, TwoSampleEvents, hardest_samples
from pytest_onebit.peers.protocol import Outcome, failed, not_applicable, passed
from pytest_onebit.peers.served_metrics import read_metrics
from pytest_onebit.peers.served_sampled import NotCovered, ServedOneSample

#: S1 asks for 4 tokens and compares the first 2 (at most 2 x 2 = 4 outcomes): a server
#: drafts only within the budget, so with 2 asked llama-server drafts nothing after the first
#: token and S1 would hold plain sampling to itself; with 4, the second token is a draft
#: judged by the acceptance test (or, on a rejection, drawn from the residual)
MAX_TOKENS = 4
SAMPLED_KEPT = 2
TOP_K = 2
#: not 1: a draft sampled without the temperature (z-lab/dflash #74) is exact at 1
TEMPERATURE = 0.7
#: top_logprobs asked: past top-k, so "covered" is read from the list, not assumed
TOP_LOGPROBS = 3
SAMPLED_OUTCOMES = 4
#: plain answers drawn first: they give the one-sample distribution (every prefix they take),
#: or name the two-sample outcomes (one rarer than about 1 in this many is lumped into other)
PILOT = 200
#: the pilot's seeds start here, clear of the compared answers' 0..2n
PILOT_SEED = 1_000_000
#: the default TV each test detects (`--delta` sets both): the one-sample test's stated power
#: costs about 4000 requests; the two-sample test's would cost 23 000, so it keeps 0.5
ONE_SAMPLE_DELTA = 0.05
TWO_SAMPLE_DELTA = 0.5
ALPHA, BETA = 1e-3, 1e-2
#: S1's completion prompt on SmolLM2: the first token (":") is sure, and a draft of the
#: second (prompt lookup's " heads", from the lines before) is one SmolLM2 doubts
PROMPT = "coin: heads\ncoin: tails\ncoin: tails\ncoin: heads\ncoin"


@dataclass(frozen=True)
class Sampled:
    """What S1 asks: the prompt (None: the arm's own), the temperature, the top-k, the TV
    each test detects (None: each test's default), and where its seeds start (a run of S1
    asks the same seeds as another unless this moves them)."""

    prompt: str | None = None
    temperature: float = TEMPERATURE
    top_k: int = TOP_K
    delta: float | None = None
    seed_base: int = 0

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"S1's temperature must be > 0, got {self.temperature!r}")
        if self.top_k < 0:
            raise ValueError(f"S1's top_k must be >= 0, got {self.top_k!r}")
        if self.delta is not None and not 0 < self.delta < 1:  # refused before any request
            raise ValueError(f"S1's delta must be in (0, 1), got {self.delta!r}")

    def two_sample(self) -> TwoSampleEvents:
        return TwoSampleEvents(max_outcomes=SAMPLED_OUTCOMES + 1,
                               delta=self.delta or TWO_SAMPLE_DELTA, alpha=ALPHA, beta=BETA)

    def plan(self) -> str:
        """What S1 would cost, before anything is sampled."""
        one = self.delta or ONE_SAMPLE_DELTA
        outcomes = min(max(self.top_k, 1) ** SAMPLED_KEPT, MAX_OUTCOMES - 1)
        return (f"one-sample where top_logprobs cover top-k {self.top_k}: at most about "
                f"{hardest_samples(one, outcomes, ALPHA, BETA)} speculative answers "
                f"at TV {one:g}, 99 % power, false alarms <= {ALPHA:g}; else two-sample: "
                f"{self.two_sample().samples} per side ({self.two_sample().describe()}); "
                f"after {PILOT} plain answers")


def _ids_or_text(answer: dict):
    """The two-sample outcome: the first SAMPLED_KEPT ids, else the text."""
    ids = answer_ids(answer)
    return tuple(ids[:SAMPLED_KEPT]) if ids is not None else answer_text(answer)


def sampled_distribution(arm, sampled: Sampled) -> Outcome:
    """S1 on `arm` (an `openai_peer.EndpointArm`): the pilot, then the one-sample test where
    the plain server's logprobs cover top-k, else the two-sample test."""
    prompt = sampled.prompt or (PROMPT if arm.name == "completions" else arm.prompts[0])
    body = arm.body(prompt, temperature=sampled.temperature, top_k=sampled.top_k, top_p=1.0,
                    min_p=0.0, max_tokens=MAX_TOKENS,
                    **_logprob_fields(arm.name))

    def answers(seeds: range, *, plain: bool) -> list[dict]:
        return [arm.ask({**body, "seed": sampled.seed_base + s}, plain=plain, fresh=True)
                for s in seeds]

    pilot = answers(range(PILOT_SEED, PILOT_SEED + PILOT), plain=True)
    try:
        one = ServedOneSample.from_pilot(pilot, temperature=sampled.temperature,
                                         top_k=sampled.top_k, kept=SAMPLED_KEPT,
                                         delta=sampled.delta or ONE_SAMPLE_DELTA,
                                         alpha=ALPHA, beta=BETA)
    except NotCovered as why:
        return _two_sample(arm, sampled.two_sample(), pilot, answers, f"{why}")
    judged = _speculative(arm, lambda: answers(range(one.samples), plain=False))
    if isinstance(judged, Outcome):
        return judged
    spec, counted = judged
    where = f"first {SAMPLED_KEPT} of {MAX_TOKENS} tokens, {one.describe()}"
    try:
        verdict = one.judge(spec, where=where)
    except AssertionError as error:
        return failed(f"one-sample: {error}{counted}")
    except NotCovered as error:  # the plain server listed logprobs, the speculative did not
        return failed(f"one-sample: the speculative server's answers cannot be read as the "
                      f"plain server's were: {error}{counted}")
    return passed(f"one-sample ({one.describe()}): {verdict}{counted}")


def _logprob_fields(endpoint: str) -> dict:
    if endpoint == "completions":
        return {"logprobs": TOP_LOGPROBS}
    return {"logprobs": True, "top_logprobs": TOP_LOGPROBS}


def _speculative(arm, draw: Callable[[], list[dict]]):
    """The speculative answers and what the server counted of its drafts, or an Outcome (not
    applicable) when it drafted nothing: S1 would hold plain sampling to itself."""
    before = read_metrics(arm.peer.client.root)
    spec = draw()
    after = read_metrics(arm.peer.client.root)
    if drafted(spec, before, after) == 0:
        return not_applicable(f"the server drafted nothing in {len(spec)} sampled answers: S1 "
                              "would hold plain sampling to itself")
    return spec, accepted_note(spec) or counted_note(before, after)


def _two_sample(arm, test: TwoSampleEvents, pilot: list[dict], answers,
                why: str) -> Outcome:
    n = test.samples
    judged = _speculative(arm, lambda: answers(range(n), plain=False))
    if isinstance(judged, Outcome):
        return judged
    spec, counted = judged
    plain = answers(range(n, 2 * n), plain=True)
    head = f"two-sample (the one-sample test does not apply: {why})"
    try:
        verdict = test.judge([_ids_or_text(a) for a in spec], [_ids_or_text(a) for a in plain],
                             pilot=[_ids_or_text(a) for a in pilot],
                             where=f"first {SAMPLED_KEPT} of {MAX_TOKENS} tokens")
    except AssertionError as error:
        return failed(f"{head}: {error}{counted}")
    return passed(f"{head}: {verdict}{counted}")
