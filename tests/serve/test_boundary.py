"""The server's request boundary over HTTP, on a fabricated model (no download): every field
that would change the answer is honoured or refused by name in OpenAI's error JSON, the
answer-neutral ones change nothing, a prompt or budget past the context is OpenAI's
`context_length_exceeded`, and `--api-key` / `--cors-origin` guard the API as OpenAI's
clients and browsers expect. Refusals are read with urllib, so the error JSON's `param` and
`code` are checked, not only the status."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from pytest_onebit.peers.openai_client import Client, ServerError  # noqa: E402

CONTEXT = 64  # the fabricated model's context, small so that the limits are cheap to reach
KEY = "sk-onebit-test-key"
ORIGIN = "https://app.example"
CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
MESSAGES = [{"role": "user", "content": "hi"}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.fixture(scope="module")
def tiny():
    """The served contract's toy (a fabricated Qwen3 on the NumPy kernel, its ASCII
    tokenizer) with a context of CONTEXT positions."""
    from pytest_onebit.serve.toy import ServedToy

    return ServedToy(1, context=CONTEXT)


@pytest.fixture(scope="module")
def server(tiny):
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread

    with ServerThread(create_app(Engine(tiny, head="ngram"))) as running:
        yield running


@pytest.fixture(scope="module")
def guarded(tiny):
    """The same model behind `api_key=KEY`, callable from pages of ORIGIN."""
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread

    app = create_app(Engine(tiny, head="ngram"), api_key=KEY, cors_origins=(ORIGIN,))
    with ServerThread(app) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    return Client(server.url)


def call(url: str, path: str, body: dict | None = None, *, method: str | None = None,
         headers: dict | None = None) -> tuple[int, dict, dict]:
    """(status, decoded JSON body or {}, headers) of one request, an HTTP error included."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method or (
        "GET" if body is None else "POST"), headers={"Content-Type": "application/json",
                                                     **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            raw, status, got = response.read(), response.status, response.headers
    except urllib.error.HTTPError as error:
        raw, status, got = error.read(), error.code, error.headers
    try:
        decoded = json.loads(raw) if raw else {}
    except ValueError:
        decoded = {"raw": raw.decode("utf-8", "replace")}
    return status, decoded, {k.lower(): v for k, v in got.items()}


def refusal(url: str, path: str, body: dict, **options) -> tuple[int, dict]:
    """(status, the `error` object) of a request expected to be refused."""
    status, decoded, _ = call(url, path, body, **options)
    assert set(decoded) == {"error"}, decoded
    assert set(decoded["error"]) == {"message", "type", "param", "code"}
    return status, decoded["error"]


def greedy(client: Client, path: str, body: dict) -> dict:
    return client.post(path, {"temperature": 0, "max_tokens": 6, **body})


# -- fields ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path,fields,param", [
    (CHAT, {"temprature": 0}, "temprature"),
    (COMPLETIONS, {"max_completion_tokens": 4}, "max_completion_tokens"),
    (CHAT, {"ignore_eos": True}, "ignore_eos"),
    (CHAT, {"min_p": 0.1}, "min_p"),
    (COMPLETIONS, {"grammar": "root ::= \"a\""}, "grammar"),
    (CHAT, {"json_schema": SCHEMA}, "json_schema"),
    (CHAT, {"continue_final_message": True}, "continue_final_message"),
    (CHAT, {"add_generation_prompt": False}, "add_generation_prompt"),
    (CHAT, {"response_format": {"type": "json_object", "strict": True}},
     "response_format.strict"),
    (CHAT, {"response_format": {"type": "json_schema", "json_schema": {
        "name": "a", "schema": SCHEMA, "extra": 1}}}, "response_format.json_schema.extra"),
    (CHAT, {"stream": True, "stream_options": {"include_usage": True, "x": 1}},
     "stream_options.x"),
    (CHAT, {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]},
     "messages[0].content[0].type"),
    (CHAT, {"messages": [{"role": "user", "content": "a", "weight": 2}]}, "messages[0].weight"),
    (CHAT, {"messages": [*MESSAGES, {"role": "tool", "tool_call_id": "nope", "content": "x"}]},
     "messages[1].tool_call_id"),
])
def test_fields_that_would_change_the_answer_are_400_naming_them(server, path, fields, param):
    """Over HTTP an unknown field, an unserved knob (ignore_eos, min_p, llama.cpp's grammar
    and json_schema, vLLM's continue_final_message / add_generation_prompt), an unknown key
    inside response_format / stream_options / a message, an image part and tool calls are
    each a 400 whose error JSON names the field as `param`."""
    base = {"prompt": "x"} if path == COMPLETIONS else {"messages": MESSAGES}
    status, error = refusal(server.url, path, {**base, "max_tokens": 2, **fields})
    assert status == 400
    assert error["param"] == param and error["type"] == "invalid_request_error"


