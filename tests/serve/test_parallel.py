"""`onebit serve --parallel N` on SmolLM2: a real uvicorn server whose engine decodes up to N
requests in one pass of the model. Concurrent clients, streamed and not, greedy and
seeded-sampled, each get exactly the answer the same request gets alone; a full queue is a 429
with OpenAI's error JSON; `/metrics` is Prometheus text that counts what was served; hostile
bodies (invalid Unicode, JSON nested past reason, a body too large) are 4xx, never 5xx; and a
server stopped mid-answer lets the answer finish."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from pytest_onebit.peers.openai_client import Client, ServerError  # noqa: E402

PROMPTS = ["Give me three tips for sleeping better.", "Explain what a compiler does.",
           "Write a short poem about autumn leaves", "Say hi.", "Describe a cat.",
           "Why is the sky blue?"]


@pytest.fixture(scope="module")
def model():
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model

    skip_unless_cached("smollm2")
    return load_text_model(None, kernel="int8")


def _serve(model, **engine):
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread

    return ServerThread(create_app(Engine(model, **{"head": "ngram", **engine})))


@pytest.fixture(scope="module")
def server(model):
    with _serve(model, parallel=3, queue=8) as running:
        yield running


def _body(i: int) -> dict:
    sampled = {"temperature": 0.8, "seed": 100 + i} if i % 2 else {"temperature": 0}
    return {"messages": [{"role": "user", "content": PROMPTS[i]}], "max_tokens": 24,
            **sampled, "logprobs": True, "top_logprobs": 2}


def _ask(client: Client, i: int, stream: bool) -> tuple[list[int], list[float]]:
    if stream:  # each chunk carries the logprobs of its own text
        streamed = client.stream("/v1/chat/completions", _body(i))
        choices = [c for chunk in streamed.chunks for c in chunk.get("choices", [])]
        done = streamed.last["choices"][0]
    else:
        done = client.post("/v1/chat/completions", _body(i))["choices"][0]
        choices = [done]
    logprobs = [e["logprob"] for c in choices
                for e in (c.get("logprobs") or {}).get("content", [])]
    return done["token_ids"], logprobs


def test_concurrent_clients_each_get_their_answer_alone(server):
    """Six clients at once on three slots (three wait for a slot), staggered, streamed and not,
    greedy and seeded-sampled: each answer's token ids and log-probabilities equal the same
    request's sent alone to the idle server."""
    client = Client(server.url)
    alone = [_ask(client, i, stream=False) for i in range(len(PROMPTS))]
    got: list = [None] * len(PROMPTS)

    def ask(i: int) -> None:
        time.sleep(0.05 * i)
        got[i] = _ask(client, i, stream=i % 3 == 0)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for i, (ids, logprobs) in enumerate(got):
        assert ids == alone[i][0], PROMPTS[i]
        assert logprobs == alone[i][1], PROMPTS[i]


def test_metrics_are_prometheus_text_that_count_what_was_served(server):
    """/metrics parses as Prometheus text; after one more request of 5 tokens the tokens and
    finished counters rose by exactly that, and the gauges say nothing waits or runs."""
    from prometheus_client.parser import text_string_to_metric_families

    def scrape() -> dict[str, float]:
        with urllib.request.urlopen(server.url + "/metrics", timeout=30) as response:
            text = response.read().decode()
        return {s.name: s.value for f in text_string_to_metric_families(text)
                for s in f.samples}

    before = scrape()
    Client(server.url).post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 5,
                                                 "temperature": 0})
    after = scrape()
    assert after["onebit_tokens_total"] - before["onebit_tokens_total"] == 5
    assert after["onebit_finished_total"] - before["onebit_finished_total"] == 1
    assert after["onebit_queue_depth"] == 0 and after["onebit_running"] == 0
    assert after["onebit_slots"] == 3 and after["onebit_passes_total"] > 0


@pytest.mark.parametrize("data, status, param", [
    (json.dumps({"prompt": "a\ud800b"}).encode(), 400, "prompt"),
    (json.dumps({"messages": [{"role": "user", "content": "x\udfffy"}]}).encode(), 400,
     "messages[0].content"),
    (b"[" * 100_000 + b"]" * 100_000, 400, None),
])
def test_hostile_bodies_are_4xx_naming_what_is_wrong(server, data, status, param):
    """A lone surrogate in a text field is a 400 naming the field; JSON nested 100 000 deep a
    400: each with OpenAI's error JSON, and the server serves on."""
    path = "/v1/chat/completions" if b"messages" in data else "/v1/completions"
    request = urllib.request.Request(server.url + path, data=data,
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)
    assert caught.value.code == status
    error = json.loads(caught.value.read())["error"]
    assert error["param"] == param and error["message"]
    assert Client(server.url).get("/health") == {"status": "ok"}


def test_a_body_past_the_limit_is_a_413_before_it_is_read(server):
    """A request that declares a 9 MB body gets a 413 with OpenAI's error JSON at once: the
    server does not read (or hold) what it will refuse."""
    import http.client

    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    conn.putrequest("POST", "/v1/completions")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(9 << 20))
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 413
    assert "at most" in json.loads(response.read())["error"]["message"]
    conn.close()


def test_a_full_queue_is_a_429_and_a_stop_lets_answers_finish(model):
    """One slot and no queue: while an answer runs, a second request gets a 429 with OpenAI's
    error JSON (code queue_full) and /metrics counts the refusal; stopping the server while the
    answer runs lets it finish whole, and the engine then refuses new work."""
    server = _serve(model, parallel=1, queue=0).start()
    client = Client(server.url)
    done: dict = {}

    def long_answer() -> None:
        done["body"] = client.post("/v1/completions", {"prompt": "List forty animals:",
                                                        "max_tokens": 120, "temperature": 0})

    runner = threading.Thread(target=long_answer)
    runner.start()
    deadline = time.monotonic() + 60
    while "onebit_running 1.0" not in urllib.request.urlopen(
            server.url + "/metrics", timeout=30).read().decode():
        assert time.monotonic() < deadline, "the first answer never started"
        time.sleep(0.02)
    with pytest.raises(ServerError) as caught:
        client.post("/v1/completions", {"prompt": "Hi", "max_tokens": 2})
    assert caught.value.status == 429 and "at capacity" in str(caught.value)
    metrics = urllib.request.urlopen(server.url + "/metrics", timeout=30).read().decode()
    assert "onebit_refused_total 1.0" in metrics
    server.stop()
    runner.join(timeout=120)
    choice = done["body"]["choices"][0]
    assert choice["finish_reason"] in ("stop", "length"), choice["finish_reason"]
    assert len(choice["token_ids"]) == 120 or choice["token_ids"][-1] == 2
