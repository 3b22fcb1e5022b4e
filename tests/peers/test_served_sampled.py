"""The served S1's one-sample test (pytest_onebit/peers/served_sampled.py, served_s1.py): the
plain distribution read from top_logprobs, where it is not covered and why, its power measured
by simulation, and over real HTTP (onebit serve on the fabricated ServedToy) every planted
sampled fault caught and no false alarm on clean servers."""

from __future__ import annotations

import math
import os

import pytest

from pytest_onebit.peers.event_test import OneSampleEvents, hardest_samples
from pytest_onebit.peers.served_sampled import NotCovered, ServedOneSample, plain_distribution

LOG = math.log


def completion(tokens, tops) -> dict:
    """A completions answer in OpenAI's shape: chosen tokens and each one's top_logprobs."""
    return {"choices": [{"logprobs": {"tokens": list(tokens),
                                      "top_logprobs": [dict(t) for t in tops]}}]}


def chat(tokens, tops) -> dict:
    """A chat answer in OpenAI's shape."""
    return {"choices": [{"logprobs": {"content": [
        {"token": t, "logprob": dict(top)[t],
         "top_logprobs": [{"token": k, "logprob": v} for k, v in top]}
        for t, top in zip(tokens, tops, strict=True)]}}]}


# raw logprobs of a two-token answer: first a 0.5 / 0.3 / 0.2 row, then after "a" one of
# 0.6 / 0.3 / 0.1 and after "b" one of 0.4 / 0.4 / 0.2
FIRST = (("a", LOG(0.5)), ("b", LOG(0.3)), ("c", LOG(0.2)))
AFTER_A = (("x", LOG(0.6)), ("y", LOG(0.3)), ("z", LOG(0.1)))
AFTER_B = (("y", LOG(0.4)), ("x", LOG(0.4)), ("z", LOG(0.2)))


def test_the_distribution_is_the_warped_logprobs_over_top_k():
    """Top-k 2 at temperature 0.5: each position's distribution is p^(1/T) over its two
    likeliest, renormalised, and an outcome's probability is the product along its prefix;
    both endpoints' shapes read alike."""
    pilot = [completion(["a", "x"], [FIRST, AFTER_A]), completion(["b", "y"], [FIRST, AFTER_B])]
    exact = plain_distribution(pilot, temperature=0.5, top_k=2, kept=2)
    first = {"a": 0.25 / 0.34, "b": 0.09 / 0.34}
    assert exact.keys() == {("a", "x"), ("a", "y"), ("b", "y"), ("b", "x")}
    assert exact[("a", "x")] == pytest.approx(first["a"] * 0.36 / 0.45, rel=1e-12)
    assert exact[("b", "x")] == pytest.approx(first["b"] * 0.5, rel=1e-12)
    assert sum(exact.values()) == pytest.approx(1.0, abs=1e-12)
    as_chat = [chat(["a", "x"], [FIRST, AFTER_A]), chat(["b", "y"], [FIRST, AFTER_B])]
    assert plain_distribution(as_chat, temperature=0.5, top_k=2, kept=2) == exact


def test_a_prefix_the_pilot_never_took_or_ended_at_is_one_outcome():
    """A first token the pilot never continued ("b") is one outcome holding its exact mass;
    so is one an answer ended at (a stop token, whose text servers list differently)."""
    unseen = plain_distribution([completion(["a", "x"], [FIRST, AFTER_A])], temperature=1.0,
                                top_k=2, kept=2)
    assert unseen[("b",)] == pytest.approx(0.3 / 0.8)
    assert unseen[("a", "x")] == pytest.approx(0.5 / 0.8 * 0.6 / 0.9)
    ended = plain_distribution([completion(["a", "x"], [FIRST, AFTER_A]),
                                completion(["b"], [FIRST])], temperature=1.0, top_k=2, kept=2)
    assert ended[("b",)] == pytest.approx(0.3 / 0.8)