def test_answer_neutral_fields_change_nothing(client):
    """The documented answer-neutral fields (and unserved knobs at their "not used" value)
    are accepted, and the answer is the bare request's, token for token."""
    bare = greedy(client, CHAT, {"messages": MESSAGES})
    dressed = greedy(client, CHAT, {
        "messages": MESSAGES, "model": "anything", "user": "u-1", "metadata": {"run": "7"},
        "store": False, "service_tier": "auto", "parallel_tool_calls": False,
        "ignore_eos": False, "min_p": 0, "continue_final_message": False,
        "add_generation_prompt": True, "tool_choice": "none"})
    assert dressed["choices"][0]["token_ids"] == bare["choices"][0]["token_ids"]
    assert dressed["usage"] == bare["usage"]


def test_text_parts_are_the_text_joined_with_newlines(client):
    """A content list of text parts is answered as the one string of its parts joined with
    "\\n": same prompt tokens, same answer."""
    parts = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    joined = greedy(client, CHAT, {"messages": [{"role": "user", "content": "one\ntwo"}]})
    split = greedy(client, CHAT, {"messages": [{"role": "user", "content": parts}]})
    assert split["usage"] == joined["usage"]
    assert split["choices"][0]["token_ids"] == joined["choices"][0]["token_ids"]


def test_llama_cpp_schema_is_the_json_schema(client):
    """llama.cpp's `{"type": "json_object", "schema": S}` decodes as OpenAI's json_schema of S
    (the same constrained answer), not as any JSON object."""
    llama = greedy(client, CHAT, {"messages": MESSAGES, "max_tokens": 12, "response_format": {
        "type": "json_object", "schema": SCHEMA}})
    openai = greedy(client, CHAT, {"messages": MESSAGES, "max_tokens": 12, "response_format": {
        "type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": True}}})
    assert llama["choices"][0]["token_ids"] == openai["choices"][0]["token_ids"]
    assert llama["choices"][0]["message"]["content"].lstrip().startswith("{")


# -- the context ---------------------------------------------------------------------------------

def prompt_tokens(client: Client, path: str, base: dict) -> int:
    return greedy(client, path, {**base, "max_tokens": 1})["usage"]["prompt_tokens"]


@pytest.mark.parametrize("path,base,where", [
    (CHAT, {"messages": [{"role": "user", "content": "x" * 80}]}, "messages"),
    (COMPLETIONS, {"prompt": "x" * 80}, "prompt"),
])
def test_a_prompt_past_the_context_is_openais_error(server, path, base, where):
    """A prompt that leaves no room is a 400 with code context_length_exceeded, `param` the
    prompt's field, and OpenAI's own words (what LangChain and LiteLLM match)."""
    status, error = refusal(server.url, path, {**base, "max_tokens": 1})
    assert status == 400
    assert (error["param"], error["code"]) == (where, "context_length_exceeded")
    assert error["message"].startswith(f"This model's maximum context length is {CONTEXT} "
                                       f"tokens. However, your {where} resulted in ")
    assert error["message"].endswith(f"Please reduce the length of the {where}.")


