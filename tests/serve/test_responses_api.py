"""OpenAI's Responses API (`/v1/responses`) over HTTP on the served contract's toy model, one
request at a time and three at once: the answer is the same decode as the same messages sent
to `/v1/chat/completions`, streamed as OpenAI's event sequence, parsed by the real openai
client, continued with `previous_response_id`, and every bad field a 400 naming its path."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

#: a schema whose JSON the toy's random weights complete within the budget: bounded values,
#: and llguidance's compact whitespace (else a random model pads with whitespace for ever)
SCHEMA = {"type": "object", "properties": {
    "ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 99},
    "word": {"type": "string", "maxLength": 8}},
    "required": ["ok", "n", "word"], "additionalProperties": False,
    "x-guidance": {"whitespace_flexible": False}}
STREAM_HEAD = ["response.created", "response.in_progress", "response.output_item.added",
               "response.content_part.added"]
STREAM_TAIL = ["response.output_text.done", "response.content_part.done",
               "response.output_item.done"]
#: a function's arguments the toy completes: bounded values, compact whitespace
WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 8},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"], "additionalProperties": False,
    "x-guidance": {"whitespace_flexible": False}}
TOOLS = [{"type": "function", "name": "get_weather", "description": "The weather in a city",
          "parameters": WEATHER, "strict": True}]
CHAT_TOOLS = [{"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}
              for tool in TOOLS]
NAMED = {"type": "function", "name": "get_weather"}
ASK = "What is the weather in Paris?"
CALL_EVENTS = ["response.output_item.added", "response.function_call_arguments.delta",
               "response.function_call_arguments.done", "response.output_item.done"]


@pytest.fixture(scope="module", params=[None, 3], ids=["one-at-a-time", "parallel-3"])
def url(request):
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread
    from pytest_onebit.serve.toy import ServedToy

    parallel = request.param
    engine = Engine(ServedToy(parallel or 1), head="ngram", parallel=parallel)
    with ServerThread(create_app(engine)) as server:
        yield server.url


@pytest.fixture(scope="module")
def wide():
    """The toy served one request at a time with a context wide enough for the tools block
    (its default 512 positions hold none)."""
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread
    from pytest_onebit.serve.toy import ServedToy

    with ServerThread(create_app(Engine(ServedToy(1, context=2048), head="ngram"))) as server:
        yield server.url


def _call(url: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """(status, decoded JSON) of a POST (a GET without a body), errors included."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _create(url: str, **body) -> dict:
    status, answer = _call(url, "/v1/responses", {"temperature": 0, **body})
    assert status == 200, answer
    return answer


