"""Tools on /v1/chat/completions (onebit.serve.tools): the request forms and their refusals,
the prompt the chat template gets, the calls parsed out of the text, and a real server on the
contract's toy model, one request at a time and three slots in parallel.

The toy answers gibberish, so "required" and a named function are what is proved on it: the
grammar makes the answer a call whose arguments conform to the function's schema whatever the
model would say, greedy speculation keeps the answer token for token, and a stream joins to
the whole answer. The schemas are tight (short strings, small integers, llguidance's compact
JSON) so the toy's random weights cannot spend the budget on whitespace.

Four tests are named checks for `mutants/serve/`: T1 calls parse the same whole and piece by
piece; T2 what is a call and what is content; T3 a forced call conforms, whole and streamed;
T4 speculation keeps the forced answer.
"""

from __future__ import annotations

import copy
import json

import pytest

from onebit.serve.errors import RequestError
from onebit.serve.requests import CHAT, parse
from onebit.serve.tools import (
    CallStream,
    ToolSpec,
    chat_prompt,
    hermes_messages,
    parse_answer,
    template_uses_tools,
)
from onebit.text.chat import CHATML, render

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"],
    "additionalProperties": False,
    "x-guidance": {"whitespace_flexible": False},
}
TIME = {
    "type": "object",
    "properties": {"zone": {"type": "string", "enum": ["utc", "cet", "pst"]}},
    "required": ["zone"],
    "additionalProperties": False,
    "x-guidance": {"whitespace_flexible": False},
}
TOOLS = [{"type": "function", "function": {"name": "get_weather",
                                           "description": "The weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time",
                                           "parameters": TIME, "strict": True}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}
BUDGET = 96
# the toy's 512 positions hold no tools block: a wider context for these tests
WIDE = 2048


def _spec(**fields) -> ToolSpec:
    return parse(CHAT, {"messages": ASK, "tools": TOOLS, **fields}).tools


# -- the request --------------------------------------------------------------------------


def test_tools_parse_into_a_spec():
    """`tools`, `tool_choice` and `parallel_tool_calls` become `Request.tools`: the tools as
    the template gets them, their names and argument schemas, the choice ("auto" when tools
    are given and no choice, "none" otherwise) and whether calls may be parallel; a function
    without parameters takes no arguments. No tools (absent, null or []) is no spec, and
    the request equals the bare one."""
    spec = _spec()
    assert (spec.choice, spec.named, spec.parallel) == ("auto", None, True)
    assert spec.names == ("get_weather", "get_time")
    assert spec.rendered() == TOOLS and spec.schemas[0] == WEATHER
    assert spec.grammar(None) is None  # auto: the answer is not constrained
    named = _spec(tool_choice=NAMED, parallel_tool_calls=False)
    assert (named.choice, named.named, named.parallel) == ("function", "get_weather", False)
    assert named.grammar(None).kind == "lark"
    assert _spec(tool_choice="required").forced and not _spec(tool_choice="none").parses
    bare = parse(CHAT, {"messages": ASK})
    for empty in (None, []):
        assert parse(CHAT, {"messages": ASK, "tools": empty, "tool_choice": "none",
                            "parallel_tool_calls": False}) == bare
    plain = parse(CHAT, {"messages": ASK, "tools": [{"type": "function",
                                                     "function": {"name": "ping"}}]}).tools
    assert plain.schemas[0] == {"type": "object", "properties": {},
                                "additionalProperties": False}


def _tool(**function) -> list[dict]:
    return [{"type": "function", "function": {"name": "f", **function}}]


@pytest.mark.parametrize("fields,param", [
    ({"tools": {"type": "function"}}, "tools"),
    ({"tools": ["f"]}, "tools[0]"),
    ({"tools": [{"type": "retrieval", "function": {"name": "f"}}]}, "tools[0].type"),
    ({"tools": [{"type": "function", "function": {"name": "f"}, "extra": 1}]},
     "tools[0].extra"),
    ({"tools": [{"type": "function"}]}, "tools[0].function"),
    ({"tools": _tool(name="a b")}, "tools[0].function.name"),
    ({"tools": _tool(name="x" * 65)}, "tools[0].function.name"),
    ({"tools": [{"type": "function", "function": {"description": "d"}}]},
     "tools[0].function.name"),
    ({"tools": _tool() + _tool()}, "tools[1].function.name"),
    ({"tools": _tool(description=3)}, "tools[0].function.description"),
    ({"tools": _tool(strict="yes")}, "tools[0].function.strict"),
    ({"tools": _tool(returns={})}, "tools[0].function.returns"),
    ({"tools": _tool(parameters="{}")}, "tools[0].function.parameters"),
    ({"tools": _tool(parameters={"type": "string"})}, "tools[0].function.parameters"),
    ({"tools": _tool(parameters={"type": "object", "properties": {"a": {"type": "nope"}}})},
     "tools[0].function.parameters"),
    ({"tools": _tool(), "tool_choice": "any"}, "tool_choice"),
    ({"tools": _tool(), "tool_choice": 1}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": _tool(), "tool_choice": {"type": "function", "function": {"name": "g"}}},
     "tool_choice"),
    ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool_choice"),
    ({"tools": _tool(), "tool_choice": {"type": "tool", "function": {"name": "f"}}},
     "tool_choice.type"),
    ({"tools": _tool(), "tool_choice": {"type": "function", "name": "f"}},
     "tool_choice.name"),
    ({"tools": _tool(), "tool_choice": {"type": "function", "function": "f"}},
     "tool_choice.function"),
    ({"tools": _tool(), "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"parallel_tool_calls": 1}, "parallel_tool_calls"),
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"function_call": {"name": "f"}}, "function_call"),
])
def test_bad_tool_forms_are_refused_naming_the_path(fields, param):
    """Every malformed `tools` entry (not a function, an unknown key, a bad or repeated name,
    parameters that are no object schema or that llguidance cannot compile), a
    `tool_choice` that is no choice or names no tool, a `parallel_tool_calls` that is no
    bool, and the legacy `functions` / `function_call` are a 400 naming the path."""
    with pytest.raises(RequestError) as caught:
        parse(CHAT, {"messages": ASK, **fields})
    assert caught.value.status == 400
    assert caught.value.param == param, str(caught.value)
    if param in ("functions", "function_call"):
        assert "send tools" in str(caught.value)


CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}
HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL], "refusal": None},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
]