@pytest.mark.parametrize("pilot, top_k, why", [
    ([{"choices": [{"logprobs": None}]}], 2, "returned no logprobs"),
    ([completion(["a", "x"], [FIRST, AFTER_A])], 4, "lists 3 distinct tokens, top-k is 4"),
    ([completion(["a", "x"], [FIRST, AFTER_A])], 0, "keeps every token"),
    ([completion(["c", "x"], [FIRST, AFTER_A])], 2, "chose 'c' after (), outside the top-2"),
    ([completion(["a", "x"], [FIRST, AFTER_A]),
      completion(["a", "y"], [FIRST, (("x", -0.4), ("y", -1.2), ("z", -2.3))])], 2,
     "differ between answers"),
])
def test_what_is_not_covered_says_why(pilot, top_k, why):
    """No logprobs, fewer listed than top-k, no top-k at all, a plain answer outside its own
    top-k (a sampler other than the one assumed) and two answers scoring one prefix
    differently: NotCovered naming it, so S1 runs the two-sample test instead."""
    with pytest.raises(NotCovered, match=why.replace("(", r"\(").replace(")", r"\)")):
        plain_distribution(pilot, temperature=1.0, top_k=top_k, kept=2)


def test_bad_arguments_are_typed_errors_naming_the_value():
    """An empty pilot, a temperature that is not > 0 and a TV outside (0, 1) are ValueErrors
    naming the value."""
    with pytest.raises(ValueError, match="needs pilot answers"):
        plain_distribution([], temperature=1.0, top_k=2, kept=2)
    with pytest.raises(ValueError, match="temperature > 0, got 0"):
        plain_distribution([completion(["a"], [FIRST])], temperature=0, top_k=2, kept=1)
    from pytest_onebit.peers.served_s1 import Sampled

    with pytest.raises(ValueError, match="S1's temperature must be > 0, got -1"):
        Sampled(temperature=-1)
    with pytest.raises(ValueError, match=r"S1's delta must be in \(0, 1\), got 1.5"):
        Sampled(delta=1.5)


def test_the_pilot_is_held_to_its_own_logprobs():
    """A plain server whose answers do not follow the distribution its logprobs give (here
    every answer takes the 0.3 token: logprobs of something else than what it samples) fails
    its own pilot: NotCovered, and S1 falls back to the two-sample test."""
    pilot = [completion(["b", "y"], [FIRST, AFTER_B])] * 200
    with pytest.raises(NotCovered, match="do not follow the distribution"):
        ServedOneSample.from_pilot(pilot, temperature=1.0, top_k=2, kept=2, delta=0.1)


def _shifted(exact: dict, delta: float) -> list[dict]:
    """The hardest alternatives at TV exactly delta: for each event A (a set of outcomes) and
    direction, delta moved into (or out of) A in proportion to each outcome's mass, so A moves
    by delta and no event by more: what the test must see through A's count alone."""
    from itertools import combinations

    keys = list(exact)
    out = []
    for size in range(1, len(keys)):
        for event in combinations(keys, size):
            inside = sum(exact[k] for k in event)
            for sign in (1, -1):
                q = {k: exact[k] * (1 + sign * delta / inside) if k in event
                     else exact[k] * (1 - sign * delta / (1 - inside)) for k in keys}
                if min(q.values()) >= 0:
                    out.append(q)
    return out


# the toy's S1 distribution (the clean run below: "heads B: one one", T 0.3, top-k 2) and a
# distribution with an event at exactly 1/2, the hardest for a binomial count
MEASURED = {"rt ": 0.4099, "w ao": 0.2611, "w s": 0.2099, "rt s": 0.1191}
HALVES = {"a": 0.45, "b": 0.3, "c": 0.2, "d": 0.05}


@pytest.mark.parametrize("exact", [MEASURED, HALVES], ids=["toy", "halves"])
def test_power_at_tv_005_is_99_percent_by_simulation(exact):
    """The stated power, measured: at TV 0.05 (n from the exact binomial search, at most
    hardest_samples = 4016 over four outcomes), 10 000 simulated samples from each of the
    hardest alternatives (`_shifted`: one event moved by 0.05) are rejected at least 98.5 % of
    the time
    (99 % less three standard errors), and 200 000 samples of P itself at most 0.13 % (1e-3
    plus three standard errors)."""
    test = OneSampleEvents(exact, delta=0.05, alpha=1e-3, beta=1e-2)
    assert test.samples <= hardest_samples(0.05, 4) == 4016
    worst = min(test.rejection_rate(q, trials=10_000, seed=i)
                for i, q in enumerate(_shifted(exact, 0.05)))
    assert worst >= 0.985, worst
    assert test.rejection_rate(exact, trials=200_000, seed=99) <= 1.3e-3


# -- over HTTP: onebit serve on ServedToy, planted and clean -----------------------------------

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