def _events(url: str, **body) -> list[tuple[str, dict]]:
    """A streamed response's events as (the `event:` name, the decoded `data:`)."""
    request = urllib.request.Request(
        url + "/v1/responses", data=json.dumps({"temperature": 0, "stream": True,
                                                **body}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = response.read().decode()
    events = []
    for block in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        assert set(lines) == {"event", "data"}, block
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def _chat(url: str, messages: list[dict], max_tokens: int, **fields) -> dict:
    status, answer = _call(url, "/v1/chat/completions", {
        "messages": messages, "max_tokens": max_tokens, "temperature": 0, **fields})
    assert status == 200, answer
    return answer["choices"][0]


def _text(response: dict) -> str:
    (item,) = response["output"]
    (part,) = item["content"]
    return part["text"]


def _valid(response: dict) -> None:
    """The body parses as the openai package's own `Response`, validated (not merely
    constructed), and carries no `output_text` (an SDK property, not a wire field)."""
    from openai.types.responses import Response

    Response.model_validate(response)
    assert "output_text" not in response


def test_the_answer_is_the_same_decode_as_chat(url):
    """A string input, and a list of items (the easy message form, the typed form with
    input_text parts, a developer message) with instructions, answer exactly what
    /v1/chat/completions answers for the same messages (instructions first as a system
    message, developer rendered as system): one decode, two wire formats. The body parses
    as openai's `Response` and its usage counts the chat's tokens."""
    plain = _create(url, input="Say hi.", max_output_tokens=10)
    chat = _chat(url, [{"role": "user", "content": "Say hi."}], 10)
    assert _text(plain) == chat["message"]["content"]
    assert plain["usage"]["output_tokens"] == len(chat["token_ids"]) == 10
    _valid(plain)
    items = [{"role": "developer", "content": "Be brief."},
             {"type": "message", "role": "user",
              "content": [{"type": "input_text", "text": "Name a colour."},
                          {"type": "input_text", "text": "One word."}]}]
    listed = _create(url, input=items, instructions="You are terse.", max_output_tokens=9)
    chat = _chat(url, [{"role": "system", "content": "You are terse."},
                       {"role": "system", "content": "Be brief."},
                       {"role": "user", "content": "Name a colour.\nOne word."}], 9)
    assert _text(listed) == chat["message"]["content"]
    assert listed["instructions"] == "You are terse." and listed["object"] == "response"
    assert listed["id"].startswith("resp_") and listed["output"][0]["id"].startswith("msg_")
    _valid(listed)


def test_stream_is_the_documented_event_sequence(url):
    """A streamed response is exactly created, in_progress, output_item.added,
    content_part.added, one or more output_text.delta, output_text.done, content_part.done,
    output_item.done, then incomplete (the budget ended it), every event typed as its
    `event:` line with a sequence_number counting from 0, no `[DONE]`; the deltas joined are
    the done text, the final response's text, and the non-streamed answer's; every event
    validates as the openai package's `ResponseStreamEvent`."""
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    events = _events(url, input="Tell me a story.", max_output_tokens=24)
    names = [name for name, _ in events]
    deltas = names.count("response.output_text.delta")
    assert deltas >= 1
    assert names == (STREAM_HEAD + ["response.output_text.delta"] * deltas + STREAM_TAIL
                     + ["response.incomplete"])
    assert all(data["type"] == name for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    adapter = TypeAdapter(ResponseStreamEvent)
    for _, data in events:
        adapter.validate_python(data)
    joined = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    final = events[-1][1]["response"]
    assert joined == events[-4][1]["text"] == _text(final)
    assert joined == _text(_create(url, input="Tell me a story.", max_output_tokens=24))
    assert final["status"] == "incomplete" and final["usage"]["output_tokens"] == 24
    item_ids = {d["item_id"] for _, d in events if "item_id" in d}
    assert item_ids == {final["output"][0]["id"]}
    _valid(final)


def test_openai_client_parses_whole_and_streamed_answers(url):
    """The real openai package: `client.responses.create` parses the whole answer (its
    `output_text` is the chat answer's text), streamed with `stream=True` its events, and
    its `responses.stream` helper, which rebuilds the response from the events and checks
    their order, ends with the text the whole answer has."""
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="x")
    whole = client.responses.create(model="toy", input="Say hi.", max_output_tokens=10,
                                    temperature=0)
    expected = _chat(url, [{"role": "user", "content": "Say hi."}], 10)["message"]["content"]
    assert isinstance(whole, openai.types.responses.Response)
    assert whole.output_text == expected and whole.status == "incomplete"
    assert whole.incomplete_details.reason == "max_output_tokens"
    streamed = list(client.responses.create(model="toy", input="Say hi.",
                                            max_output_tokens=10, temperature=0,
                                            stream=True))
    assert streamed[0].type == "response.created"
    assert streamed[-1].type == "response.incomplete"
    assert "".join(e.delta for e in streamed if e.type == "response.output_text.delta") \
        == expected
    # the helper's get_final_response wants response.completed (an incomplete stream, as
    # OpenAI sends it, is not taken yet: openai-python PR #3538), so an answer that closes
    fmt = {"type": "json_schema", "name": "thing", "schema": SCHEMA}
    with client.responses.stream(model="toy", input="A thing.", max_output_tokens=80,
                                 temperature=0, text={"format": fmt}) as stream:
        final = stream.get_final_response()
    assert final.status == "completed"
    assert final.output_text == _text(_create(url, input="A thing.", max_output_tokens=80,
                                              text={"format": fmt}))


def test_previous_response_id_continues_the_conversation(url):
    """A response continued by `previous_response_id` answers what chat answers for [the
    first input, the first answer as the assistant's turn, the second input]: the stored
    conversation comes first. The first is streamed, so a streamed answer is kept too; an
    earlier response's instructions are not carried over (as OpenAI's are not)."""
    events = _events(url, input="Pick a number.", instructions="Be odd.",
                     max_output_tokens=8)
    first = events[-1][1]["response"]
    second = _create(url, input="Double it.", previous_response_id=first["id"],
                     max_output_tokens=8)
    chat = _chat(url, [{"role": "user", "content": "Pick a number."},
                       {"role": "assistant", "content": _text(first)},
                       {"role": "user", "content": "Double it."}], 8)
    assert _text(second) == chat["message"]["content"]
    assert second["previous_response_id"] == first["id"]
    third = _create(url, input=[{"role": "user", "content": "Again."}],
                    previous_response_id=second["id"], max_output_tokens=8)
    chat = _chat(url, [{"role": "user", "content": "Pick a number."},
                       {"role": "assistant", "content": _text(first)},
                       {"role": "user", "content": "Double it."},
                       {"role": "assistant", "content": _text(second)},
                       {"role": "user", "content": "Again."}], 8)
    assert _text(third) == chat["message"]["content"]


def test_output_items_sent_back_as_input_continue_the_conversation(url):
    """A client that keeps the conversation itself (as the Agents SDK's `to_input_list`
    does) sends an earlier response's output item back verbatim (its id, status, and
    output_text part with annotations) between its own messages: the answer is chat's for
    [the input, the answer as the assistant's turn, the next input], with store off."""
    first = _create(url, input="Pick a colour.", max_output_tokens=8, store=False)
    sent_back = [{"role": "user", "content": "Pick a colour."}, *first["output"],
                 {"role": "user", "content": "Another."}]
    second = _create(url, input=sent_back, max_output_tokens=8, store=False)
    chat = _chat(url, [{"role": "user", "content": "Pick a colour."},
                       {"role": "assistant", "content": _text(first)},
                       {"role": "user", "content": "Another."}], 8)
    assert _text(second) == chat["message"]["content"]


def test_store_false_is_not_kept(url):
    """With `store: false` the response is answered and not kept: continuing it is a 404 in
    OpenAI's error JSON naming previous_response_id (OpenAI's message), and GET is a 404."""
    gone = _create(url, input="Hi.", max_output_tokens=4, store=False)
    assert gone["store"] is False
    status, error = _call(url, "/v1/responses", {"input": "More.", "max_output_tokens": 4,
                                                 "previous_response_id": gone["id"]})
    assert status == 404
    assert error["error"]["param"] == "previous_response_id"
    assert error["error"]["message"] == f"Previous response with id '{gone['id']}' not found."
    assert _call(url, f"/v1/responses/{gone['id']}")[0] == 404


def test_max_output_tokens_reached_is_incomplete(url):
    """An answer the budget ends is status "incomplete" with incomplete_details.reason
    "max_output_tokens", its message item "incomplete", exactly that many output tokens; an
    answer that ends by itself (a JSON schema closes it) is "completed" with no details."""
    cut = _create(url, input="Count to a hundred.", max_output_tokens=5)
    assert cut["status"] == "incomplete"
    assert cut["incomplete_details"] == {"reason": "max_output_tokens"}
    assert cut["output"][0]["status"] == "incomplete"
    assert cut["usage"]["output_tokens"] == 5 and cut["max_output_tokens"] == 5
    done = _create(url, input="JSON please.", max_output_tokens=80, text={"format": {
        "type": "json_schema", "name": "thing", "schema": SCHEMA}})
    assert done["status"] == "completed" and done["incomplete_details"] is None
    assert done["output"][0]["status"] == "completed"


def test_text_format_json_schema_answers_conforming_json(url):
    """`text.format` json_schema is chat's response_format grammar: the answer is JSON that
    validates against the schema (jsonschema), the same as chat's response_format answer,
    and the response repeats the format; json_object answers a JSON object."""
    import jsonschema

    fmt = {"type": "json_schema", "name": "thing", "schema": SCHEMA, "strict": True}
    answer = _create(url, input="Make up a thing.", max_output_tokens=80,
                     text={"format": fmt})
    value = json.loads(_text(answer))
    jsonschema.validate(value, SCHEMA)
    chat = _chat(url, [{"role": "user", "content": "Make up a thing."}], 80,
                 response_format={"type": "json_schema", "json_schema": {
                     "name": "thing", "schema": SCHEMA, "strict": True}})
    assert _text(answer) == chat["message"]["content"]
    assert answer["text"] == {"format": fmt}
    _valid(answer)
    loose = _create(url, input="An object.", max_output_tokens=40,
                    text={"format": {"type": "json_object"}})
    assert _text(loose).startswith("{")


@pytest.mark.parametrize("body, param", [
    ({"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "https://example.com/a.png"}]}]},
     "input[0].content[1].type"),
    ({"input": [{"role": "user", "content": "x"}, {"type": "reasoning", "summary": []}]},
     "input[1].type"),
    ({"input": [{"role": "user", "content": "x"},
                {"type": "function_call_output", "call_id": "c", "output": "1"}]},
     "input[1].call_id"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]},
     "input[0].arguments"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
     "input[0].content[0].type"),
    ({"input": "x", "seed": 3}, "seed"),
    ({"input": "x", "temprature": 0}, "temprature"),
    ({"input": "x", "max_output_tokens": "12"}, "max_output_tokens"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "max_output_tokens": 100000}, "max_output_tokens"),
    ({"input": "x" * 3000, "max_output_tokens": 4}, "input"),
    ({"input": 3}, "input"),
    ({}, "input"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
    ({"input": [{"role": "user", "content": "x", "name": "me"}]}, "input[0].name"),
    ({"input": "x", "temperature": 3}, "temperature"),
    ({"input": "x", "instructions": 7}, "instructions"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": "x", "tools": [{"type": "function", "name": "a b"}]}, "tools[0].name"),
    ({"input": "x", "tools": [{"type": "function", "name": "f",
                               "function": {"name": "f"}}]}, "tools[0].function"),
    ({"input": "x", "tools": [{"type": "function", "name": "f",
                               "parameters": {"type": "string"}}]}, "tools[0].parameters"),
    ({"input": "x", "tool_choice": "required"}, "tool_choice"),
    ({"input": "x", "tools": TOOLS, "tool_choice": {"type": "file_search"}},
     "tool_choice.type"),
    ({"input": "x", "tools": TOOLS, "tool_choice": {"type": "function", "name": "nope"}},
     "tool_choice"),
    ({"input": "x", "truncation": "auto"}, "truncation"),
    ({"input": "x", "reasoning": {"effort": "high"}}, "reasoning"),
    ({"input": "x", "include": ["message.output_text.logprobs"]}, "include"),
    ({"input": "x", "metadata": {"k": 1}}, "metadata"),
    ({"input": "x", "store": "yes"}, "store"),
    ({"input": "x", "text": {"format": {"type": "xml"}}}, "text.format.type"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "schema": SCHEMA}}},
     "text.format.name"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "a",
                                       "schema": {"type": "nonsense-type"}}}},
     "text.format.schema"),
    ({"input": "x", "text": {"format": {"type": "text", "strict": True}}},
     "text.format.strict"),
    ({"input": "x", "text": {"verbosity": "high"}}, "text.verbosity"),
])
@pytest.mark.parametrize("stream", [False, True])
def test_bad_requests_are_400_naming_the_path(url, body, param, stream):
    """An input_image or input_file part, a reasoning item, a function_call_output that
    answers no call, an unknown field (`seed` is chat's, not the Responses API's), a wrong
    type or range, a budget or an input past the context, a tool that is not a function (or
    a bad one, or chat's nested form), a tool_choice that is not a function of the tools,
    and a bad text.format are each a 400 in OpenAI's error JSON whose param
    names the Responses field by its path (never the chat field it maps to), streamed or
    not (before any event)."""
    status, error = _call(url, "/v1/responses", {**body, "stream": stream})
    assert status == 400, error
    assert error["error"]["param"] == param, error
    assert error["error"]["type"] == "invalid_request_error"
    assert "max_tokens" not in error["error"]["message"]
    assert "response_format" not in error["error"]["message"]