@pytest.mark.parametrize("message,param", [
    ({"role": "assistant", "tool_calls": {}}, "messages[2].tool_calls"),
    ({"role": "assistant", "tool_calls": ["x"]}, "messages[2].tool_calls[0]"),
    ({"role": "assistant", "tool_calls": [{**CALL, "id": 3}]}, "messages[2].tool_calls[0].id"),
    ({"role": "assistant", "tool_calls": [{**CALL, "type": "code"}]},
     "messages[2].tool_calls[0].type"),
    ({"role": "assistant", "tool_calls": [{**CALL, "extra": 1}]},
     "messages[2].tool_calls[0].extra"),
    ({"role": "assistant", "tool_calls": [{**CALL, "function": {"name": ""}}]},
     "messages[2].tool_calls[0].function.name"),
    ({"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "f",
                                                                "arguments": 3}}]},
     "messages[2].tool_calls[0].function.arguments"),
    ({"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "f", "x": 1}}]},
     "messages[2].tool_calls[0].function.x"),
    ({"role": "user", "content": "a", "tool_calls": [CALL]}, "messages[2].tool_calls"),
    ({"role": "tool", "content": "sunny"}, "messages[3].tool_call_id"),
    ({"role": "tool", "content": "sunny", "tool_call_id": "call_9"},
     "messages[3].tool_call_id"),
    ({"role": "tool", "tool_call_id": "call_1"}, "messages[3].content"),
    ({"role": "user", "content": "a", "tool_call_id": "call_1"}, "messages[2].tool_call_id"),
])
def test_bad_tool_messages_are_refused_naming_the_path(message, param):
    """A malformed assistant `tool_calls` (not a list, a call that is no object, a bad id,
    type, key, name or arguments), tool calls outside an assistant turn, a tool result with
    no `tool_call_id`, one that answers no earlier call, or with no content, and a
    `tool_call_id` outside a tool result are each a 400 naming the path (the message is the
    third, or the fourth after an assistant's valid call)."""
    history = [*HISTORY[:2], {"role": "assistant", "content": "ok", "tool_calls": [CALL]}]
    messages = [*history, message] if param.startswith("messages[3]") else \
        [*history[:2], message]
    with pytest.raises(RequestError) as caught:
        parse(CHAT, {"messages": messages})
    assert caught.value.param == param, str(caught.value)


