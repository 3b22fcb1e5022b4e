"""Validating `/v1/completions` and `/v1/chat/completions` bodies at the boundary.

`parse(kind, body)` turns the decoded JSON into a `Request` or raises `RequestError` naming
the field. The knobs (`presence_penalty`, `frequency_penalty`, vLLM's `repetition_penalty`,
`logit_bias`, `min_tokens`, `stop_token_ids`, `n`, and `response_format`'s JSON object or JSON
schema, a grammar through onebit.grammar) become an `onebit.processors.Processors` and the
request's own fields; fields onebit does not implement are refused when they would change the
answer (`best_of`, `echo`, `suffix`, tools) rather than silently ignored; fields that change
nothing here (`user`, `model`) are accepted. `speculative` is onebit's
own: false decodes the same request plainly, with no draft head, which is how a black-box
harness compares speculation against the same server's plain decode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from onebit.processors import ProcessorError, Processors
from onebit.sampling import Sampling
from onebit.serve.errors import RequestError

COMPLETION, CHAT = "completion", "chat"
MAX_STOPS = 4          # OpenAI's limit
MAX_TOP_LOGPROBS = 20  # OpenAI's limit for chat; completions' is 5, vLLM allows more
DEFAULT_COMPLETION_TOKENS = 16  # OpenAI's default for /v1/completions
MAX_N = 8               # answers one request may ask for (each is a sequence of its own)
MAX_STOP_TOKEN_IDS = 64

# Fields that would change the answer and that onebit does not do: refused, never ignored.
# Each maps to the value that means "not used", which is accepted.
UNSUPPORTED = {"best_of": 1, "echo": False, "suffix": None, "tools": None, "functions": None}


@dataclass(frozen=True)
class Request:
    """One validated request. `prompt` is a str (completions) or messages (chat); `logprobs`
    is None (none asked) or how many alternatives to list per token (0: the chosen one's
    only); `max_tokens` None means "until the context is full"."""

    kind: str
    prompt: str | list[dict]
    max_tokens: int | None
    stop: tuple[str, ...] = ()
    sampling: Sampling | None = None
    seed: int | None = None
    logprobs: int | None = None
    stream: bool = False
    include_usage: bool = False
    speculative: bool = True
    processors: Processors | None = None  # None: no knob changes a score
    stop_token_ids: tuple[int, ...] = ()  # end the answer (kept, as an EOS is)
    n: int = 1  # independent answers; seeded, answer i draws from seed + i


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _int(body: dict, name: str, *, low: int, high: int | None = None,
         default: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if not _is_int(value):
        raise RequestError(name, f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise RequestError(name, f"{name} must be {bound}, got {value}")
    return value


def _number(body: dict, name: str, *, low: float, high: float, default: float,
            open_low: bool = False) -> float:
    value = body.get(name)
    if value is None:
        return default
    if not _is_number(value):
        raise RequestError(name, f"{name} must be a number, got {value!r}")
    if value > high or value < low or (open_low and value == low):
        interval = f"({low}, {high}]" if open_low else f"[{low}, {high}]"
        raise RequestError(name, f"{name} must be in {interval}, got {value}")
    return float(value)


def _bool(body: dict, name: str, default: bool) -> bool:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise RequestError(name, f"{name} must be true or false, got {value!r}")
    return value


def _text(value: str, where: str) -> str:
    """`value` if it is text a tokenizer can take: JSON's `\\ud800` escapes decode to lone
    surrogates, which are no Unicode characters and no UTF-8; refused naming the field."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise RequestError(where, f"{where} holds invalid Unicode at character {error.start} "
                           f"(a lone surrogate, {value[error.start]!r}): send UTF-8 text") \
            from None
    return value


def _stop(body: dict) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise RequestError("stop", f"stop must be a string or a list of strings, got "
                           f"{type(value).__name__}")
    if len(items) > MAX_STOPS:
        raise RequestError("stop", f"stop takes at most {MAX_STOPS} strings, got {len(items)}")
    for i, item in enumerate(items):
        where = "stop" if isinstance(value, str) else f"stop[{i}]"
        if not isinstance(item, str) or not item:
            raise RequestError(where, f"{where} must be a non-empty string, got {item!r}")
        _text(item, where)
    return tuple(items)