def test_get_returns_a_stored_response(url):
    """GET /v1/responses/{id} returns the stored response exactly as it was answered, and
    openai's `responses.retrieve` parses it; an unknown id is a 404 in OpenAI's error
    JSON."""
    import openai

    answer = _create(url, input="Hello.", max_output_tokens=6, metadata={"run": "7"})
    status, got = _call(url, f"/v1/responses/{answer['id']}")
    assert status == 200 and got == answer
    client = openai.OpenAI(base_url=url + "/v1", api_key="x")
    assert client.responses.retrieve(answer["id"]).output_text == _text(answer)
    assert client.responses.retrieve(answer["id"]).metadata == {"run": "7"}
    status, error = _call(url, "/v1/responses/resp_nope")
    assert status == 404 and "resp_nope" in error["error"]["message"]


def test_a_fault_in_the_decode_is_a_500_or_a_failed_event():
    """A fault in the decode is a 500 in OpenAI's error JSON when not streamed; streamed
    (the 200 already sent) the events end with response.failed whose response has status
    "failed" and a server_error, which the openai package's event type validates; nothing
    is kept, and the server keeps serving."""
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread
    from pytest_onebit.serve.toy import ServedToy

    def broken(*_args, **_kwargs):
        raise RuntimeError("a planted fault")

    with ServerThread(create_app(Engine(ServedToy(1), head="ngram", run=broken))) as server:
        status, error = _call(server.url, "/v1/responses", {"input": "x",
                                                            "max_output_tokens": 4})
        assert status == 500 and error["error"]["type"] == "server_error"
        events = _events(server.url, input="x", max_output_tokens=4)
        assert [name for name, _ in events] == STREAM_HEAD + ["response.failed"]
        failed = events[-1][1]["response"]
        assert failed["status"] == "failed" and failed["error"]["code"] == "server_error"
        assert "a planted fault" in failed["error"]["message"]
        TypeAdapter(ResponseStreamEvent).validate_python(events[-1][1])
        assert _call(server.url, f"/v1/responses/{failed['id']}")[0] == 404
        assert _call(server.url, "/health")[1] == {"status": "ok"}


