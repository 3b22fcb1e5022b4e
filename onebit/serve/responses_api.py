"""OpenAI's Responses API (`POST /v1/responses`, `GET /v1/responses/{id}`): text in, text out.

A Responses body is validated at the boundary and turned into an ordinary chat `Request`
(`parse_response_request`): `input` and `instructions` become messages, `max_output_tokens`,
`temperature`, `top_p` and `text.format` become the chat body's `max_tokens`, `temperature`,
`top_p` and `response_format`, and `onebit.serve.requests.parse` reads that body, so the
engine, the knobs, the context checks and the grammar are chat's, and a Responses answer is
the same decode as the same messages sent to `/v1/chat/completions`. An error names the
Responses field (`max_output_tokens`, `text.format.schema`, `input[2].content[0].type`), never
the chat field it was mapped to.

The boundary is an allow-list, as chat's is: a field is read, accepted and ignored because it
cannot change the answer, or refused unless it holds the value that means "not used"; any
other name is a 400 naming it. Input items are messages (roles user, system, developer,
assistant; text parts `input_text` / `output_text`), `function_call` items and
`function_call_output` items; a `reasoning` or other item, or an `input_image` /
`input_file` part, is refused naming its path.

Tools are chat's (onebit.serve.tools), mapped at the boundary: a function tool
`{"type": "function", "name", "description", "parameters", "strict"}` becomes chat's
`{"type": "function", "function": {...}}` (another tool type, `web_search`, `file_search`,
..., is refused naming `tools[i].type`); `tool_choice` "none" / "auto" / "required" /
`{"type": "function", "name"}` becomes chat's; a `function_call` input item joins the
assistant turn before it as one of its `tool_calls`, a `function_call_output` item is a tool
message (`tool_call_id` its `call_id`). The answer's calls, parsed as chat parses them, are
`function_call` output items (`fc_<hex>` ids, chat's `call_<hex>` as `call_id`) after the
message item, which is left out when the answer is calls only; the stored conversation keeps
them, so `previous_response_id` continues it.

`previous_response_id` continues a conversation kept by `ResponseStore`: a bounded, in-memory,
thread-safe store (the newest 256 responses and at most 64 Mi characters of text, oldest out).
The stored conversation is the earlier inputs and answers; as OpenAI does, an earlier
response's `instructions` are not carried over. `store: false` keeps nothing. A streamed
answer is OpenAI's event sequence, `event: <type>` and `data: <json>` lines with an increasing
`sequence_number`, and no `[DONE]` line.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from onebit.serve.engine import Completion, Engine
from onebit.serve.errors import RequestError
from onebit.serve.fields import checked_text, is_jsonable, is_neutral, refuse_unknown
from onebit.serve.requests import CHAT, Request, parse
from onebit.serve.stream import PieceChannel
from onebit.serve.tools import parse_answer

# The body's fields: read, accepted and ignored (they cannot change the answer), or refused
# unless "not used" (null always is).
READ = frozenset({"model", "input", "instructions", "max_output_tokens", "temperature",
                  "top_p", "stream", "previous_response_id", "store", "metadata", "user",
                  "text", "parallel_tool_calls", "tool_choice", "tools"})
IGNORED = frozenset({"safety_identifier", "service_tier", "prompt_cache_key"})
_FUNCTIONS_ONLY = "function tools only are served ({\"type\": \"function\", \"name\": ...})"
UNSUPPORTED = {
    "include": (([],), "onebit serve adds nothing to the output"),
    "truncation": (("disabled",), "a conversation past the context is refused, never cut"),
    "background": ((False,), "a response is answered while the request waits"),
    "conversation": ((), "continue with previous_response_id"),
    "prompt": ((), "prompt templates are not served: send input and instructions"),
    "top_logprobs": ((0,), "the Responses API is served without logprobs: ask "
                     "/v1/chat/completions"),
    "max_tool_calls": ((), "parallel_tool_calls false limits an answer to one call"),
}
TOOL_CHOICES = ("none", "auto", "required")
#: keys of a function tool (the Responses API's flat form) and of the input items for calls
TOOL_KEYS = frozenset({"type", "name", "description", "parameters", "strict"})
CALL_ITEM_KEYS = frozenset({"type", "call_id", "name", "arguments", "id", "status"})
OUTPUT_ITEM_KEYS = frozenset({"type", "call_id", "output", "id", "status"})
ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
# keys of an input message item (`id`, `status`, `phase`: an earlier output item sent back)
MESSAGE_KEYS = frozenset({"type", "role", "content", "id", "status", "phase"})
PART_KEYS = {"input_text": frozenset({"type", "text", "prompt_cache_breakpoint"}),
             "output_text": frozenset({"type", "text", "annotations", "logprobs"})}
TEXT_KEYS = frozenset({"format", "verbosity"})
FORMAT_KEYS = {"text": frozenset({"type"}), "json_object": frozenset({"type"}),
               "json_schema": frozenset({"type", "name", "schema", "strict", "description"})}
REASONING_KEYS = frozenset({"effort", "summary", "generate_summary"})

#: how many responses the store keeps, and how many characters of their text, at most
STORE_LIMIT = 256
STORE_CHARS = 64 << 20


@dataclass
class Stored:
    """One kept response: its body (what GET answers) and the conversation a continuation
    starts with (every input message and answer so far, no instructions)."""

    body: dict
    conversation: list[dict]
    chars: int = 0


class ResponseStore:
    """The responses kept for `previous_response_id` and GET: at most `limit` of them and
    `max_chars` characters of conversation, the oldest dropped first. Thread-safe."""

    def __init__(self, limit: int = STORE_LIMIT, max_chars: int = STORE_CHARS) -> None:
        if limit < 1 or max_chars < 1:
            raise ValueError(f"the store keeps at least one response, got limit={limit}, "
                             f"max_chars={max_chars}")
        self.limit = limit
        self.max_chars = max_chars
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, Stored] = OrderedDict()
        self._chars = 0

    def put(self, body: dict, conversation: list[dict]) -> None:
        chars = sum(len(m["content"]) + sum(len(c["function"]["arguments"]) + len(c["id"])
                                            for c in m.get("tool_calls") or ())
                    for m in conversation)
        with self._lock:
            old = self._kept.pop(body["id"], None)
            if old is not None:
                self._chars -= old.chars
            self._kept[body["id"]] = Stored(body, conversation, chars)
            self._chars += chars
            while len(self._kept) > self.limit or (self._chars > self.max_chars
                                                   and len(self._kept) > 1):
                _, dropped = self._kept.popitem(last=False)
                self._chars -= dropped.chars

    def get(self, response_id: str) -> Stored | None:
        with self._lock:
            return self._kept.get(response_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)


@dataclass
class ResponseRequest:
    """One validated Responses request: the chat `request` the engine decodes, the
    `conversation` it continues and adds (without instructions), the fields the response
    object repeats (`echo`), and the ids and clock its body and events share."""

    request: Request
    conversation: list[dict]
    echo: dict
    store: bool
    id: str = field(default_factory=lambda: "resp_" + uuid.uuid4().hex)
    message_id: str = field(default_factory=lambda: "msg_" + uuid.uuid4().hex)
    created_at: int = field(default_factory=lambda: int(time.time()))
    #: the answer's (content, calls) as a stream parsed it (None: parsed from the text)
    parsed: tuple[str | None, list[dict]] | None = None

    @property
    def parses(self) -> bool:
        """Whether the answer's calls are parsed out of its text (tools, and a tool_choice
        other than "none")."""
        return self.request.tools is not None and self.request.tools.parses

    def answer(self, completion: Completion) -> tuple[str, list[dict]]:
        """The answer's (text content, chat's calls): its whole text and no calls without
        tools (onebit.serve.tools.parse_answer with them)."""
        if not self.parses:
            return completion.text, []
        if self.parsed is None:
            self.parsed = parse_answer(self.request.tools, completion.text)
        content, calls = self.parsed
        return content or "", calls

    def message(self, text: str, status: str) -> dict:
        """The output message item."""
        content = [] if status == "in_progress" else [_output_text(text)]
        return {"type": "message", "id": self.message_id, "status": status,
                "role": "assistant", "content": content}

    def output(self, completion: Completion, status: str) -> list[dict]:
        """The output items: the message (when there is text, or no call), then a
        function_call item per call."""
        content, calls = self.answer(completion)
        items = [self.message(content, status)] if content or not calls else []
        return items + [function_call(call) for call in calls]

    def body(self, model: str, completion: Completion | None = None, *,
             error: dict | None = None) -> dict:
        """The response object: in progress (no completion yet), failed (`error`), or
        finished: "completed", or "incomplete" with reason max_output_tokens when the budget
        (or the context) ended the answer, or "cancelled"."""
        status, details, output, used = "in_progress", None, [], None
        if error is not None:
            status = "failed"
        elif completion is not None:
            status = {"stop": "completed", "length": "incomplete"}.get(
                completion.finish_reason, "cancelled")
            if status == "incomplete":
                details = {"reason": "max_output_tokens"}
            item = "incomplete" if status == "cancelled" else status
            output = self.output(completion, item)
            made = len(completion.token_ids)
            used = {"input_tokens": completion.prompt_tokens,
                    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                    "output_tokens": made, "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": completion.prompt_tokens + made}
        body = {"id": self.id, "object": "response", "created_at": self.created_at,
                "status": status, "error": error, "incomplete_details": details,
                "model": model, "output": output, "usage": used, **self.echo}
        if completion is not None:
            body["onebit"] = completion.stats
        return body

    def keep(self, store: ResponseStore, body: dict, completion: Completion) -> None:
        """Keep a finished response (when the request let it be kept) for continuations."""
        if self.store and body["status"] in ("completed", "incomplete"):
            content, calls = self.answer(completion)
            answer = {"role": "assistant", "content": content}
            if calls:
                answer["tool_calls"] = calls
            store.put(body, [*self.conversation, answer])


def _output_text(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": []}


def function_call(call: dict) -> dict:
    """Chat's call (onebit.serve.tools) as a function_call output item: its id is the
    call_id, the item's id `fc_` and the same hex."""
    return {"type": "function_call", "id": "fc_" + call["id"].removeprefix("call_"),
            "call_id": call["id"], "name": call["function"]["name"],
            "arguments": call["function"]["arguments"], "status": "completed"}


