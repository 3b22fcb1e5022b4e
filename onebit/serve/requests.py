"""Validating `/v1/completions` and `/v1/chat/completions` bodies at the boundary.

`parse(kind, body)` turns the decoded JSON into a `Request` or raises `RequestError` naming
the field. The knobs (`presence_penalty`, `frequency_penalty`, vLLM's `repetition_penalty`,
`logit_bias`, `min_tokens`, `stop_token_ids`, `n`, and `response_format`'s JSON object or JSON
schema, a grammar through onebit.grammar) become an `onebit.processors.Processors` and the
request's own fields; fields onebit does not implement are refused when they would change the
answer (`best_of`, `echo`, `suffix`, the legacy `functions`) rather than silently ignored;
fields that change nothing here (`user`, `model`) are accepted. Chat's `tools`, `tool_choice`
and `parallel_tool_calls`, and messages' `tool_calls` / `tool_call_id`, are checked by
onebit.serve.tools and carried as `Request.tools`. `speculative` is onebit's
own: false decodes the same request plainly, with no draft head, which is how a black-box
harness compares speculation against the same server's plain decode.

The boundary is an allow-list per endpoint: a field is read (`READ`), accepted and ignored
because it cannot change the answer (`IGNORED`), or refused unless it holds the value that
means "not used" (`UNSUPPORTED`); any other name is a 400 naming it. The same holds inside
`response_format`, its `json_schema`, `stream_options`, each message and each content part,
so a field a client sends is never silently dropped when it could have changed the answer.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onebit.processors import ProcessorError, Processors
from onebit.sampling import Sampling
from onebit.serve.errors import RequestError
from onebit.serve.fields import checked_text, is_jsonable, is_neutral, refuse_unknown

if TYPE_CHECKING:
    from onebit.serve.tools import ToolSpec

COMPLETION, CHAT = "completion", "chat"
MAX_STOPS = 4          # OpenAI's limit
MAX_TOP_LOGPROBS = 20  # OpenAI's limit for chat; completions' is 5, vLLM allows more
DEFAULT_COMPLETION_TOKENS = 16  # OpenAI's default for /v1/completions
MAX_N = 8               # answers one request may ask for (each is a sequence of its own)
MAX_STOP_TOKEN_IDS = 64

# The fields `parse` reads, per endpoint.
READ_BOTH = frozenset({
    "model", "stream", "stream_options", "stop", "temperature", "top_p", "top_k", "seed", "n",
    "logprobs", "max_tokens", "presence_penalty", "frequency_penalty", "repetition_penalty",
    "logit_bias", "min_tokens", "stop_token_ids", "response_format", "speculative",
    "prediction"})
READ = {COMPLETION: READ_BOTH | {"prompt"},
        CHAT: READ_BOTH | {"messages", "top_logprobs", "max_completion_tokens", "tools",
                           "tool_choice", "parallel_tool_calls"}}

# Fields that cannot change the answer, accepted whatever they hold and ignored: who asks
# (`user`, `safety_identifier`), what OpenAI would keep or bill (`metadata`, `store`,
# `service_tier`), a cache hint (`prompt_cache_key`) and vLLM's `return_token_ids` (the ids
# are always returned).
IGNORED_BOTH = frozenset({"user", "metadata", "store", "service_tier", "safety_identifier",
                          "prompt_cache_key", "return_token_ids"})
IGNORED = {COMPLETION: IGNORED_BOTH, CHAT: IGNORED_BOTH}

# Fields that would change the answer and that onebit does not do: refused by name, never
# ignored. Each maps to the values that mean "not used", which are accepted (null always is),
# and to what to do instead.
_NO_TOOLS = "tools are served on /v1/chat/completions and /v1/responses"
_LEGACY = "the legacy functions API is not served: send tools (and tool_choice)"
UNSUPPORTED_BOTH = {
    "best_of": ((1,), "one sequence is decoded per answer; n asks for more answers"),
    "echo": ((False,), "the answer never repeats the prompt"),
    "functions": (([],), _LEGACY),
    "ignore_eos": ((False,), "the model's end-of-turn token always ends the answer; "
                   "min_tokens holds it back for that many tokens"),
    "min_p": ((0,), "top_p and top_k are the filters served"),
    "skip_special_tokens": ((True,), "special tokens are never in the text"),
    "include_stop_str_in_output": ((False,), "the text ends before its stop string"),
    "grammar": ((), "llama.cpp's GBNF is not served: use response_format "
                "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": ...}}"),
    "json_schema": ((), "send the schema as response_format {\"type\": \"json_schema\", "
                    "\"json_schema\": {\"name\": ..., \"schema\": ...}}"),
}
UNSUPPORTED = {
    COMPLETION: {**UNSUPPORTED_BOTH, "tools": (([],), _NO_TOOLS),
                 "suffix": (("",), "onebit serve does not fill in the middle")},
    CHAT: {**UNSUPPORTED_BOTH,
           "function_call": (("none", "auto"), _LEGACY),
           "continue_final_message": ((False,), "the chat template always opens a new "
                                      "assistant turn"),
           "add_generation_prompt": ((True,), "the chat template always opens a new "
                                     "assistant turn"),
           "modalities": ((["text"],), "onebit serve answers text only"),
           "audio": ((), "onebit serve answers text only"),
           "reasoning_effort": ((), "the chat template is rendered without it"),
           "verbosity": ((), "the chat template is rendered without it"),
           "web_search_options": ((), "onebit serve does not search")},
}

# The keys allowed inside the nested objects (anything else is refused naming its path).
MESSAGE_KEYS = frozenset({"role", "content", "name"})  # `name`: accepted, not rendered
TEXT_PART_KEYS = frozenset({"type", "text"})
STREAM_OPTION_KEYS = frozenset({"include_usage", "include_obfuscation",
                                "continuous_usage_stats"})
JSON_SCHEMA_KEYS = frozenset({"name", "schema", "strict", "description"})
RESPONSE_FORMAT_KEYS = {"text": frozenset({"type"}),
                        "json_object": frozenset({"type", "schema"}),  # schema: llama.cpp's
                        "json_schema": frozenset({"type", "json_schema"})}


@dataclass(frozen=True)
class Request:
    """One validated request. `prompt` is a str (completions) or messages (chat); `logprobs`
    is None (none asked) or how many alternatives to list per token (0: the chosen one's
    only); `max_tokens` None means "until the context is full". `max_tokens_param` is the
    field the client set it with (`max_tokens` or `max_completion_tokens`), None for
    completions' default of 16: a budget the client asked for past the context is refused
    naming that field, the default is cut to what the context leaves."""

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
    max_tokens_param: str | None = "max_tokens"
    prediction: str | None = None  # OpenAI's predicted outputs: a guess of the answer
    tools: ToolSpec | None = None  # chat's tools (onebit.serve.tools); None: none given


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


def _bool(body: dict, name: str, default: bool, where: str = "") -> bool:
    """`body[name]` as a bool; refused as `where.name` (a nested object's path) otherwise."""
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        field = f"{where}.{name}" if where else name
        raise RequestError(field, f"{field} must be true or false, got {value!r}")
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
        checked_text(item, where)
    return tuple(items)


def _refuse_fields(kind: str, body: dict) -> None:
    """Every field of `body` read, ignored, or refused by name: an unsupported one unless it
    holds its "not used" value, an unknown one always."""
    unsupported = UNSUPPORTED[kind]
    for name, value in body.items():
        if name in unsupported:
            neutrals, why = unsupported[name]
            if not is_neutral(value, neutrals):
                shown = json.dumps(value)[:60] if is_jsonable(value) else repr(value)[:60]
                raise RequestError(name, f"{name}={shown} is not supported by onebit serve: "
                                   f"{why}")
    refuse_unknown(body, READ[kind] | IGNORED[kind] | unsupported.keys(), "", "the answer")


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
    return checked_text(prompt, "prompt")


def _messages(body: dict) -> list[dict]:
    """The messages as {"role", "content"} dicts with text content, an assistant's
    `tool_calls` and a tool result's `tool_call_id` added as onebit.serve.tools checks them.
    Another key is refused by name, except `name`, accepted and not rendered; a key holding
    null counts as absent, as transformers drops it."""
    from onebit.serve.tools import MESSAGE_KEYS as TOOL_KEYS
    from onebit.serve.tools import message_fields

    messages = body.get("messages")
    if messages is None:
        raise RequestError("messages", "messages is required")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages", "messages must be a non-empty list")
    checked, call_ids = [], set()
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise RequestError(where, f"{where} must be an object, got "
                               f"{type(message).__name__}")
        role = message.get("role")
        extra = TOOL_KEYS.get(role, frozenset()) if isinstance(role, str) else frozenset()
        refuse_unknown([k for k, v in message.items() if v is not None], MESSAGE_KEYS | extra,
                        where, "the prompt")
        if not isinstance(role, str):
            raise RequestError(f"{where}.role", f"{where}.role must be a string")
        checked.append({"role": checked_text(role, f"{where}.role"),
                        "content": _content(role, message.get("content"), where),
                        **message_fields(role, message, where, call_ids)})
    return checked


def _content(role: str, content, where: str) -> str:
    """A message's content as one string: a string as it is; a list of text parts joined with
    "\n", as vLLM joins them (`[{"type": "text", "text": ...}]`, what the openai client and
    LangChain send); null only for an assistant turn (""). Another part type (`image_url`,
    `input_audio`, ...) is refused naming `messages[i].content[j].type`."""
    if content is None and role == "assistant":
        return ""
    return _text_or_parts(content, f"{where}.content", "\n", "the prompt")


def _text_or_parts(content, where: str, joiner: str, what: str) -> str:
    """`content` (at `where`) as one string: a string as it is, or a list of text parts
    (`{"type": "text", "text": ...}`) joined with `joiner`; any other part type refused
    naming `where[j].type`."""
    if isinstance(content, str):
        return checked_text(content, where)
    if not isinstance(content, list):
        raise RequestError(where, f"{where} must be a string or a list of text parts "
                           "(onebit serve takes text content only)")
    texts = []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        if not isinstance(part, dict):
            raise RequestError(at, f"{at} must be an object such as "
                               "{\"type\": \"text\", \"text\": ...}")
        if part.get("type") != "text":
            raise RequestError(f"{at}.type", f"{at}.type is {part.get('type')!r}: onebit "
                               "serve takes text parts only (\"type\": \"text\")")
        refuse_unknown(part, TEXT_PART_KEYS, at, what)
        if not isinstance(part.get("text"), str):
            raise RequestError(f"{at}.text", f"{at}.text must be a string")
        texts.append(checked_text(part["text"], f"{at}.text"))
    return joiner.join(texts)


def _prediction(body: dict) -> str | None:
    """OpenAI's predicted outputs: `{"type": "content", "content": str | [text parts]}`, the
    parts joined as they are (a prediction is one text). Its tokens become the drafts
    (onebit.heads.prediction); the answer is the answer without it."""
    value = body.get("prediction")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RequestError("prediction", "prediction must be an object such as "
                           "{\"type\": \"content\", \"content\": \"...\"}")
    refuse_unknown(value, frozenset({"type", "content"}), "prediction", "the drafts")
    if value.get("type") != "content":
        raise RequestError("prediction.type", f"prediction.type must be 'content', got "
                           f"{value.get('type')!r}")
    return _text_or_parts(value.get("content"), "prediction.content", "", "the drafts")


def _logprobs(kind: str, body: dict) -> int | None:
    if kind == COMPLETION:
        # completions: `logprobs: N` asks for the chosen token and N alternatives
        return _int(body, "logprobs", low=0, high=MAX_TOP_LOGPROBS)
    wanted = _bool(body, "logprobs", False)
    top = _int(body, "top_logprobs", low=0, high=MAX_TOP_LOGPROBS)
    if top is not None and not wanted:
        raise RequestError("top_logprobs", "top_logprobs needs logprobs: true")
    return (top or 0) if wanted else None


def _max_tokens(kind: str, body: dict) -> tuple[int | None, str | None]:
    """The budget and the field that set it (None: completions' default, or none given)."""
    name = "max_tokens"
    if kind == CHAT and body.get("max_completion_tokens") is not None:
        if body.get("max_tokens") is not None:
            raise RequestError("max_completion_tokens",
                               "give max_tokens or max_completion_tokens, not both")
        name = "max_completion_tokens"
    default = DEFAULT_COMPLETION_TOKENS if kind == COMPLETION else None
    value = _int(body, name, low=1, default=default)
    return value, (name if body.get(name) is not None else None)


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


def _processors(body: dict, stop_token_ids: tuple[int, ...],
                tools: ToolSpec | None = None) -> Processors | None:
    """The knobs as `Processors` (None when none changes a score). The ids min_tokens holds
    back (the model's stop tokens) are added by the engine, which knows them; `tools` make
    the grammar theirs (onebit.serve.tools.ToolSpec.grammar)."""
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
    if tools is not None:
        fields["grammar"] = tools.grammar(fields["grammar"])
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
    `{"type": "text"}`; `{"type": "json_object"}`: any JSON object, or with llama.cpp's
    `"schema": {...}` JSON conforming to that schema; `{"type": "json_schema", "json_schema":
    {"name": ..., "schema": {...}}}`: JSON conforming to the schema. Anything else (an
    unknown key included), or a schema llguidance cannot compile, is refused naming the
    field."""
    form = body.get("response_format")
    if form is None:
        return None
    if not isinstance(form, dict):
        raise RequestError("response_format", "response_format must be an object such as "
                           "{\"type\": \"json_object\"}")
    kind = form.get("type")
    from onebit.grammar import Grammar, GrammarError

    if kind in RESPONSE_FORMAT_KEYS:
        refuse_unknown(form, RESPONSE_FORMAT_KEYS[kind], "response_format", "the answer")
    try:
        if kind == "text":
            return None
        if kind == "json_object" and form.get("schema") is not None:
            # llama.cpp's spelling of a schema: the answer conforms to it, as there
            if not isinstance(form["schema"], dict):
                raise RequestError("response_format.schema", "response_format.schema must be "
                                   "a JSON schema object")
            return Grammar.json_schema(form["schema"], "response_format.schema")
        if kind == "json_object":
            return Grammar.json_object()
        if kind == "json_schema":
            return Grammar.json_schema(_json_schema(form), "response_format.json_schema.schema")
    except GrammarError as error:
        field = error.field if error.field.startswith("response_format") else "response_format"
        raise RequestError(field, str(error)) from None
    raise RequestError("response_format.type", f"response_format.type must be 'text', "
                       f"'json_object' or 'json_schema', got {kind!r}")


def _json_schema(form: dict) -> dict:
    """`response_format.json_schema`'s schema, its other fields checked: `name` and
    `description` strings, `strict` a bool (the schema is always enforced)."""
    where = "response_format.json_schema"
    spec = form.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        raise RequestError(where, f"{where} must be an object whose 'schema' is a JSON schema "
                           "object")
    refuse_unknown(spec, JSON_SCHEMA_KEYS, where, "the answer")
    for key, kind in (("name", str), ("description", str), ("strict", bool)):
        value = spec.get(key)
        if value is not None and not isinstance(value, kind):
            shape = "true or false" if kind is bool else "a string"
            raise RequestError(f"{where}.{key}", f"{where}.{key} must be {shape}")
    return spec["schema"]


def _stream_options(body: dict, stream: bool) -> bool:
    """Whether the stream ends with a usage chunk. `include_obfuscation` (OpenAI's padding of
    each chunk) changes no answer and is ignored; vLLM's `continuous_usage_stats` would put
    usage in every chunk, which onebit does not, so only false is taken."""
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise RequestError("stream_options", "stream_options must be an object")
    refuse_unknown(options, STREAM_OPTION_KEYS, "stream_options", "the stream")
    include_usage = _bool(options, "include_usage", False, "stream_options")
    _bool(options, "include_obfuscation", False, "stream_options")
    if _bool(options, "continuous_usage_stats", False, "stream_options"):
        raise RequestError("stream_options.continuous_usage_stats",
                           "stream_options.continuous_usage_stats=true is not supported by "
                           "onebit serve: usage comes once, in the last chunk (include_usage)")
    if include_usage and not stream:
        raise RequestError("stream_options", "stream_options needs stream: true")
    return include_usage


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
    _refuse_fields(kind, body)
    prompt = _completion_prompt(body) if kind == COMPLETION else _messages(body)
    sampling, seed = _sampling(body)
    stream = _bool(body, "stream", False)
    include_usage = _stream_options(body, stream)
    stop_token_ids = _token_ids(body, "stop_token_ids", MAX_STOP_TOKEN_IDS)
    max_tokens, max_tokens_param = _max_tokens(kind, body)
    tools = None
    if kind == CHAT:
        from onebit.serve.tools import parse_tools

        tools = parse_tools(body)
    return Request(kind=kind, prompt=prompt, max_tokens=max_tokens,
                   stop=_stop(body), sampling=sampling, seed=seed,
                   logprobs=_logprobs(kind, body), stream=stream,
                   include_usage=include_usage,
                   speculative=_bool(body, "speculative", True),
                   processors=_processors(body, stop_token_ids, tools),
                   stop_token_ids=stop_token_ids, n=_n(body, stream),
                   max_tokens_param=max_tokens_param, tools=tools,
                   prediction=_prediction(body))