def test_tool_messages_reach_the_template_as_transformers_gives_them():
    """An assistant turn with `tool_calls` and `content: null` and a tool result are kept:
    the calls with their `arguments` parsed to a dict (JSON object text) or left as text
    (anything else), the null content "" (as vLLM gives it: Qwen 3's template reads an
    assistant's content as text), the result with its `tool_call_id`."""
    odd = {**CALL, "id": "call_2", "function": {"name": "f", "arguments": "not json"}}
    messages = [*HISTORY[:2], {**HISTORY[2], "tool_calls": [CALL, odd]}, HISTORY[3]]
    prompt = parse(CHAT, {"messages": messages, "tools": TOOLS}).prompt
    assert prompt[2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
        {"id": "call_2", "type": "function", "function": {"name": "f",
                                                          "arguments": "not json"}}]}
    assert prompt[3] == {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}


# -- the prompt ---------------------------------------------------------------------------


def _corpus_template(name: str) -> str:
    from onebit.corpus import skip_unless_cached

    return (skip_unless_cached() / "templates" / name).read_text(encoding="utf-8")


# Qwen 2.5's rendering of HISTORY with TOOLS[:1], written out as transformers gives it
QWEN25 = (
    "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist "
    "with the user query.\n\nYou are provided with function signatures within <tools></tools> "
    "XML tags:\n<tools>\n" + json.dumps(TOOLS[0]) + "\n</tools>\n\nFor each function call, "
    "return a json object with function name and arguments within <tool_call></tool_call> XML "
    "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
    "{\"city\": \"Paris\", \"days\": 2}}\n</tool_call><|im_end|>\n<|im_start|>user\n"
    "<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n")


class _Tok:
    """What chat_prompt reads of a tokenizer."""

    def __init__(self, template):
        self.chat_template, self.bos_token, self.eos_token = template, "", "<|im_end|>"


def test_a_template_without_tools_gets_them_the_qwen25_way():
    """ChatML (the template of a model that has none) renders no tools: the tools go into the
    system message, the call into the assistant's content and the result into a user turn,
    the Hermes / Qwen 2.5 way, which through ChatML is exactly Qwen 2.5's own text for the
    same conversation (written out here; and, where the corpus is cached, its template's)."""
    prompt = parse(CHAT, {"messages": HISTORY, "tools": TOOLS[:1]})
    assert not template_uses_tools(None) and not template_uses_tools(CHATML)
    messages, tools = chat_prompt(_Tok(None), prompt.prompt, prompt.tools)
    assert tools is None
    assert render(None, messages) == QWEN25
    # without a system message the tools block is one of its own
    alone = hermes_messages(prompt.prompt[1:2], prompt.tools.rendered())
    assert alone[0]["role"] == "system" and alone[0]["content"].startswith("# Tools")
    qwen = _corpus_template("Qwen-Qwen2.5-7B-Instruct.jinja")
    assert template_uses_tools(qwen)
    messages, tools = chat_prompt(_Tok(qwen), prompt.prompt, prompt.tools)
    assert tools == TOOLS[:1] and messages == prompt.prompt
    assert render(qwen, copy.deepcopy(messages), tools=tools) == QWEN25


@pytest.mark.parametrize("name", ["Qwen-Qwen3-0.6B.jinja",
                                  "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"])
def test_a_template_with_tools_gets_them_and_the_calls_as_objects(name):
    """A template that renders tools (Qwen 3's; Hermes 3's tool_use one, which cannot render
    without them) gets the tools and the messages as they are: its text lists the function
    and shows the earlier call's arguments as a JSON object, not as a string of JSON."""
    template = _corpus_template(name)
    assert template_uses_tools(template)
    prompt = parse(CHAT, {"messages": HISTORY, "tools": TOOLS})
    messages, tools = chat_prompt(_Tok(template), prompt.prompt, prompt.tools)
    text = render(template, messages, tools=tools, bos_token="<|begin_of_text|>")
    assert "get_time" in text and "sunny" in text
    assert '"arguments": {"city": "Paris", "days": 2}' in text


# -- parsing the answer -------------------------------------------------------------------


def _block(name: str, arguments, spaced: str = "") -> str:
    return f'<tool_call>\n{{"name": "{name}",{spaced} "arguments": {json.dumps(arguments)}}}' \
           "\n</tool_call>"


