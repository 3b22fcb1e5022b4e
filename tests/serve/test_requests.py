"""Request validation at the boundary: each bad field is a `RequestError` naming it, with
OpenAI's error body; good requests become the `Request` the engine runs."""

from __future__ import annotations

import pytest

from onebit.sampling import Sampling
from onebit.serve.errors import RequestError
from onebit.serve.requests import CHAT, COMPLETION, parse

MESSAGES = [{"role": "user", "content": "hi"}]


def test_good_completion_and_chat_requests():
    """Defaults as OpenAI's (16 tokens for completions, temperature 1), greedy at
    temperature 0, stops as a tuple, logprobs counts for both endpoints' spellings."""
    r = parse(COMPLETION, {"prompt": "x", "stop": "\n", "logprobs": 2, "seed": 3})
    assert (r.max_tokens, r.stop, r.logprobs, r.seed) == (16, ("\n",), 2, 3)
    assert r.sampling == Sampling(temperature=1.0)
    g = parse(CHAT, {"messages": MESSAGES, "temperature": 0, "logprobs": True,
                     "top_logprobs": 4, "max_completion_tokens": 5, "speculative": False})
    assert (g.sampling, g.logprobs, g.max_tokens, g.speculative) == (None, 4, 5, False)
    assert parse(CHAT, {"messages": MESSAGES}).max_tokens is None  # until the context is full


@pytest.mark.parametrize("kind,body,param", [
    (COMPLETION, {}, "prompt"),
    (COMPLETION, {"prompt": ["a", "b"]}, "prompt"),
    (COMPLETION, {"prompt": "x", "max_tokens": 0}, "max_tokens"),
    (COMPLETION, {"prompt": "x", "max_tokens": True}, "max_tokens"),
    (COMPLETION, {"prompt": "x", "temperature": "hot"}, "temperature"),
    (COMPLETION, {"prompt": "x", "temperature": 3}, "temperature"),
    (COMPLETION, {"prompt": "x", "top_p": 0}, "top_p"),
    (COMPLETION, {"prompt": "x", "top_k": -2}, "top_k"),
    (COMPLETION, {"prompt": "x", "seed": -1}, "seed"),
    (COMPLETION, {"prompt": "x", "stop": ["a", ""]}, "stop[1]"),
    (COMPLETION, {"prompt": "x", "stop": ["a"] * 5}, "stop"),
    (COMPLETION, {"prompt": "x", "logprobs": 21}, "logprobs"),
    (COMPLETION, {"prompt": "x", "n": 9}, "n"),
    (COMPLETION, {"prompt": "x", "n": 2, "stream": True}, "n"),
    (COMPLETION, {"prompt": "x", "echo": True}, "echo"),
    (COMPLETION, {"prompt": "x", "stream": "yes"}, "stream"),
    (COMPLETION, {"prompt": "x", "speculative": 0}, "speculative"),
    (COMPLETION, {"prompt": "x", "stream_options": {"include_usage": True}}, "stream_options"),
    (CHAT, {"messages": []}, "messages"),
    (CHAT, {"messages": [{"role": "user"}]}, "messages[0].content"),
    (CHAT, {"messages": [MESSAGES[0], {"content": "x"}]}, "messages[1].role"),
    (CHAT, {"messages": MESSAGES, "top_logprobs": 2}, "top_logprobs"),
    (CHAT, {"messages": MESSAGES, "max_tokens": 3, "max_completion_tokens": 3},
     "max_completion_tokens"),
    (CHAT, {"messages": MESSAGES, "presence_penalty": 2.5}, "presence_penalty"),
    (CHAT, {"messages": MESSAGES, "logit_bias": {"-3": 1}}, "logit_bias['-3']"),
    (CHAT, {"messages": MESSAGES, "min_tokens": -1}, "min_tokens"),
    (CHAT, {"messages": MESSAGES, "stop_token_ids": [1, "2"]}, "stop_token_ids[1]"),
    (CHAT, {"messages": MESSAGES, "response_format": "json"}, "response_format"),
    (CHAT, {"messages": MESSAGES, "response_format": {"type": "yaml"}}, "response_format.type"),
    (CHAT, {"messages": MESSAGES, "response_format": {"type": "json_schema", "json_schema": {
        "name": 3, "schema": {}}}}, "response_format.json_schema.name"),
])
def test_bad_fields_are_named(kind, body, param):
    """Each bad or unsupported field is refused with its name as OpenAI's `param`."""
    with pytest.raises(RequestError) as caught:
        parse(kind, body)
    assert caught.value.param == param
    error = caught.value.body()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert error["message"]


