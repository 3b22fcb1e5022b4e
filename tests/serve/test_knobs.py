"""The knobs over HTTP on SmolLM2, one request at a time and four at once: each knob alone and
all together change the answer, and with speculation on the answer is exactly the same
request's with `speculative: false` (plain decode with the same knobs); `min_tokens` holds
the end of turn back, `stop_token_ids` end the answer, `n` gives independent reproducible
answers, `response_format` answers JSON (conforming to a schema when given one), and every
bad value is a 400 naming the field."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from pytest_onebit.peers.openai_client import Client  # noqa: E402

LIST = "1, 2, 3, 4, 5, 6, 7, 8,"
HELLO = "A: hello\nB: hello\nA: hello\nB: hello\nA:"
QUICK = "What is the capital of France? Answer in one word."
KNOBS = {
    "presence_penalty": (LIST, {"presence_penalty": 2.0}),
    "frequency_penalty": (LIST, {"frequency_penalty": 2.0}),
    "repetition_penalty": (HELLO, {"repetition_penalty": 1.3}),
    "logit_bias": (HELLO, {"logit_bias": {"33662": -100}}),  # " hello" banned
    "all": (HELLO, {"presence_penalty": 0.5, "frequency_penalty": 0.5,
                    "repetition_penalty": 1.2, "logit_bias": {"33662": -100},
                    "min_tokens": 5}),
}


@pytest.fixture(scope="module", params=[None, 4], ids=["one-at-a-time", "parallel-4"])
def client(request):
    from onebit.hub import skip_unless_cached
    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread
    from onebit.text.load import load_text_model

    skip_unless_cached("smollm2")
    model = load_text_model(None, kernel="int8")
    with ServerThread(create_app(Engine(model, head="ngram", parallel=request.param))) as server:
        yield Client(server.url)


def _ids(client: Client, prompt: str, **fields) -> list[int]:
    body = {"prompt": prompt, "max_tokens": 20, "temperature": 0, **fields}
    return client.post("/v1/completions", body)["choices"][0]["token_ids"]


@pytest.mark.parametrize("knob", sorted(KNOBS))
def test_each_knob_changes_the_answer_and_speculation_keeps_it(client, knob):
    """With the knob the greedy answer differs from without it (the knob acts), and with
    speculation on it equals the same request decoded plainly (`speculative: false`): drafts
    are judged against the processed scores, each with its own prefix's history."""
    prompt, fields = KNOBS[knob]
    with_knob = _ids(client, prompt, **fields)
    assert with_knob != _ids(client, prompt), f"{knob} changed nothing"
    assert with_knob == _ids(client, prompt, speculative=False, **fields)


def test_min_tokens_holds_the_end_of_turn_back(client):
    """A chat answered in a few tokens ends later with min_tokens 12: no end-of-turn token
    before the 12th, and the same answer plainly."""
    body = {"messages": [{"role": "user", "content": QUICK}], "max_tokens": 30,
            "temperature": 0}
    short = client.post("/v1/chat/completions", body)["choices"][0]["token_ids"]
    held = client.post("/v1/chat/completions", {**body, "min_tokens": 12})["choices"][0]
    assert len(short) < 12 and len(held["token_ids"]) >= 12
    assert 2 not in held["token_ids"][:12]
    plain = client.post("/v1/chat/completions", {**body, "min_tokens": 12,
                                                  "speculative": False})["choices"][0]
    assert held["token_ids"] == plain["token_ids"]


def test_stop_token_ids_end_the_answer_on_that_token(client):
    """A stop token id ends the answer at its first occurrence, kept as the last id, with
    finish_reason "stop", inside an accepted block or not."""
    ids = _ids(client, HELLO)
    stop = ids[3]
    got = client.post("/v1/completions", {"prompt": HELLO, "max_tokens": 20, "temperature": 0,
                                           "stop_token_ids": [stop]})["choices"][0]
    assert got["token_ids"] == ids[:ids.index(stop) + 1]
    assert got["finish_reason"] == "stop"


def test_n_answers_are_independent_and_reproducible(client):
    """n = 3 at temperature 0.9 with a seed: three choices indexed 0..2, not all the same,
    the same three again for the same seed, and usage counting every answer's tokens."""
    body = {"prompt": HELLO, "max_tokens": 8, "temperature": 0.9, "seed": 5, "n": 3}
    first = client.post("/v1/completions", body)
    again = client.post("/v1/completions", body)
    answers = [c["token_ids"] for c in first["choices"]]
    assert [c["index"] for c in first["choices"]] == [0, 1, 2]
    assert len({tuple(a) for a in answers}) > 1
    assert answers == [c["token_ids"] for c in again["choices"]]
    assert first["usage"]["completion_tokens"] == sum(len(a) for a in answers)


PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 24},
    "age": {"type": "integer", "minimum": 0, "maximum": 130},
    "city": {"type": "string", "maxLength": 24}},
    "required": ["name", "age", "city"], "additionalProperties": False}


@pytest.mark.parametrize("form", ["json_schema", "json_object"])
@pytest.mark.parametrize("temperature", [0, 0.8])
def test_response_format_answers_are_json_and_speculation_keeps_them(client, form,
                                                                   temperature):
    """A chat asked for a person with `response_format` (a JSON schema, or any JSON object),
    greedy and seeded-sampled: the answer parses, conforms to the schema (jsonschema) or is a
    JSON object, and ends with finish_reason "stop" because the JSON is complete. Greedy, it is
    token for token the same request's answer with `speculative: false`; sampled with a seed,
    the same answer again (a sampled speculative answer draws differently from a plain one:
    its distribution is what the sampling contract holds, on the toy's grammar)."""
    import json

    import jsonschema

    fmt = ({"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
           if form == "json_schema" else {"type": "json_object"})
    body = {"messages": [{"role": "user", "content": "Make up a person: name, age, city. "
                          "Answer in JSON."}], "max_tokens": 80, "response_format": fmt,
            "temperature": temperature, "seed": 3}
    got = client.post("/v1/chat/completions", body)["choices"][0]
    value = json.loads(got["message"]["content"])
    if form == "json_schema":
        jsonschema.validate(value, PERSON)
    assert isinstance(value, dict) and got["finish_reason"] == "stop"
    again = {**body, "speculative": False} if temperature == 0 else body
    assert got["token_ids"] == client.post("/v1/chat/completions", again)["choices"][0][
        "token_ids"]


@pytest.mark.parametrize("fields, param", [
    ({"logit_bias": {"49152": 1}}, "logit_bias[49152]"),
    ({"logit_bias": {"x": 1}}, "logit_bias['x']"),
    ({"logit_bias": {"3": 101}}, "logit_bias[3]"),
    ({"stop_token_ids": [1, 49152]}, "stop_token_ids[1]"),
    ({"stop_token_ids": "2"}, "stop_token_ids"),
    ({"min_tokens": -1}, "min_tokens"),
    ({"presence_penalty": 2.5}, "presence_penalty"),
    ({"repetition_penalty": 0}, "repetition_penalty"),
    ({"n": 9}, "n"),
    ({"n": 2, "stream": True}, "n"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "schema": {"type": "nonsense-type"}}}}, "response_format.json_schema.schema"),
    ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
])
def test_bad_knobs_are_400_naming_the_field(client, fields, param):
    """Every value the model cannot honour is a 400 whose error JSON's `param` is the field."""
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        client.root + "/v1/completions",
        data=json.dumps({"prompt": HELLO, "max_tokens": 4, **fields}).encode(),
        headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)
    assert caught.value.code == 400
    assert json.loads(caught.value.read())["error"]["param"] == param


def test_generate_takes_processors_and_speculation_keeps_their_text(smollm2_model):
    """`onebit.generate(..., processors=...)` on SmolLM2: the knobs change the greedy text, and
    prompt lookup under them gives exactly plain decoding's text with the same knobs."""
    import onebit

    knobs = onebit.Processors(repetition_penalty=1.3, logit_bias={33662: -100.0})
    prompt = "A: hello\nB: hello\nA: hello\nB: hello\nA:"
    plain = onebit.generate(smollm2_model, prompt, chat=False, max_tokens=24, head="none",
                            processors=knobs)
    spec = onebit.generate(smollm2_model, prompt, chat=False, max_tokens=24, head="ngram",
                           processors=knobs)
    bare = onebit.generate(smollm2_model, prompt, chat=False, max_tokens=24, head="none")
    assert list(spec.result.tokens) == list(plain.result.tokens)
    assert list(plain.result.tokens) != list(bare.result.tokens)
    with pytest.raises(ValueError, match="processors must be an onebit.Processors"):
        onebit.generate(smollm2_model, prompt, max_tokens=2, processors={"min_tokens": 3})


@pytest.fixture(scope="module")
def smollm2_model():
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model

    skip_unless_cached("smollm2")
    return load_text_model(None, kernel="int8")