TEXTS = [
    "Just text, no call.",
    "Let me check.\n" + _block("get_weather", {"city": "Rome", "days": 1}),
    _block("get_weather", {"city": "Rome", "days": 1}) + "\n"
    + _block("get_time", {"zone": "utc"}) + "\n",
    "a <tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call> b",
    "broken <tool_call>{not json</tool_call> then " + _block("get_time", {"zone": "cet"}),
    "left open " + _block("get_time", {"zone": "pst"})[:-3],
    "<tool_call> stray <tool_call>\n" + json.dumps({"name": "get_time",
                                                   "arguments": "{\"zone\": \"utc\"}"})
    + "\n</tool_call>",
    "ends with <tool_c",
    "spaces   \n  ",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("parallel", [True, False])
def test_T1_calls_parse_the_same_whole_and_piece_by_piece(text, parallel):
    """Pushed whole or a character at a time (as a stream hands it over), the text gives the
    same content and the same calls: what a piece may still turn into a call is held back,
    and settled once the text decides it."""
    spec = _spec(parallel_tool_calls=parallel)
    content, calls = parse_answer(spec, text)
    stream, pieces, made = CallStream(spec), [], []
    for ch in text:
        piece, new = stream.push(ch)
        pieces.append(piece)
        made += new
    piece, new = stream.finish()
    joined = "".join(pieces) + piece
    assert (joined or None) == content
    assert [c["function"] for c in made + new] == [c["function"] for c in calls]


def test_T2_what_is_a_call_and_what_is_content():
    """A complete block whose JSON names one of the tools with object arguments (or a
    string of a JSON object) is a call, its arguments re-serialised as JSON text; a block
    naming no tool, one that is no JSON, an unfinished one and a second call without
    parallel calls stay text. The whitespace next to a call is not content; text with no
    call is untouched."""
    spec = _spec()
    assert parse_answer(spec, TEXTS[0]) == (TEXTS[0], [])
    content, calls = parse_answer(spec, TEXTS[1])
    assert content == "Let me check."
    assert calls[0]["type"] == "function" and calls[0]["id"].startswith("call_")
    assert calls[0]["function"] == {"name": "get_weather",
                                    "arguments": '{"city": "Rome", "days": 1}'}
    content, calls = parse_answer(spec, TEXTS[2])
    assert content is None and [c["function"]["name"] for c in calls] == ["get_weather",
                                                                          "get_time"]
    assert parse_answer(spec, TEXTS[3]) == (TEXTS[3], [])
    content, calls = parse_answer(spec, TEXTS[4])
    assert content == "broken <tool_call>{not json</tool_call> then" and len(calls) == 1
    assert parse_answer(spec, TEXTS[5]) == (TEXTS[5], [])
    content, calls = parse_answer(spec, TEXTS[6])
    assert content == "<tool_call> stray" and calls[0]["function"]["arguments"] == \
        '{"zone": "utc"}'
    content, calls = parse_answer(_spec(parallel_tool_calls=False), TEXTS[2])
    assert len(calls) == 1 and content == _block("get_time", {"zone": "utc"}) + "\n"


# -- a real server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers():
    """The toy served one request at a time and with three slots in parallel (both with a
    context wide enough for the tools block): their URLs by mode."""
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread
    from pytest_onebit.serve.toy import ServedToy

    running, urls = [], {}
    try:
        for mode, slots, parallel in (("one-at-a-time", 1, None), ("parallel-3", 3, 3)):
            toy = ServedToy(slots, context=WIDE)
            server = ServerThread(create_app(Engine(toy, head="ngram", parallel=parallel)))
            running.append(server.start())
            urls[mode] = server.url
        yield urls
    finally:
        for server in running:
            server.stop()


MODES = ["one-at-a-time", "parallel-3"]


def _post(url: str, body: dict) -> tuple[int, dict]:
    from pytest_onebit.serve.trace import post

    reply = post(url + "/v1/chat/completions", body)
    assert reply.error is None, reply.error
    return reply.status, reply.body


def _chat(url: str, **fields) -> dict:
    body = {"messages": ASK, "tools": TOOLS, "max_tokens": BUDGET, "temperature": 0, **fields}
    status, answer = _post(url, body)
    assert status == 200, answer
    return answer["choices"][0]


def _stream(url: str, **fields) -> tuple[list[dict], list[dict]]:
    """The chunks' choices of a streamed answer, and the whole calls its deltas make."""
    from pytest_onebit.peers.openai_client import Client

    body = {"messages": ASK, "tools": TOOLS, "max_tokens": BUDGET, "temperature": 0, **fields}
    chunks = Client(url).stream("/v1/chat/completions", body).chunks
    choices = [c["choices"][0] for c in chunks if c["choices"]]
    calls: dict[int, dict] = {}
    for choice in choices:
        for delta in choice["delta"].get("tool_calls") or ():
            assert delta["index"] not in calls, "a call is sent whole, once"
            calls[delta["index"]] = {k: v for k, v in delta.items() if k != "index"}
    return choices, [calls[i] for i in sorted(calls)]


def _valid(calls: list[dict], names=None) -> None:
    import jsonschema

    assert calls
    for call in calls:
        assert call["type"] == "function" and call["id"].startswith("call_")
        name = call["function"]["name"]
        assert name in (names or SCHEMAS)
        jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[name])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("choice", [NAMED, "required"])