def test_store_is_bounded_oldest_first_out():
    """The store keeps at most `limit` responses and `max_chars` characters of conversation,
    dropping the oldest first (the newest one is always kept)."""
    from onebit.serve.responses_api import ResponseStore

    store = ResponseStore(limit=2, max_chars=100)

    def put(name: str, chars: int) -> None:
        store.put({"id": name}, [{"role": "user", "content": "x" * chars}])

    put("a", 10)
    put("b", 10)
    put("c", 10)
    assert store.get("a") is None and store.get("b") and store.get("c") and len(store) == 2
    put("d", 95)
    assert len(store) == 1 and store.get("d")
    put("e", 500)
    assert len(store) == 1 and store.get("e").conversation[0]["content"] == "x" * 500


def test_a_client_gone_mid_stream_cancels_the_decode():
    """A client that closes a streamed response after its first delta ends the decode at
    its next token (the engine counts it cancelled), long before its budget is spent."""
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread
    from pytest_onebit.serve.toy import ServedToy

    engine = Engine(ServedToy(1, pass_delay=0.02), head="ngram")
    with ServerThread(create_app(engine)) as server:
        request = urllib.request.Request(
            server.url + "/v1/responses", data=json.dumps({
                "input": "Go on.", "max_output_tokens": 400, "temperature": 0,
                "stream": True}).encode(), headers={"Content-Type": "application/json"})
        response = urllib.request.urlopen(request, timeout=60)
        for line in response:
            if line.startswith(b"event: response.output_text.delta"):
                break
        response.close()
        deadline = time.monotonic() + 20
        while engine.metrics()["cancelled_total"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.metrics()["cancelled_total"] == 1
        assert engine.metrics()["tokens_total"] < 400


# -- tools --------------------------------------------------------------------------------


def _arguments(item: dict) -> dict:
    """A function_call item's arguments, validated against the function's schema."""
    import jsonschema

    assert item["type"] == "function_call" and item["name"] == "get_weather"
    assert item["id"].startswith("fc_") and item["call_id"].startswith("call_")
    assert item["status"] == "completed"
    value = json.loads(item["arguments"])
    jsonschema.validate(value, WEATHER)
    return value


def _chat_call(url: str, messages: list[dict]) -> dict:
    """The call /v1/chat/completions makes for `messages` with the same tools, named."""
    choice = _chat(url, messages, 96, tools=CHAT_TOOLS, parallel_tool_calls=False,
                   tool_choice={"type": "function", "function": {"name": "get_weather"}})
    (call,) = choice["message"]["tool_calls"]
    return call


def test_a_named_tool_choice_answers_a_function_call_whole_and_streamed(wide):
    """Function tools in the Responses form and a named tool_choice: the output is one
    function_call item (no message: the answer is the call only) whose arguments validate
    against the schema, the same call (name and arguments) /v1/chat/completions makes for
    the equivalent request, and the response repeats the tools and the choice. Streamed:
    created, in_progress, the call's output_item.added (in progress, no arguments yet), its
    arguments' delta and done, output_item.done, completed; every event validates as the
    openai package's `ResponseStreamEvent`, and the final response's call is the whole
    answer's."""
    pytest.importorskip("jsonschema")
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    fields = {"input": ASK, "tools": TOOLS, "tool_choice": NAMED,
              "parallel_tool_calls": False, "max_output_tokens": 96}
    whole = _create(wide, **fields)
    _valid(whole)
    assert whole["status"] == "completed"
    (item,) = whole["output"]
    _arguments(item)
    call = _chat_call(wide, [{"role": "user", "content": ASK}])
    assert (item["name"], item["arguments"]) == (call["function"]["name"],
                                                 call["function"]["arguments"])
    assert whole["tools"] == TOOLS and whole["tool_choice"] == NAMED
    events = _events(wide, **fields)
    names = [name for name, _ in events]
    assert names == (["response.created", "response.in_progress"] + CALL_EVENTS
                     + ["response.completed"])
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    adapter = TypeAdapter(ResponseStreamEvent)
    for _, data in events:
        adapter.validate_python(data)
    added, delta, done, item_done = (data for _, data in events[2:6])
    assert added["item"]["status"] == "in_progress" and added["item"]["arguments"] == ""
    final = events[-1][1]["response"]
    (streamed,) = final["output"]
    assert delta["delta"] == done["arguments"] == streamed["arguments"] == item["arguments"]
    assert item_done["item"] == streamed and delta["item_id"] == streamed["id"]
    _valid(final)


def test_auto_answers_text_when_the_answer_makes_no_call(wide):
    """"auto" does not constrain the answer: the toy's gibberish holds no call, so the output
    is the message item alone, chat's content for the same request; streamed, the message
    item opens at the first content and its deltas join to the same text."""
    fields = {"input": ASK, "tools": TOOLS, "tool_choice": "auto", "max_output_tokens": 16}
    whole = _create(wide, **fields)
    _valid(whole)
    chat = _chat(wide, [{"role": "user", "content": ASK}], 16, tools=CHAT_TOOLS,
                 tool_choice="auto")
    assert "tool_calls" not in chat["message"]
    assert _text(whole) == chat["message"]["content"]
    events = _events(wide, **fields)
    deltas = [d["delta"] for n, d in events if n == "response.output_text.delta"]
    assert [n for n, _ in events] == (STREAM_HEAD + ["response.output_text.delta"]
                                      * len(deltas) + STREAM_TAIL + ["response.incomplete"])
    assert "".join(deltas) == _text(whole)


def test_a_function_call_output_continues_the_conversation(wide):
    """A function_call_output answering an earlier call continues the conversation, sent
    back as input items (the function_call item verbatim, then the output) or after
    `previous_response_id` (the stored conversation keeps the call): either way the answer
    is the call chat makes for [the question, the assistant's call, the tool's result]."""
    pytest.importorskip("jsonschema")
    fields = {"tools": TOOLS, "tool_choice": NAMED, "parallel_tool_calls": False,
              "max_output_tokens": 96}
    first = _create(wide, input=ASK, **fields)
    (call,) = first["output"]
    result = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
    sent_back = _create(wide, input=[{"role": "user", "content": ASK}, call, result],
                        store=False, **fields)
    continued = _create(wide, input=[result], previous_response_id=first["id"], **fields)
    expected = _chat_call(wide, [
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call["call_id"], "type": "function",
             "function": {"name": call["name"], "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["call_id"], "content": "sunny"}])
    for answer in (sent_back, continued):
        _valid(answer)
        (item,) = answer["output"]
        _arguments(item)
        assert item["arguments"] == expected["function"]["arguments"]
    status, error = _call(wide, "/v1/responses", {
        "input": [{**result, "call_id": "call_nope"}], "previous_response_id": first["id"],
        **fields})
    assert status == 400 and error["error"]["param"] == "input[0].call_id"


def test_openai_client_parses_function_calls(wide):
    """The real openai package: `client.responses.create(tools=..., tool_choice=...)` parses
    the output as a `ResponseFunctionToolCall` whose arguments validate, and its
    `responses.stream` helper, rebuilding the response from the events, ends with the same
    call."""
    import openai
    from openai.types.responses import ResponseFunctionToolCall

    pytest.importorskip("jsonschema")
    client = openai.OpenAI(base_url=wide + "/v1", api_key="x", max_retries=0)
    fields = {"model": "toy", "input": ASK, "tools": TOOLS, "tool_choice": NAMED,
              "parallel_tool_calls": False, "max_output_tokens": 96, "temperature": 0}
    whole = client.responses.create(**fields)
    (item,) = whole.output
    assert isinstance(item, ResponseFunctionToolCall)
    _arguments(item.model_dump())
    with client.responses.stream(**fields) as stream:
        final = stream.get_final_response()
    (streamed,) = final.output
    assert (streamed.name, streamed.arguments) == (item.name, item.arguments)


def test_text_and_calls_are_a_message_then_function_call_items_kept_for_continuing():
    """An answer with text and two calls (tools.py's Hermes blocks) is the message item with
    the text, then one function_call item per call in order, the body valid as openai's
    `Response`; the stored conversation keeps the calls on the assistant's turn, so a
    function_call_output continuing it answers one of them."""
    from onebit.serve.engine import Completion
    from onebit.serve.responses_api import ResponseStore, parse_response_request

    store = ResponseStore()
    wanted = parse_response_request({"input": ASK, "tools": TOOLS}, store)
    text = ('Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", '
            '"days": 1}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": '
            '{"city": "Rome", "days": 2}}\n</tool_call>')
    body = wanted.body("toy", Completion(text, [1, 2, 3], 5, "stop"))
    wanted.keep(store, body, Completion(text, [1, 2, 3], 5, "stop"))
    _valid(body)
    message, first, second = body["output"]
    assert _text({"output": [message]}) == "Let me look."
    assert [json.loads(c["arguments"])["city"] for c in (first, second)] == ["Paris", "Rome"]
    kept = store.get(body["id"]).conversation[-1]
    assert kept["content"] == "Let me look."
    assert [c["id"] for c in kept["tool_calls"]] == [first["call_id"], second["call_id"]]
    again = parse_response_request({"previous_response_id": body["id"], "tools": TOOLS,
                                    "input": [{"type": "function_call_output",
                                               "call_id": second["call_id"],
                                               "output": "rain"}]}, store)
    assert again.conversation[-1] == {"role": "tool", "tool_call_id": second["call_id"],
                                      "content": "rain"}
