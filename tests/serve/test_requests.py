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