def test_T3_a_forced_call_conforms_whole_and_streamed(servers, mode, choice):
    """Named and required (one call: parallel_tool_calls false): whatever the toy would say,
    the answer is one call whose arguments validate against the function's schema, with no
    content and finish_reason "tool_calls"; streamed, the one whole call delta is the same
    call (name and arguments), the ids the same tokens, and no content is sent."""
    pytest.importorskip("jsonschema")
    fields = {"tool_choice": choice, "parallel_tool_calls": False}
    whole = _chat(servers[mode], **fields)
    message = whole["message"]
    assert whole["finish_reason"] == "tool_calls" and message["content"] is None
    assert len(message["tool_calls"]) == 1
    _valid(message["tool_calls"], ["get_weather"] if choice == NAMED else None)
    choices, calls = _stream(servers[mode], **fields)
    assert [c["function"] for c in calls] == [c["function"] for c in message["tool_calls"]]
    assert "".join(c["delta"].get("content") or "" for c in choices) == ""
    assert choices[-1]["finish_reason"] == "tool_calls"
    assert choices[-1]["token_ids"] == whole["token_ids"]


@pytest.mark.parametrize("mode", MODES)
def test_required_with_parallel_calls_makes_one_or_more(servers, mode):
    """`required` with parallel calls (the default): one or more calls, each of a known
    function with arguments that validate; what a budget cut short is not a call, and the
    finish reason then says "length"; streamed, the same calls."""
    pytest.importorskip("jsonschema")
    whole = _chat(servers[mode], tool_choice="required", max_tokens=160)
    calls = whole["message"]["tool_calls"]
    _valid(calls)
    expected = "tool_calls" if whole["finish_reason"] != "length" else "length"
    assert whole["finish_reason"] == expected
    _, streamed = _stream(servers[mode], tool_choice="required", max_tokens=160)
    assert [c["function"] for c in streamed] == [c["function"] for c in calls]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("choice", [NAMED, "required"])
def test_T4_speculation_keeps_the_forced_answer(servers, mode, choice):
    """Greedy with the ngram head drafting equals the same request decoded plainly
    (`speculative: false`), token for token: the grammar masks each draft's row with the
    state of its own prefix."""
    fields = {"tool_choice": choice, "parallel_tool_calls": False}
    drafted = _chat(servers[mode], **fields)
    plain = _chat(servers[mode], speculative=False, **fields)
    assert drafted["token_ids"] == plain["token_ids"]
    assert drafted["message"]["tool_calls"][0]["function"] == \
        plain["message"]["tool_calls"][0]["function"]