@pytest.mark.parametrize("path,base,field,stream", [
    (CHAT, {"messages": MESSAGES}, "max_tokens", False),
    (CHAT, {"messages": MESSAGES}, "max_completion_tokens", False),
    (CHAT, {"messages": MESSAGES}, "max_tokens", True),
    (COMPLETIONS, {"prompt": "hello"}, "max_tokens", False),
])
def test_a_budget_past_the_room_is_refused_naming_both_numbers(client, server, path, base,
                                                                field, stream):
    """max_tokens (or max_completion_tokens) past what the context leaves is a 400 naming
    that field, code context_length_exceeded, in vLLM's words with the prompt's and the
    completion's tokens (streamed too, before the stream opens), where it used to be cut to
    the context without a word; exactly the room is served."""
    prompt = prompt_tokens(client, path, base)
    where = "messages" if path == CHAT else "prompt"
    for asked in (CONTEXT - prompt + 1, 10**12):
        status, error = refusal(server.url, path, {**base, field: asked, "stream": stream})
        assert status == 400
        assert (error["param"], error["code"]) == (field, "context_length_exceeded")
        assert error["message"] == (
            f"This model's maximum context length is {CONTEXT} tokens. However, you "
            f"requested {prompt + asked} tokens ({prompt} in the {where}, {asked} in the "
            f"completion). Please reduce the length of the {where} or completion.")
    fits = client.post(path, {**base, field: CONTEXT - prompt, "temperature": 0})
    assert len(fits["choices"][0]["token_ids"]) <= CONTEXT - prompt


def test_no_budget_still_means_until_the_context_is_full(client):
    """A chat with no max_tokens is not an error: it runs until the context is full (or the
    model ends its turn); completions' default of 16 is cut to the room, not refused."""
    body = client.post(CHAT, {"messages": MESSAGES, "temperature": 0})
    assert body["usage"]["total_tokens"] <= CONTEXT
    prompt = "y" * (CONTEXT - 6)  # 58 bytes: the room is under the default 16
    cut = client.post(COMPLETIONS, {"prompt": prompt, "temperature": 0})
    room = CONTEXT - cut["usage"]["prompt_tokens"]
    assert 0 < room < 16 and cut["usage"]["completion_tokens"] <= room


def test_the_batch_engines_room_is_the_slot_less_its_chunk(tiny):
    """In parallel a slot's room is its context less the widest verify past the answer: a
    budget past it is refused naming that room and where it comes from; within it, served."""
    from onebit.serve import Engine, RequestError, parse

    engine = Engine(tiny, head="ngram", parallel=1)
    real, engine.decoder.batch = engine.decoder.batch, SimpleNamespace(context=CONTEXT, chunk=16)
    request = parse("chat", {"messages": MESSAGES, "max_tokens": 9})  # the room reads no more
    with pytest.raises(RequestError) as caught:
        engine.budget(request, 40)
    assert (caught.value.param, caught.value.code) == ("max_tokens", "context_length_exceeded")
    assert str(caught.value).startswith(
        f"This model's maximum context length is {CONTEXT - 16} tokens here (a slot's "
        f"{CONTEXT} positions less 16 for the drafts past the answer). However, you "
        "requested 49 tokens (40 in the messages, 9 in the completion).")
    assert engine.budget(parse("chat", {"messages": MESSAGES, "max_tokens": 8}), 40) == 8
    assert engine.budget(parse("chat", {"messages": MESSAGES}), 40) == 8
    with pytest.raises(RequestError) as full:
        engine.budget(parse("chat", {"messages": MESSAGES}), CONTEXT - 16)
    assert (full.value.param, full.value.code) == ("messages", "context_length_exceeded")
    engine.decoder.batch = real
    engine.shutdown()