def test_a_body_that_is_not_an_object():
    """A JSON array or string is refused as a whole (no field to name)."""
    with pytest.raises(RequestError, match="JSON object"):
        parse(COMPLETION, ["prompt"])


# -- the allow-list: every field read, ignored as answer-neutral, or refused by name ----------

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize("kind,body,param", [
    (COMPLETION, {"prompt": "x", "temprature": 0}, "temprature"),
    (COMPLETION, {"prompt": "x", "max_completion_tokens": 4}, "max_completion_tokens"),
    (COMPLETION, {"prompt": "x", "top_logprobs": 2}, "top_logprobs"),
    (COMPLETION, {"prompt": "x", "messages": MESSAGES}, "messages"),
    (CHAT, {"messages": MESSAGES, "prompt": "x"}, "prompt"),
    (CHAT, {"messages": MESSAGES, "typical_p": 0.9}, "typical_p"),
    (CHAT, {"messages": MESSAGES, "predictions": {"type": "content", "content": "x"}},
     "predictions"),
    (CHAT, {"messages": MESSAGES, "mirostat": None}, "mirostat"),
])
def test_unknown_fields_are_refused_by_name(kind, body, param):
    """A field `parse` neither reads nor knows to be answer-neutral is a 400 naming it, null
    value or not: a typo or another server's knob is never silently dropped."""
    with pytest.raises(RequestError, match="unknown field") as caught:
        parse(kind, body)
    assert caught.value.param == param
    assert caught.value.body()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("kind,fields", [
    (COMPLETION, {"user": "u1", "metadata": {"k": "v"}, "store": True, "service_tier": "auto",
                  "safety_identifier": "s", "prompt_cache_key": "c", "return_token_ids": True,
                  "model": "m"}),
    (COMPLETION, {"ignore_eos": False, "min_p": 0, "best_of": 1, "echo": False, "suffix": "",
                  "skip_special_tokens": True, "include_stop_str_in_output": False,
                  "grammar": None, "json_schema": None, "tools": []}),
    (CHAT, {"user": "u1", "metadata": {}, "store": False, "parallel_tool_calls": True,
            "tool_choice": "none", "tools": None, "function_call": "auto", "min_p": 0.0,
            "continue_final_message": False, "add_generation_prompt": True,
            "modalities": ["text"], "audio": None}),
])
def test_answer_neutral_fields_are_accepted_and_change_nothing(kind, fields):
    """The documented answer-neutral fields, and the unsupported ones at their "not used"
    value, parse to exactly the `Request` the bare body does."""
    bare = {"prompt": "x"} if kind == COMPLETION else {"messages": MESSAGES}
    assert parse(kind, {**bare, **fields}) == parse(kind, bare)


@pytest.mark.parametrize("kind,field,value", [
    (COMPLETION, "ignore_eos", True),
    (COMPLETION, "ignore_eos", 0),  # not false: a bool only as a bool
    (COMPLETION, "min_p", 0.05),
    (COMPLETION, "grammar", "root ::= \"a\""),
    (COMPLETION, "json_schema", SCHEMA),
    (COMPLETION, "suffix", "tail"),
    (COMPLETION, "skip_special_tokens", False),
    (CHAT, "ignore_eos", True),
    (CHAT, "min_p", 1),
    (CHAT, "grammar", "root ::= \"a\""),
    (CHAT, "json_schema", SCHEMA),
    (CHAT, "continue_final_message", True),
    (CHAT, "add_generation_prompt", False),
    (COMPLETION, "tools", [{"type": "function", "function": {"name": "f"}}]),
    (CHAT, "functions", [{"name": "f"}]),
    (CHAT, "function_call", {"name": "f"}),
    (CHAT, "reasoning_effort", "low"),
    (CHAT, "modalities", ["text", "audio"]),
])
def test_answer_changing_fields_are_refused_by_name(kind, field, value):
    """A field that would change the answer and is not served (llama.cpp's grammar and
    json_schema, vLLM's ignore_eos / min_p / continue_final_message / add_generation_prompt,
    tools on completions, the legacy functions / function_call) is a 400 naming it, saying
    what to do instead where there is a way."""
    bare = {"prompt": "x"} if kind == COMPLETION else {"messages": MESSAGES}
    with pytest.raises(RequestError, match="is not supported by onebit serve") as caught:
        parse(kind, {**bare, field: value})
    assert caught.value.param == field
    if field in ("grammar", "json_schema"):
        assert "response_format" in str(caught.value)
    if field in ("functions", "function_call"):
        assert "send tools" in str(caught.value)