def _shown(value) -> str:
    return json.dumps(value)[:60] if is_jsonable(value) else repr(value)[:60]


def _refuse_fields(body: dict) -> None:
    for name, value in body.items():
        if name in UNSUPPORTED:
            neutrals, why = UNSUPPORTED[name]
            if not is_neutral(value, neutrals):
                raise RequestError(name, f"{name}={_shown(value)} is not supported by onebit "
                                   f"serve: {why}")
    refuse_unknown(body, READ | IGNORED | UNSUPPORTED.keys() | {"reasoning"}, "",
                    "the answer")
    reasoning = body.get("reasoning")
    if reasoning is not None:  # "not used": null, or an object whose every field is null
        if not isinstance(reasoning, dict) or any(v is not None for v in reasoning.values()):
            raise RequestError("reasoning", f"reasoning={_shown(reasoning)} is not supported "
                               "by onebit serve: the chat template is rendered without it")
        refuse_unknown(reasoning, REASONING_KEYS, "reasoning", "the answer")


def _string(body: dict, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise RequestError(name, f"{name} must be a string, got {_shown(value)}")
    return None if value is None else checked_text(value, name)


def _part_text(part, at: str) -> str:
    if not isinstance(part, dict):
        raise RequestError(at, f"{at} must be an object such as "
                           "{\"type\": \"input_text\", \"text\": ...}")
    kind = part.get("type")
    if kind not in PART_KEYS:
        raise RequestError(f"{at}.type", f"{at}.type is {_shown(kind)}: onebit serve takes "
                           "text parts only (\"input_text\", \"output_text\")")
    refuse_unknown([k for k, v in part.items() if v is not None], PART_KEYS[kind], at,
                    "the prompt")
    if not isinstance(part.get("text"), str):
        raise RequestError(f"{at}.text", f"{at}.text must be a string")
    return checked_text(part["text"], f"{at}.text")


def _item(item, where: str) -> dict:
    """One input item as a chat message {"role", "content"}: a message (the easy form
    {"role", "content"} or {"type": "message", ...}); any other item type is refused."""
    if not isinstance(item, dict):
        raise RequestError(where, f"{where} must be an object such as "
                           "{\"role\": \"user\", \"content\": ...}")
    kind = item.get("type")
    if kind not in (None, "message"):
        raise RequestError(f"{where}.type", f"{where}.type is {_shown(kind)}: onebit serve "
                           "takes message, function_call and function_call_output items "
                           "only")
    refuse_unknown([k for k, v in item.items() if v is not None], MESSAGE_KEYS, where,
                    "the prompt")
    role = item.get("role")
    if role not in ROLES:
        raise RequestError(f"{where}.role", f"{where}.role must be one of "
                           f"{', '.join(ROLES)}, got {_shown(role)}")
    return {"role": ROLES[role], "content": _text_or_parts(item.get("content"),
                                                          f"{where}.content")}


def _text_or_parts(value, where: str) -> str:
    """A string as it is, or a list of text parts joined with "\n" (as chat's are)."""
    if isinstance(value, str):
        return checked_text(value, where)
    if isinstance(value, list):
        return "\n".join(_part_text(part, f"{where}[{j}]") for j, part in enumerate(value))
    raise RequestError(where, f"{where} must be a string or a list of text parts (onebit "
                       "serve takes text input only)")


def _string_field(item: dict, name: str, where: str) -> str:
    if not isinstance(item.get(name), str):
        raise RequestError(f"{where}.{name}", f"{where}.{name} is required: a string")
    return checked_text(item[name], f"{where}.{name}")


def _call_item(item: dict, where: str) -> dict:
    """A function_call item (an earlier answer's call, sent back) as chat's call."""
    refuse_unknown([k for k, v in item.items() if v is not None], CALL_ITEM_KEYS, where,
                    "the prompt")
    return {"id": _string_field(item, "call_id", where), "type": "function",
            "function": {"name": _string_field(item, "name", where),
                         "arguments": _string_field(item, "arguments", where)}}


def _result_item(item: dict, where: str, call_ids: set[str]) -> dict:
    """A function_call_output item as chat's tool message: its output a string or a list of
    text parts (joined with "\n")."""
    refuse_unknown([k for k, v in item.items() if v is not None], OUTPUT_ITEM_KEYS, where,
                    "the prompt")
    call_id = _string_field(item, "call_id", where)
    if call_id not in call_ids:
        raise RequestError(f"{where}.call_id", f"{where}.call_id {_shown(call_id)} answers "
                           "no earlier function_call")
    return {"role": "tool", "tool_call_id": call_id,
            "content": _text_or_parts(item.get("output"), f"{where}.output")}


def _input(body: dict, call_ids: set[str]) -> list[dict]:
    """The input as chat's messages. A function_call item joins the assistant turn before
    it (an answer's text and its calls, or parallel calls, are one assistant message, as
    chat's are); a function_call_output item is a tool message answering a call made before
    it (`call_ids`: those of the conversation so far)."""
    value = body.get("input")
    if value is None:
        raise RequestError("input", "input is required")
    if isinstance(value, str):
        return [{"role": "user", "content": checked_text(value, "input")}]
    if not isinstance(value, list):
        raise RequestError("input", f"input must be a string or a list of items, got "
                           f"{type(value).__name__}")
    messages: list[dict] = []
    for i, item in enumerate(value):
        where = f"input[{i}]"
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call":
            call = _call_item(item, where)
            call_ids.add(call["id"])
            if messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(_result_item(item, where, call_ids))
        else:
            messages.append(_item(item, where))
    return messages


def _tools(body: dict) -> list[dict] | None:
    """`tools` (the Responses API's flat function tools) as chat's
    `{"type": "function", "function": {...}}`; onebit.serve.tools checks them further."""
    given = body.get("tools")
    if given is None:
        return None
    if not isinstance(given, list):
        raise RequestError("tools", f"tools must be a list of {{\"type\": \"function\", "
                           f"\"name\": ...}} objects, got {type(given).__name__}")
    chat = []
    for i, tool in enumerate(given):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise RequestError(where, f"{where} must be an object such as "
                               "{\"type\": \"function\", \"name\": ...}")
        if tool.get("type") != "function":
            raise RequestError(f"{where}.type", f"{where}.type={_shown(tool.get('type'))} is "
                               f"not supported by onebit serve: {_FUNCTIONS_ONLY}")
        refuse_unknown([k for k, v in tool.items() if v is not None], TOOL_KEYS, where,
                        "the answer")
        chat.append({"type": "function", "function": {
            k: v for k, v in tool.items() if k != "type" and v is not None}})
    return chat


def _tool_choice(value):
    """`tool_choice` as chat's: a string as it is; {"type": "function", "name"} as
    {"type": "function", "function": {"name"}}; other forms refused naming the path."""
    if value is None:
        return None
    if isinstance(value, str):
        if value not in TOOL_CHOICES:
            raise RequestError("tool_choice", f"tool_choice must be \"none\", \"auto\", "
                               f"\"required\" or {{\"type\": \"function\", \"name\": ...}}, "
                               f"got {_shown(value)}")
        return value
    if not isinstance(value, dict):
        raise RequestError("tool_choice", f"tool_choice must be a string or an object, got "
                           f"{_shown(value)}")
    if value.get("type") != "function":
        raise RequestError("tool_choice.type", f"tool_choice.type={_shown(value.get('type'))} "
                           f"is not supported by onebit serve: {_FUNCTIONS_ONLY}")
    refuse_unknown(value, frozenset({"type", "name"}), "tool_choice", "the answer")
    if not isinstance(value.get("name"), str):
        raise RequestError("tool_choice.name", "tool_choice.name is required: the name of "
                           "one of the tools")
    return {"type": "function", "function": {"name": value["name"]}}


def _format(body: dict) -> tuple[dict, dict | None]:
    """`text` as (what the response repeats, chat's `response_format` or None)."""
    text = body.get("text")
    if text is None:
        return {"format": {"type": "text"}}, None
    if not isinstance(text, dict):
        raise RequestError("text", "text must be an object such as "
                           "{\"format\": {\"type\": \"text\"}}")
    refuse_unknown(text, TEXT_KEYS, "text", "the answer")
    if text.get("verbosity") is not None:
        raise RequestError("text.verbosity", f"text.verbosity={_shown(text['verbosity'])} is "
                           "not supported by onebit serve: the chat template is rendered "
                           "without it")
    form = text.get("format")
    if form is None:
        return {"format": {"type": "text"}}, None
    if not isinstance(form, dict):
        raise RequestError("text.format", "text.format must be an object such as "
                           "{\"type\": \"json_schema\", \"name\": ..., \"schema\": {...}}")
    kind = form.get("type")
    if kind not in FORMAT_KEYS:
        raise RequestError("text.format.type", f"text.format.type must be 'text', "
                           f"'json_object' or 'json_schema', got {_shown(kind)}")
    refuse_unknown(form, FORMAT_KEYS[kind], "text.format", "the answer")
    if kind != "json_schema":
        return {"format": {"type": kind}}, (None if kind == "text" else {"type": kind})
    if not isinstance(form.get("name"), str):
        raise RequestError("text.format.name", "text.format.name is required: a string")
    spec = {k: form[k] for k in ("name", "schema", "strict", "description")
            if form.get(k) is not None}
    return {"format": {"type": "json_schema", **spec}}, {"type": "json_schema",
                                                           "json_schema": spec}


def _metadata(body: dict) -> dict:
    value = body.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise RequestError("metadata", "metadata must be an object of string values")
    return value


# chat's field names -> the Responses field each was mapped from
_RENAMED = (("response_format.json_schema.schema", "text.format.schema"),
            ("response_format.json_schema", "text.format"),
            ("response_format", "text.format"),
            ("max_tokens", "max_output_tokens"),
            ("messages", "input"))


def renamed(error: RequestError) -> RequestError:
    """`error` (from chat's parse or the engine's checks) naming the Responses field: the
    one its `param` was mapped from, in the param and in the message."""
    param = error.param
    for chat, ours in _RENAMED:
        if param is not None and (param == chat or param.startswith((chat + ".", chat + "["))):
            param = ours + param[len(chat):]
            message = str(error).replace(chat, ours)
            return RequestError(param, message, code=error.code, status=error.status,
                                kind=error.kind)
    return error


# chat's tool paths -> the Responses form's (only for chat's parse: our own checks already
# name `tools[i].function` for a nested function sent here, which must stay as it is)
_TOOL_PATH = re.compile(r"^tools\[(\d+)\]\.function|^tool_choice\.function")


def _tool_renamed(error: RequestError) -> RequestError:
    """An error of chat's tools check naming the Responses field (`tools[0].name`, not
    `tools[0].function.name`)."""
    param = error.param
    if param is None or not _TOOL_PATH.match(param):
        return error

    def ours(text: str) -> str:
        return re.sub(r"tools\[(\d+)\]\.function|tool_choice\.function",
                      lambda m: f"tools[{m.group(1)}]" if m.group(1) else "tool_choice", text)

    return RequestError(ours(param), ours(str(error)), code=error.code, status=error.status,
                        kind=error.kind)


def parse_response_request(body: object, store: ResponseStore) -> ResponseRequest:
    """The `ResponseRequest` in `body` (decoded JSON); a `RequestError` naming the field
    otherwise, a 404 for a `previous_response_id` the store does not hold."""
    if not isinstance(body, dict):
        raise RequestError(None, f"the body must be a JSON object, got {type(body).__name__}")
    _refuse_fields(body)
    model = _string(body, "model")
    instructions = _string(body, "instructions")
    user = _string(body, "user")
    previous = _string(body, "previous_response_id")
    for name in ("store", "parallel_tool_calls", "stream"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise RequestError(name, f"{name} must be true or false, got {_shown(body[name])}")
    tool_choice = _tool_choice(body.get("tool_choice"))
    tools = _tools(body)
    metadata = _metadata(body)
    text, response_format = _format(body)
    history: list[dict] = []
    call_ids: set[str] = set()
    if previous is not None:
        kept = store.get(previous)
        if kept is None:
            raise RequestError("previous_response_id", f"Previous response with id "
                               f"'{previous}' not found.", status=404)
        history = kept.conversation
        call_ids = {c["id"] for m in history for c in m.get("tool_calls") or ()}
    conversation = [*history, *_input(body, call_ids)]
    system = [] if instructions is None else [{"role": "system", "content": instructions}]
    chat = {"messages": system + conversation, "stream": body.get("stream")}
    if model is not None:
        chat["model"] = model
    for ours, theirs in (("max_output_tokens", "max_tokens"), ("temperature", "temperature"),
                         ("top_p", "top_p")):
        if body.get(ours) is not None:
            chat[theirs] = body[ours]
    if response_format is not None:
        chat["response_format"] = response_format
    for name, value in (("tools", tools), ("tool_choice", tool_choice),
                        ("parallel_tool_calls", body.get("parallel_tool_calls"))):
        if value is not None:
            chat[name] = value
    try:
        request = parse(CHAT, chat)
    except RequestError as error:
        raise renamed(_tool_renamed(error)) from None
    given = {name: body.get(name) for name in ("temperature", "top_p", "parallel_tool_calls")}
    echo = {"instructions": instructions, "max_output_tokens": body.get("max_output_tokens"),
            "previous_response_id": previous,
            "temperature": 1.0 if given["temperature"] is None else float(given["temperature"]),
            "top_p": 1.0 if given["top_p"] is None else float(given["top_p"]),
            "text": text, "parallel_tool_calls": given["parallel_tool_calls"] is not False,
            "tool_choice": body.get("tool_choice") or "auto",
            "tools": [{k: v for k, v in t.items() if v is not None} for t in body.get("tools")
                      or ()], "truncation": "disabled",
            "reasoning": None, "store": body.get("store") is not False,
            "metadata": metadata, "user": user}
    return ResponseRequest(request, conversation, echo, store=echo["store"])


def _sse(kind: str, data: dict, numbers) -> str:
    event = {"type": kind, **data, "sequence_number": next(numbers)}
    return f"event: {kind}\ndata: {json.dumps(event)}\n\n"


def _failure(error: Exception) -> dict:
    """A fault after the stream opened, as the response's `error`."""
    if isinstance(error, RequestError):
        error = renamed(error)
        code = "rate_limit_exceeded" if error.status == 429 else "server_error"
        return {"code": code, "message": str(error), "param": error.param}
    return {"code": "server_error", "message": f"{type(error).__name__}: {error}"}


def finished(engine: Engine, wanted: ResponseRequest, store: ResponseStore,
             completion: Completion) -> dict:
    """The whole answer, not streamed (kept when the request lets it be)."""
    body = wanted.body(engine.name, completion)
    wanted.keep(store, body, completion)
    return body


async def response_events(engine: Engine, wanted: ResponseRequest, params,
                          store: ResponseStore, loop: asyncio.AbstractEventLoop, decodes,
                          interval: float):
    """The SSE events of one streamed response: created, in_progress, the output item and
    its content part added, a text delta per piece the `PieceChannel` hands over, the text,
    part and item done, then completed (or incomplete; failed for a fault in the decode).
    With tools the text is parsed as it comes (onebit.serve.tools.CallStream): the message
    item opens at the first content (or at the end, empty, when the answer made no call);
    each call follows it as a function_call item (added, its arguments' delta and done,
    item done) once the answer is over, in the final response's order.
    When the client goes away the generator is closed and the decode ends at its next token,
    as a streamed chat's does."""
    channel = PieceChannel(loop, interval)
    gone = threading.Event()

    def work() -> None:
        try:
            channel.end("done", engine.complete(wanted.request, on_text=channel.put,
                                                cancelled=gone.is_set, params=params))
        except Exception as error:  # reported in the stream: the 200 is already sent
            channel.end("error", error)

    loop.run_in_executor(decodes, work)
    numbers = itertools.count()
    where = {"item_id": wanted.message_id, "output_index": 0, "content_index": 0}
    calls = wanted.request.tools.stream() if wanted.parses else None
    said: list[str] = []

    def opening() -> list[str]:
        return [_sse("response.output_item.added", {
                    "output_index": 0, "item": wanted.message("", "in_progress")}, numbers),
                _sse("response.content_part.added", {**where, "part": _output_text("")},
                     numbers)]

    def delta(text: str) -> list[str]:
        events = [] if said or calls is None else opening()
        said.append(text)
        return events + [_sse("response.output_text.delta", {**where, "delta": text,
                                                              "logprobs": []}, numbers)]

    try:
        shell = wanted.body(engine.name)
        yield _sse("response.created", {"response": shell}, numbers)
        yield _sse("response.in_progress", {"response": shell}, numbers)
        if calls is None:
            for event in opening():
                yield event
        end = None
        while end is None:
            got = await channel.get()  # (text, [extras,] end)
            text, end = got[0], got[-1]
            if calls is not None and text:
                text, _ = calls.push(text)
            if text:
                for event in delta(text):
                    yield event
        kind, value = end
        if kind != "done":
            yield _sse("response.failed", {"response": wanted.body(
                engine.name, error=_failure(value))}, numbers)
            return
        if calls is not None:
            text, _ = calls.finish()
            if text:
                for event in delta(text):
                    yield event
            wanted.parsed = ("".join(said) or None, calls.calls)
        body = finished(engine, wanted, store, value)
        for index, item in enumerate(body["output"]):
            if item["type"] == "message":
                if calls is not None and not said:
                    for event in opening():
                        yield event
                yield _sse("response.output_text.done", {
                    **where, "text": item["content"][0]["text"], "logprobs": []}, numbers)
                yield _sse("response.content_part.done", {**where, "part": item["content"][0]},
                           numbers)
            else:
                at = {"item_id": item["id"], "output_index": index}
                yield _sse("response.output_item.added", {
                    "output_index": index, "item": {**item, "arguments": "",
                                                    "status": "in_progress"}}, numbers)
                yield _sse("response.function_call_arguments.delta", {
                    **at, "delta": item["arguments"]}, numbers)
                yield _sse("response.function_call_arguments.done", {
                    **at, "arguments": item["arguments"]}, numbers)
            yield _sse("response.output_item.done", {"output_index": index, "item": item},
                       numbers)
        last = "response.completed" if body["status"] == "completed" else \
            "response.incomplete"
        yield _sse(last, {"response": body}, numbers)
    finally:
        gone.set()  # a client gone mid-answer: the decode stops at its next token


def stored_response(store: ResponseStore, response_id: str) -> dict:
    """A kept response's body (GET /v1/responses/{id}); a 404 when it is not kept."""
    kept = store.get(response_id)
    if kept is None:
        raise RequestError(None, f"Response with id '{response_id}' not found.", status=404)
    return kept.body