@pytest.mark.parametrize("choice", [NAMED, "required", "auto", "none"])
def test_parallel_serving_equals_one_at_a_time(servers, choice):
    """Three slots in parallel give each request exactly the tokens one at a time gives."""
    fields = {"tool_choice": choice, "parallel_tool_calls": False}
    assert _chat(servers["parallel-3"], **fields)["token_ids"] == \
        _chat(servers["one-at-a-time"], **fields)["token_ids"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("choice", ["auto", "none"])
def test_auto_and_none_answer_text(servers, mode, choice):
    """"auto" and "none" do not constrain the answer: the toy's gibberish holds no call, so
    both answer text (the same text: the tools are rendered either way), with no
    tool_calls and the answer's own finish reason; streamed, the same text."""
    whole = _chat(servers[mode], tool_choice=choice, max_tokens=24)
    assert "tool_calls" not in whole["message"] and whole["finish_reason"] != "tool_calls"
    assert whole["message"]["content"]
    assert whole["message"]["content"] == _chat(servers[mode], max_tokens=24,
                                                tool_choice="none")["message"]["content"]
    choices, calls = _stream(servers[mode], tool_choice=choice, max_tokens=24)
    assert not calls
    assert "".join(c["delta"].get("content") or "" for c in choices) == \
        whole["message"]["content"]


@pytest.mark.parametrize("mode", MODES)
def test_auto_with_a_response_format_answers_that_json_or_a_call(servers, mode):
    """"auto" with a JSON schema `response_format`: the answer is that JSON or a call (the
    grammar allows both), so the toy's answer is one of the two, valid either way."""
    jsonschema = pytest.importorskip("jsonschema")
    form = {"type": "json_schema", "json_schema": {"name": "t", "schema": TIME}}
    whole = _chat(servers[mode], response_format=form)
    if whole["message"].get("tool_calls"):
        _valid(whole["message"]["tool_calls"])
    else:
        jsonschema.validate(json.loads(whole["message"]["content"]), TIME)


@pytest.mark.parametrize("mode", MODES)
def test_a_conversation_with_calls_and_results_is_answered(servers, mode):
    """A conversation holding an assistant's call and the tool's result renders (through
    the toy's ChatML, the Qwen 2.5 way) and is answered, a forced call again valid."""
    pytest.importorskip("jsonschema")
    whole = _chat(servers[mode], messages=HISTORY, tool_choice=NAMED,
                  parallel_tool_calls=False)
    _valid(whole["message"]["tool_calls"], ["get_weather"])


@pytest.mark.parametrize("mode", MODES)
def test_logprobs_list_every_token_of_the_answer(servers, mode):
    """With logprobs and a call, the logprobs list every token of the answer (the call's
    text included): one per token id but the end of turn; streamed, the chunks' entries
    join to the same list, held-back text or not."""
    fields = {"tool_choice": NAMED, "parallel_tool_calls": False, "logprobs": True}
    whole = _chat(servers[mode], **fields)
    listed = [e["token"] for e in whole["logprobs"]["content"]]
    assert len(listed) == len(whole["token_ids"]) - 1
    choices, _ = _stream(servers[mode], **fields)
    streamed = [e["token"] for c in choices if c.get("logprobs")
                for e in c["logprobs"]["content"]]
    assert streamed == listed


@pytest.mark.parametrize("fields,param", [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "nope"}}}}}]},
     "tools[0].function.parameters"),
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"messages": [*ASK, {"role": "tool", "tool_call_id": "x", "content": "1"}]},
     "messages[1].tool_call_id"),
    ({"functions": [{"name": "f"}]}, "functions"),
])
def test_bad_forms_are_400s_over_http(servers, fields, param):
    """Over HTTP the refusals are OpenAI's error JSON, a 400 whose param is the path."""
    status, body = _post(servers["one-at-a-time"], {"messages": ASK, "tools": TOOLS,
                                                     **fields})
    assert status == 400 and body["error"]["param"] == param


def test_the_openai_client_reads_the_calls(servers):
    """The openai package: `chat.completions.create(tools=..., tool_choice=<named>)` parses
    `message.tool_calls` (the function's name and its arguments, which validate), whole and
    streamed through its own accumulation of the deltas."""
    openai = pytest.importorskip("openai")
    pytest.importorskip("jsonschema")
    client = openai.OpenAI(base_url=servers["one-at-a-time"] + "/v1", api_key="x",
                           max_retries=0)
    fields = {"model": "toy", "messages": ASK, "tools": TOOLS, "tool_choice": NAMED,
              "parallel_tool_calls": False, "max_tokens": BUDGET, "temperature": 0}
    answer = client.chat.completions.create(**fields)
    call = answer.choices[0].message.tool_calls[0]
    assert answer.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather"
    _valid([call.model_dump()], ["get_weather"])
    with client.chat.completions.stream(**fields) as stream:
        final = stream.get_final_completion()
    streamed = final.choices[0].message.tool_calls[0]
    assert (streamed.function.name, streamed.function.arguments) == \
        (call.function.name, call.function.arguments)