@pytest.mark.parametrize("form,param", [
    ({"type": "json_object", "strict": True}, "response_format.strict"),
    ({"type": "text", "schema": SCHEMA}, "response_format.schema"),
    ({"type": "json_object", "schema": "{}"}, "response_format.schema"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}, "schema": SCHEMA},
     "response_format.schema"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "additional": 1}},
     "response_format.json_schema.additional"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": "yes"}},
     "response_format.json_schema.strict"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "description": 1}},
     "response_format.json_schema.description"),
])
def test_unknown_or_bad_keys_inside_response_format_are_named(form, param):
    """Inside `response_format` and its `json_schema` an unknown key, or a known one of the
    wrong type, is refused with its full path as `param`."""
    with pytest.raises(RequestError) as caught:
        parse(CHAT, {"messages": MESSAGES, "response_format": form})
    assert caught.value.param == param


def test_json_schema_strict_and_description_are_accepted():
    """OpenAI's `strict` and `description` beside a json_schema are taken: the grammar is
    the schema's, as without them (the schema is always enforced)."""
    bare = {"name": "a", "schema": SCHEMA}
    plain = parse(CHAT, {"messages": MESSAGES, "response_format": {
        "type": "json_schema", "json_schema": bare}})
    full = parse(CHAT, {"messages": MESSAGES, "response_format": {
        "type": "json_schema", "json_schema": {**bare, "strict": True, "description": "d"}}})
    assert full.processors.grammar == plain.processors.grammar