#: S1 on the toy: a prompt whose first two positions hold no stop token in their top two, at
#: a temperature that makes the toy's flat logits (within 2 of 0) a distribution worth testing
TOY_PROMPT = "heads B: one one"
TOY_TEMPERATURE = 0.3
#: the TV the over-HTTP runs detect: 0.1 for the plants (each moves the outcome by 0.115 or
#: more) and 0.2 for the clean runs (a false alarm is at most 1e-3 at any TV) keep the slow step
#: short; ONEBIT_S1_DELTA=0.05 runs them all at the stated power (about 4200 requests a run)
PLANT_DELTA = float(os.environ.get("ONEBIT_S1_DELTA", 0.1))
CLEAN_DELTA = float(os.environ.get("ONEBIT_S1_DELTA", 0.2))


@pytest.fixture(scope="module")
def plain_server():
    from onebit.serve import create_app
    from onebit.serve.server import ServerThread
    from pytest_onebit.peers.sampled_plants import plain_engine

    with ServerThread(create_app(plain_engine())) as server:
        yield server


def s1(spec_url: str, plain_url: str, delta: float, **sampled):
    """S1 on the completions endpoint of `spec_url` against `plain_url`: its Outcome."""
    from pytest_onebit.peers.openai_peer import EndpointArm, OpenAIPeer
    from pytest_onebit.peers.served_s1 import Sampled

    settings = {"prompt": TOY_PROMPT, "temperature": TOY_TEMPERATURE, "delta": delta} | sampled
    peer = OpenAIPeer(spec_url, plain_url, sampled=True, only=("S1-distribution",),
                      arms=("completions",), s1=Sampled(**settings))
    assert peer.unavailable() is None
    return EndpointArm(peer, "completions").distribution()


def serving(engine):
    from onebit.serve import create_app
    from onebit.serve.server import ServerThread

    return ServerThread(create_app(engine))


@pytest.mark.slow  # about 1200 requests a plant, 12-30 s each on two busy cores
@pytest.mark.parametrize("plant", ["accept-if-equal", "draft-ignores-temperature",
                                   "residual-unnormalised", "draft-low-precision"])
def test_each_planted_sampled_fault_is_caught_by_the_one_sample_test(plain_server, plant):
    """A real speculative loop on the toy with one sampled fault (pytest_onebit/peers/
    sampled_plants.py), served over HTTP, fails S1's one-sample test at TV 0.1 (each plant
    moves the outcome by 0.115 to 0.177 in total variation; ONEBIT_S1_DELTA=0.05 runs it at
    the stated power), and the detail names the test
    and the event that moved."""
    from pytest_onebit.peers.sampled_plants import PLANTS

    with serving(PLANTS[plant].engine(plant)) as server:
        outcome = s1(server.url, plain_server.url, PLANT_DELTA)
    print(f"{plant}: {outcome.status}: {outcome.detail}")
    assert outcome.status == "failed", outcome
    assert outcome.detail.startswith("one-sample:"), outcome.detail
    assert "under plain sampling, seen" in outcome.detail


@pytest.mark.slow  # 20 runs of about 450 requests each: about 100 s on two busy cores
def test_clean_servers_give_no_false_alarm_over_20_runs(plain_server):
    """The same drafters with onebit's own loop (perfect and swapped, ten runs each, each run
    a fresh server and seeds of its own) pass S1's one-sample test 20 times out of 20, and
    every run really drafted."""
    from pytest_onebit.peers.sampled_plants import CLEAN

    verdicts = []
    for run in range(20):
        name = ("clean-perfect", "clean-swapped")[run % 2]
        with serving(CLEAN[name].engine(name)) as server:
            outcome = s1(server.url, plain_server.url, CLEAN_DELTA, seed_base=run * 100_000)
        print(f"run {run} {name}: {outcome.status}: {outcome.detail}")
        verdicts.append((name, outcome.status, outcome.detail[-160:]))
    assert all(status == "passed" for _, status, _ in verdicts), verdicts
    assert all("drafts accepted" in detail for _, _, detail in verdicts), verdicts


@pytest.mark.slow  # a pilot and two samples of 115: about 6 s
def test_top_k_wider_than_the_logprobs_runs_the_two_sample_test(plain_server):
    """With top-k 5 and 3 top_logprobs the plain distribution is not covered: S1 runs the
    two-sample test, says so and why, and passes on a clean server."""
    from pytest_onebit.peers.sampled_plants import CLEAN

    with serving(CLEAN["clean-swapped"].engine("clean-swapped")) as server:
        outcome = s1(server.url, plain_server.url, 0.5, top_k=5)
    assert outcome.status == "passed", outcome
    assert outcome.detail.startswith("two-sample (the one-sample test does not apply: ")
    assert "top-k is 5" in outcome.detail
