"""onebit serve over HTTP on SmolLM2: a real uvicorn server on a free 127.0.0.1 port in a
thread (stopped however the test ends), spoken to with the peer's urllib client."""

from __future__ import annotations

import json
import urllib.request

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from pytest_onebit.peers.openai_client import Client, ServerError  # noqa: E402

PROMPT = "A: hello\nB: hello\nA: hello\nB: hello\nA:"


@pytest.fixture(scope="module")
def server():
    from onebit.hub import skip_unless_cached
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread
    from onebit.text.load import load_text_model

    skip_unless_cached("smollm2")
    with ServerThread(create_app(Engine(load_text_model(None, kernel="int8"),
                                                     head="ngram"))) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    return Client(server.url)


def test_health_and_models(client):
    """GET /health answers ok; GET /v1/models lists the one served model."""
    assert client.get("/health") == {"status": "ok"}
    listed = client.get("/v1/models")
    assert listed["object"] == "list" and len(listed["data"]) == 1


def test_completion_usage_finish_reason_and_ids(client):
    """max_tokens ends with "length" and exactly that many ids; a stop ends with "stop", the
    text before it; usage counts the ids; the `onebit` field says drafts were accepted."""
    body = client.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 6,
                                            "temperature": 0})
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length" and len(choice["token_ids"]) == 6
    assert body["usage"]["completion_tokens"] == 6
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 6
    assert body["onebit"]["accepted"] > 0
    stopped = client.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 12,
                                               "temperature": 0, "stop": "B:"})
    assert stopped["choices"][0]["finish_reason"] == "stop"
    assert stopped["choices"][0]["text"] == " hello\n"


def test_logprobs_shapes(client):
    """Completions' logprobs: N give token strings, logprobs and N alternatives per token;
    chat's logprobs + top_logprobs give OpenAI's content list; both line up with the ids, and
    the chosen greedy token is the likeliest alternative."""
    c = client.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 4, "temperature": 0,
                                         "logprobs": 2})["choices"][0]
    lp = c["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(c["token_ids"]) == 4
    assert all(len(top) <= 2 for top in lp["top_logprobs"])
    assert all(v <= 0 for v in lp["token_logprobs"])
    chat = client.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4,
        "temperature": 0, "logprobs": True, "top_logprobs": 2})["choices"][0]
    content = chat["logprobs"]["content"]
    assert len(content) == len(chat["token_ids"])
    assert all(e["logprob"] == e["top_logprobs"][0]["logprob"] for e in content)


def test_streams_are_sse_ending_in_done(server):
    """A streamed chat opens with the assistant's role, sends `data:` chunks, then the
    finish_reason with the ids, the usage chunk when asked, and `data: [DONE]`."""
    request = urllib.request.Request(server.url + "/v1/chat/completions", data=json.dumps({
        "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 5,
        "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line.decode().strip() for line in response if line.strip()]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["usage"]["completion_tokens"] == 5 and chunks[-1]["choices"] == []
    assert len(chunks[-2]["choices"][0]["token_ids"]) == 5


@pytest.mark.parametrize("path,body,param", [
    ("/v1/completions", {"prompt": "x", "max_tokens": -1}, "max_tokens"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": 3}]},
     "messages[0].content"),
    ("/v1/completions", {"prompt": "x " * 9000, "max_tokens": 1}, "prompt"),
])
def test_bad_requests_are_400_naming_the_field(client, path, body, param):
    """Over HTTP a bad field is a 400 whose error JSON names it (a prompt past the context
    too, before any decode)."""
    with pytest.raises(ServerError) as caught:
        client.post(path, body)
    assert caught.value.status == 400
    assert param.split("[")[0] in str(caught.value)


def test_not_json_and_wrong_route(server):
    """A body that is not JSON is a 400; an unknown route a 404, both as error JSON."""
    for path, data, status in (("/v1/completions", b"{nope", 400), ("/v2/x", b"{}", 404)):
        request = urllib.request.Request(server.url + path, data=data)
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=30)
        assert caught.value.code == status
        assert "error" in json.loads(caught.value.read())