def test_llama_cpp_json_object_schema_is_honoured():
    """llama.cpp's `{"type": "json_object", "schema": {...}}` decodes inside that schema (the
    grammar of the same schema sent as OpenAI's json_schema), not any JSON object."""
    llama = parse(CHAT, {"messages": MESSAGES, "response_format": {
        "type": "json_object", "schema": SCHEMA}}).processors.grammar
    openai = parse(CHAT, {"messages": MESSAGES, "response_format": {
        "type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}}
    ).processors.grammar
    anything = parse(CHAT, {"messages": MESSAGES, "response_format": {
        "type": "json_object"}}).processors.grammar
    assert (llama.kind, llama.source) == (openai.kind, openai.source)
    assert llama != anything


@pytest.mark.parametrize("options,param", [
    ({"include_usage": True, "verbose": True}, "stream_options.verbose"),
    ({"include_usage": "yes"}, "stream_options.include_usage"),
    ({"continuous_usage_stats": True}, "stream_options.continuous_usage_stats"),
])
def test_stream_options_keys_are_named(options, param):
    """Inside `stream_options` an unknown key, a non-bool include_usage, or vLLM's per-chunk
    usage (not served) is refused with its path."""
    with pytest.raises(RequestError) as caught:
        parse(CHAT, {"messages": MESSAGES, "stream": True, "stream_options": options})
    assert caught.value.param == param


def test_stream_options_neutral_keys_are_accepted():
    """OpenAI's `include_obfuscation` and vLLM's `continuous_usage_stats: false` change
    nothing: the request is the one with include_usage alone."""
    body = {"messages": MESSAGES, "stream": True}
    got = parse(CHAT, {**body, "stream_options": {"include_usage": True,
                                                   "include_obfuscation": False,
                                                   "continuous_usage_stats": False}})
    assert got == parse(CHAT, {**body, "stream_options": {"include_usage": True}})
    assert got.include_usage


# -- messages: text parts, null content, and their keys ---------------------------------------

def test_text_parts_are_joined_with_newlines():
    """A content list of text parts (what the openai client and LangChain send) is one
    string, the parts joined with "\\n" as vLLM joins them."""
    parts = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    got = parse(CHAT, {"messages": [{"role": "user", "content": parts}]})
    assert got.prompt == [{"role": "user", "content": "first\nsecond"}]


def test_assistant_null_content_name_and_null_keys():
    """An assistant turn with `content: null` is "" ; `name` is accepted and not rendered; a
    key holding null (`refusal`, `tool_calls`) counts as absent, as transformers drops it."""
    messages = [{"role": "user", "content": "hi", "name": "ann"},
                {"role": "assistant", "content": None, "refusal": None, "tool_calls": None},
                {"role": "user", "content": "again"}]
    got = parse(CHAT, {"messages": messages})
    assert got.prompt == [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": ""},
                          {"role": "user", "content": "again"}]


@pytest.mark.parametrize("message,param", [
    ({"role": "user", "content": [{"type": "text", "text": "a"},
                                  {"type": "image_url", "image_url": {"url": "x"}}]},
     "messages[0].content[1].type"),
    ({"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
     "messages[0].content[0].type"),
    ({"role": "user", "content": [{"text": "a"}]}, "messages[0].content[0].type"),
    ({"role": "user", "content": ["a"]}, "messages[0].content[0]"),
    ({"role": "user", "content": [{"type": "text", "text": 3}]}, "messages[0].content[0].text"),
    ({"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {}}]},
     "messages[0].content[0].cache_control"),
    ({"role": "user", "content": None}, "messages[0].content"),
    ({"role": "user", "content": {"text": "a"}}, "messages[0].content"),
    ({"role": "user", "content": "a", "reasoning_content": "b"},
     "messages[0].reasoning_content"),
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
     "messages[0].tool_calls[0].function"),
    ({"role": "user", "content": "a", "tool_calls": []}, "messages[0].tool_calls"),
    ({"role": "tool", "content": "3", "tool_call_id": "1"}, "messages[0].tool_call_id"),
])
def test_message_parts_and_keys_are_named(message, param):
    """A part that is not text, a malformed one, an unknown key in a message or part, null
    content outside an assistant turn, a malformed tool call, tool calls outside an
    assistant turn and a tool result answering no call are each refused with their path
    (tests/serve/test_tools.py has the rest of the tool forms)."""
    with pytest.raises(RequestError) as caught:
        parse(CHAT, {"messages": [message]})
    assert caught.value.param == param


def test_the_field_that_set_the_budget_is_kept():
    """`max_tokens_param` names what the client set the budget with, so a budget past the
    context is refused under that name; completions' default (16) has none, and is cut to
    the room instead of refused."""
    assert parse(COMPLETION, {"prompt": "x"}).max_tokens_param is None
    assert parse(COMPLETION, {"prompt": "x", "max_tokens": 3}).max_tokens_param == "max_tokens"
    chat = parse(CHAT, {"messages": MESSAGES, "max_completion_tokens": 3})
    assert (chat.max_tokens, chat.max_tokens_param) == (3, "max_completion_tokens")
    assert parse(CHAT, {"messages": MESSAGES}).max_tokens_param is None


@pytest.mark.parametrize("prediction, param", [
    (3, "prediction"),
    ({"type": "text", "content": "a"}, "prediction.type"),
    ({"type": "content", "content": 5}, "prediction.content"),
    ({"type": "content", "content": [{"type": "image_url"}]}, "prediction.content[0].type"),
    ({"type": "content", "content": [{"type": "text", "text": 1}]}, "prediction.content[0].text"),
    ({"type": "content", "content": "a", "extra": 1}, "prediction.extra"),
])
def test_a_bad_prediction_is_refused_naming_the_path(prediction, param):
    """OpenAI's `prediction` takes {"type": "content", "content": text or text parts}; any
    other form is a 400 naming the path."""
    with pytest.raises(RequestError) as caught:
        parse(COMPLETION, {"prompt": "x", "prediction": prediction})
    assert caught.value.param == param


def test_a_prediction_is_read_as_one_text():
    """Text parts are joined as they are: the prediction is one text."""
    got = parse(CHAT, {"messages": [{"role": "user", "content": "hi"}], "prediction": {
        "type": "content", "content": [{"type": "text", "text": "ab"},
                                       {"type": "text", "text": "c"}]}})
    assert got.prediction == "abc"


def test_a_prediction_longer_than_the_context_is_refused():
    """A prediction of more tokens than the context leaves after the prompt is a 400 naming
    `prediction`, code context_length_exceeded, before anything is decoded."""
    from onebit.serve import Engine
    from pytest_onebit.serve.toy import CONTEXT, ServedToy

    engine = Engine(ServedToy(1), head="ngram")
    long = parse(COMPLETION, {"prompt": "x", "max_tokens": 4,
                              "prediction": {"type": "content", "content": "a~" * CONTEXT}})
    with pytest.raises(RequestError) as caught:
        engine.check(long)
    assert caught.value.param == "prediction"
    assert caught.value.code == "context_length_exceeded"
