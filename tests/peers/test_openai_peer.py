"""`onebit peer openai` against real servers: onebit serve on SmolLM2 in a thread on a free
127.0.0.1 port, clean and with each planted fault (pytest_onebit.peers.openai_plants). The
clean server passes every check (exit 0); each plant fails the check made for it (exit 1,
naming it); a server that is not there is exit 2 with the reason."""

from __future__ import annotations

import json
import socket

import pytest

from onebit.cli import main

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def smollm2():
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model

    skip_unless_cached("smollm2")
    return load_text_model(None, kernel="int8")


def serving(engine):
    from onebit.serve import create_app
    from onebit.serve.server import ServerThread

    return ServerThread(create_app(engine))


def peer(capsys, url: str, *extra: str) -> tuple[int, dict]:
    status = main(["peer", "openai", "--url", url, "--format", "json", *extra])
    return status, json.loads(capsys.readouterr().out)


# a real onebit serve held by every peer check end to end (13 s); the planted faults stay in line 2
@pytest.mark.slow
def test_clean_server_passes_every_check(smollm2, capsys):
    """onebit serve with prompt lookup equals its own plain decode on every check, both
    endpoints (S1 is opt-in and not applicable without --sampled): exit 0."""
    from onebit.serve import Engine

    with serving(Engine(smollm2, head="ngram")) as server:
        status, report = peer(capsys, server.url)
    assert status == 0, report
    for check, cell in report["checks"].items():
        want = "not applicable" if check == "S1-distribution" else "passed"
        assert cell["status"] == want, (check, cell)
    # speculation really ran: drafts were accepted on the text the checks compare
    assert "drafts accepted" in report["checks"]["I1-text"]["arms"]["completions"]["detail"]


@pytest.mark.slow  # every check again on a second server: README line 2's four minutes
def test_clean_parallel_server_passes_every_check(smollm2, capsys):
    """onebit serve decoding four requests at once (the batch engine, prompt lookup per
    sequence) passes every check too, C1 and C2 (eight staggered clients, streamed and not,
    greedy and seeded-sampled) included: exit 0."""
    from onebit.serve import Engine

    with serving(Engine(smollm2, head="ngram", parallel=4)) as server:
        status, report = peer(capsys, server.url)
    assert status == 0, report
    for check, cell in report["checks"].items():
        want = "not applicable" if check == "S1-distribution" else "passed"
        assert cell["status"] == want, (check, cell)


@pytest.mark.parametrize("plant", ["stop-in-block", "eos-in-block", "stop-uncut", "budget",
                                   "logprobs", "accept-one-more", "batch-swap",
                                   "knobs-on-steps"])
def test_each_planted_fault_fails_its_check(smollm2, capsys, plant):
    """A server with one planted fault fails the check made to catch it (exit 1, the check
    named failed in the report and on the closing line). Only that check runs, on one
    endpoint (completions; chat for I10-eos, which needs a conversation), to keep the test
    short; the clean run above passes it."""
    from pytest_onebit.peers.openai_plants import PLANTS

    engine_class, check = PLANTS[plant]
    arm = "chat" if check == "I10-eos" else "completions"
    with serving(engine_class(smollm2, head="ngram")) as server:
        status, report = peer(capsys, server.url, "--check", check, "--arm", arm)
    cell = report["checks"][check]
    assert status == 1, report
    assert cell["status"] == "failed", cell
    assert cell["arms"][arm]["detail"], cell


@pytest.mark.slow  # a second budget-plant server: the same requests as its case above
def test_a_plant_declared_as_expected_is_xfail_not_failed(smollm2, capsys):
    """`--expect-fail CHECK=REASON` works for the served peer as for the others: the planted
    budget overshoot declared is reported xfail, and the run exits 0."""
    from pytest_onebit.peers.openai_plants import BudgetEngine

    with serving(BudgetEngine(smollm2, head="ngram")) as server:
        status, report = peer(capsys, server.url, "--check", "I9-budget", "--arm",
                              "completions", "--expect-fail", "I9-budget=planted overshoot")
    assert report["checks"]["I9-budget"]["status"] == "xfail"
    assert status == 0, report