# -- --api-key and --cors-origin -------------------------------------------------------------------

@pytest.mark.parametrize("headers,path", [
    ({}, "/v1/models"),
    ({}, CHAT),
    ({"Authorization": "Bearer wrong"}, CHAT),
    ({"Authorization": f"Basic {KEY}"}, "/v1/models"),
    ({"Authorization": f"Bearer {KEY}x"}, COMPLETIONS),
])
def test_without_the_key_the_api_is_401(guarded, headers, path):
    """With an API key, a /v1 request without `Authorization: Bearer KEY` (none, another key,
    another scheme) is OpenAI's 401: invalid_request_error, code invalid_api_key."""
    body = None if path == "/v1/models" else {"messages": MESSAGES, "prompt": "x"}
    status, error = refusal(guarded.url, path, body, headers=headers)
    assert status == 401
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error", "invalid_api_key", None)
    assert KEY not in error["message"]


def test_with_the_key_the_api_answers_and_health_stays_open(guarded):
    """The right key (the scheme in any case) is served; /health and /metrics answer without
    one (what load balancers and scrapers poll)."""
    for scheme in ("Bearer", "bearer"):
        status, body, _ = call(guarded.url, CHAT, {"messages": MESSAGES, "max_tokens": 2},
                               headers={"Authorization": f"{scheme} {KEY}"})
        assert status == 200 and body["usage"]["completion_tokens"] <= 2
    assert call(guarded.url, "/health")[:2] == (200, {"status": "ok"})
    assert call(guarded.url, "/metrics")[0] == 200


def test_cors_preflight_and_headers(guarded, server):
    """With --cors-origin a browser's preflight (OPTIONS, no credentials) answers 200 for that
    origin, and even a 401 carries the header that lets the page read it; another origin gets
    no allow header; without --cors-origin OPTIONS stays a 405."""
    preflight = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type"}
    status, _, headers = call(guarded.url, CHAT, method="OPTIONS", headers=preflight)
    assert status == 200 and headers["access-control-allow-origin"] == ORIGIN
    assert "authorization" in headers["access-control-allow-headers"].lower()
    status, _, headers = call(guarded.url, "/v1/models", headers={"Origin": ORIGIN})
    assert status == 401 and headers["access-control-allow-origin"] == ORIGIN
    status, _, headers = call(guarded.url, CHAT, method="OPTIONS",
                              headers={**preflight, "Origin": "https://other.example"})
    assert status == 400 and "access-control-allow-origin" not in headers
    assert call(server.url, CHAT, method="OPTIONS", headers=preflight)[0] == 405


def test_the_serve_command_takes_the_key_and_origins(monkeypatch, capsys):
    """`--api-key` (default $ONEBIT_API_KEY) and repeatable `--cors-origin` parse; an empty
    key is refused by name before anything is served."""
    import argparse

    from onebit.cli import main
    from onebit.commands import serve

    def parser():
        return serve.add_parser(argparse.ArgumentParser().add_subparsers())

    monkeypatch.delenv(serve.API_KEY_ENV, raising=False)
    args = parser().parse_args(["--cors-origin", ORIGIN, "--cors-origin", "*"])
    assert (args.api_key, args.cors_origin) == (None, [ORIGIN, "*"])
    assert parser().parse_args(["--api-key", KEY]).api_key == KEY
    monkeypatch.setenv(serve.API_KEY_ENV, KEY)
    assert parser().parse_args([]).api_key == KEY
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--api-key", " "])
    assert stopped.value.code == 2 and "--api-key is empty" in capsys.readouterr().err


def test_server_error_carries_the_status(server):
    """The peer's client reports a refusal's status (what the other tests read raw)."""
    with pytest.raises(ServerError) as caught:
        Client(server.url).post(CHAT, {"messages": MESSAGES, "min_p": 0.5})
    assert caught.value.status == 400 and "min_p" in str(caught.value)