def _refuse_unsupported(body: dict) -> None:
    for name, neutral in UNSUPPORTED.items():
        value = body.get(name)
        if value is None or value == neutral or (name == "logit_bias" and value == {}) \
                or (name in ("tools", "functions") and value == []):
            continue
        raise RequestError(name, f"{name}={str(value)[:60]} is not supported by onebit serve")


def _sampling(body: dict) -> tuple[Sampling | None, int | None]:
    temperature = _number(body, "temperature", low=0.0, high=2.0, default=1.0)
    top_p = _number(body, "top_p", low=0.0, high=1.0, default=1.0, open_low=True)
    top_k = _int(body, "top_k", low=-1, default=0)
    seed = _int(body, "seed", low=0, default=None)
    top_k = 0 if top_k == -1 else top_k  # vLLM's spelling of "every token"
    if temperature == 0.0:
        return None, seed  # greedy: top_k / top_p change nothing at temperature 0
    return Sampling(temperature=temperature, top_k=top_k, top_p=top_p), seed


def _completion_prompt(body: dict) -> str:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]  # a batch of one: OpenAI's SDK sends a str, some clients a list
    if prompt is None:
        raise RequestError("prompt", "prompt is required")
    if not isinstance(prompt, str):
        raise RequestError("prompt", f"prompt must be a string (one prompt per request), got "
                           f"{type(prompt).__name__}")
    if not prompt:
        raise RequestError("prompt", "prompt is empty")
    return _text(prompt, "prompt")


def _messages(body: dict) -> list[dict]:
    messages = body.get("messages")
    if messages is None:
        raise RequestError("messages", "messages is required")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages", "messages must be a non-empty list")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise RequestError(f"messages[{i}]", f"messages[{i}] must be an object, got "
                               f"{type(message).__name__}")
        if not isinstance(message.get("role"), str):
            raise RequestError(f"messages[{i}].role", f"messages[{i}].role must be a string")
        if not isinstance(message.get("content"), str):
            raise RequestError(f"messages[{i}].content", f"messages[{i}].content must be a "
                               "string (onebit serve takes text content only)")
        _text(message["role"], f"messages[{i}].role")
        _text(message["content"], f"messages[{i}].content")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def _logprobs(kind: str, body: dict) -> int | None:
    if kind == COMPLETION:
        # completions: `logprobs: N` asks for the chosen token and N alternatives
        return _int(body, "logprobs", low=0, high=MAX_TOP_LOGPROBS)
    wanted = _bool(body, "logprobs", False)
    top = _int(body, "top_logprobs", low=0, high=MAX_TOP_LOGPROBS)
    if top is not None and not wanted:
        raise RequestError("top_logprobs", "top_logprobs needs logprobs: true")
    return (top or 0) if wanted else None


def _max_tokens(kind: str, body: dict) -> int | None:
    name = "max_tokens"
    if kind == CHAT and body.get("max_completion_tokens") is not None:
        if body.get("max_tokens") is not None:
            raise RequestError("max_completion_tokens",
                               "give max_tokens or max_completion_tokens, not both")
        name = "max_completion_tokens"
    default = DEFAULT_COMPLETION_TOKENS if kind == COMPLETION else None
    return _int(body, name, low=1, default=default)


def _token_ids(body: dict, name: str, limit: int) -> tuple[int, ...]:
    value = body.get(name)
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > limit:
        raise RequestError(name, f"{name} must be a list of at most {limit} token ids")
    for i, item in enumerate(value):
        if not _is_int(item) or item < 0:
            raise RequestError(f"{name}[{i}]", f"{name}[{i}] must be a token id (an integer "
                               f">= 0), got {item!r}")
    return tuple(value)