def test_unreachable_server_is_exit_2_with_the_reason(capsys):
    """Nothing listening at the URL: exit 2, and stderr says it could not reach it and why."""
    with socket.socket() as probe:  # a port that was free a moment ago, now closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status = main(["peer", "openai", "--url", f"http://127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert status == 2
    assert "cannot reach the server" in err and str(port) in err


def test_openai_options_are_checked(capsys):
    """--url is required with openai and refused elsewhere; an unknown --check is bad input
    naming the known ones."""
    assert main(["peer", "openai"]) == 2
    assert "needs --url" in capsys.readouterr().err
    assert main(["peer", "llama_cpp", "--url", "http://127.0.0.1:1"]) == 2
    assert "for the openai peer" in capsys.readouterr().err
    assert main(["peer", "openai", "--url", "http://127.0.0.1:1", "--check", "I99"]) == 2
    assert "unknown openai peer check 'I99'" in capsys.readouterr().err
    assert main(["peer", "openai", "--url", "http://127.0.0.1:1", "--field", "nokey"]) == 2
    assert "--field wants KEY=VALUE, got 'nokey'" in capsys.readouterr().err
    assert main(["peer", "transformers", "--field", "a=1"]) == 2


def test_fields_are_json_or_strings():
    """`--field KEY=JSON`: a JSON value is sent as that value, anything else as a string."""
    from pytest_onebit.peers.openai_client import parse_fields

    assert parse_fields(["return_token_ids=true", "n=3", "tag=abc", "x={\"a\": [1]}"]) == {
        "return_token_ids": True, "n": 3, "tag": "abc", "x": {"a": [1]}}


@pytest.mark.slow
def test_sampled_distribution_matches_plain(smollm2, capsys):
    """S1 (opt-in): the first two of four sampled tokens (temperature 0.7, top-k 2; the second
    a prompt-lookup draft judged by the acceptance test) are distributed with speculation as
    plain sampling's, by the one-sample test against the server's own top_logprobs (which
    cover top-k 2) at TV 0.25, and the server drafted."""
    from onebit.serve import Engine

    with serving(Engine(smollm2, head="ngram")) as server:
        status, report = peer(capsys, server.url, "--check", "S1-distribution", "--arm",
                              "completions", "--sampled", "--delta", "0.25")
    assert status == 0, report
    cell = report["checks"]["S1-distribution"]
    assert cell["status"] == "passed", cell
    assert cell["arms"]["completions"]["detail"].startswith("one-sample")
    assert "drafts accepted" in cell["arms"]["completions"]["detail"]


@pytest.mark.slow
def test_sampled_plant_fails_S1(smollm2, capsys):
    """A served loop that accepts a draft with probability min(1, q/p), the ratio upside
    down, accepts every prompt-lookup draft: the drafted second token (" heads", about 1 in
    6 under plain sampling) takes all the mass, and S1's one-sample test at TV 0.25 fails."""
    from pytest_onebit.peers.openai_plants import PLANTS

    engine_class, check = PLANTS["ratio-inverted"]
    with serving(engine_class(smollm2, head="ngram")) as server:
        status, report = peer(capsys, server.url, "--check", check, "--arm", "completions",
                              "--sampled", "--delta", "0.25")
    cell = report["checks"][check]
    assert status == 1, report
    assert cell["status"] == "failed", cell
    assert cell["arms"]["completions"]["detail"].startswith("one-sample: ")


def test_a_json_answer_the_budget_cut_is_judged_by_where_it_got():
    """N4's response_format case: an answer the budget cut (finish_reason "length") is not a
    whole JSON value, so it is judged by whether it is still inside the schema (llama-server
    spaces its keys on lines of their own and can run past a small budget: not a finding),
    and an answer that left the schema before the cut is one."""
    from pytest_onebit.peers.openai_peer import _cut, _cut_outside

    def answer(text: str, finish: str = "length") -> dict:
        return {"choices": [{"message": {"content": text}, "finish_reason": finish}]}

    inside = answer('{\n    "city": "Santabaracia",\n    "country": "Santabaracia"')
    outside = answer("Sure! The city is Paris, in France, which")
    assert _cut(inside, answer("{}", "stop")) and not _cut(answer("{}", "stop"))
    assert _cut_outside(inside, inside) is None
    why = _cut_outside(inside, outside)
    assert why is not None and why.startswith("the plain answer 'Sure!")