def _processors(body: dict, stop_token_ids: tuple[int, ...]) -> Processors | None:
    """The knobs as `Processors` (None when none changes a score). The ids min_tokens holds
    back (the model's stop tokens) are added by the engine, which knows them."""
    bias = body.get("logit_bias")
    if bias is not None and not isinstance(bias, dict):
        raise RequestError("logit_bias", "logit_bias must be an object of token id -> bias")
    ids = {}
    for key, value in (bias or {}).items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise RequestError(f"logit_bias[{key!r}]", f"logit_bias keys are token ids, got "
                               f"{key!r}") from None
        if str(token) != str(key).strip() or token < 0:
            raise RequestError(f"logit_bias[{key!r}]", f"logit_bias keys are token ids (integers "
                               f">= 0), got {key!r}")
        ids[token] = value
    fields = {"presence_penalty": body.get("presence_penalty", 0),
              "frequency_penalty": body.get("frequency_penalty", 0),
              "repetition_penalty": body.get("repetition_penalty", 1),
              "logit_bias": ids, "min_tokens": body.get("min_tokens", 0),
              "held": frozenset(stop_token_ids), "grammar": _grammar(body)}
    for name in ("presence_penalty", "frequency_penalty", "repetition_penalty", "min_tokens"):
        if fields[name] is None:
            fields[name] = {"repetition_penalty": 1}.get(name, 0)
    try:
        knobs = Processors(**fields)
    except ProcessorError as error:
        field = error.field if error.field != "held" else "stop_token_ids"
        raise RequestError(field, str(error)) from None
    return knobs if knobs.active or knobs.min_tokens else None


def _grammar(body: dict):
    """OpenAI's `response_format` as an `onebit.grammar.Grammar`: None for absent or
    `{"type": "text"}`; `{"type": "json_object"}`: any JSON object; `{"type": "json_schema",
    "json_schema": {"name": ..., "schema": {...}}}`: JSON conforming to the schema. Anything
    else, or a schema llguidance cannot compile, is refused naming the field."""
    form = body.get("response_format")
    if form is None:
        return None
    if not isinstance(form, dict):
        raise RequestError("response_format", "response_format must be an object such as "
                           "{\"type\": \"json_object\"}")
    kind = form.get("type")
    from onebit.grammar import Grammar, GrammarError

    try:
        if kind == "text":
            return None
        if kind == "json_object":
            return Grammar.json_object()
        if kind == "json_schema":
            spec = form.get("json_schema")
            if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
                raise RequestError("response_format.json_schema",
                                   "response_format.json_schema must be an object whose "
                                   "'schema' is a JSON schema object")
            name = spec.get("name")
            if name is not None and not isinstance(name, str):
                raise RequestError("response_format.json_schema.name",
                                   "response_format.json_schema.name must be a string")
            return Grammar.json_schema(spec["schema"], "response_format.json_schema.schema")
    except GrammarError as error:
        field = error.field if error.field.startswith("response_format") else "response_format"
        raise RequestError(field, str(error)) from None
    raise RequestError("response_format.type", f"response_format.type must be 'text', "
                       f"'json_object' or 'json_schema', got {kind!r}")


def _n(body: dict, stream: bool) -> int:
    n = _int(body, "n", low=1, high=MAX_N, default=1)
    if n > 1 and stream:
        raise RequestError("n", "n > 1 is not streamed by onebit serve: ask without stream, or "
                           "send n requests")
    return n


def parse(kind: str, body: object) -> Request:
    """The `Request` in `body` (decoded JSON) for endpoint `kind` (COMPLETION or CHAT)."""
    if not isinstance(body, dict):
        raise RequestError(None, f"the body must be a JSON object, got {type(body).__name__}")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError("model", f"model must be a string, got {model!r}")
    _refuse_unsupported(body)
    prompt = _completion_prompt(body) if kind == COMPLETION else _messages(body)
    sampling, seed = _sampling(body)
    stream = _bool(body, "stream", False)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise RequestError("stream_options", "stream_options must be an object")
    include_usage = bool(options and options.get("include_usage"))
    if include_usage and not stream:
        raise RequestError("stream_options", "stream_options needs stream: true")
    stop_token_ids = _token_ids(body, "stop_token_ids", MAX_STOP_TOKEN_IDS)
    return Request(kind=kind, prompt=prompt, max_tokens=_max_tokens(kind, body),
                   stop=_stop(body), sampling=sampling, seed=seed,
                   logprobs=_logprobs(kind, body), stream=stream,
                   include_usage=include_usage,
                   speculative=_bool(body, "speculative", True),
                   processors=_processors(body, stop_token_ids),
                   stop_token_ids=stop_token_ids, n=_n(body, stream))
