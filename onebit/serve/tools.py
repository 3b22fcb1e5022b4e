"""Tool calls on `/v1/chat/completions`: the request's tools checked, rendered into the prompt,
the answer constrained where the call is not optional, and calls parsed out of the text.

One format throughout, Hermes' (Qwen 2.5 and 3, Hermes 2 Pro and 3, SmolLM3 speak it): a call
is `<tool_call>\\n{"name": "...", "arguments": {...}}\\n</tool_call>`, several in a row for
parallel calls.

- `parse_tools(body)` reads `tools`, `tool_choice` and `parallel_tool_calls` into a `ToolSpec`
  (None when no tools are given): names `[a-zA-Z0-9_-]{1,64}`, unique; `parameters` a JSON
  schema of an object that llguidance compiles; anything else a `RequestError` naming its
  path (`tools[1].function.parameters`, `tool_choice`).
- `message_fields` checks what a message adds for tools (an assistant's `tool_calls`, a tool
  result's `tool_call_id`) and hands it on as transformers gives it to templates (an
  assistant's `arguments` parsed to a dict where they are a JSON object).
- `chat_prompt` decides how the conversation reaches the chat template: a template that
  renders `tools` gets them (and the messages as they are); one that does not (the default
  ChatML, SmolLM2's) would drop them without a word, so then the tools are written the
  Hermes / Qwen 2.5 way into the system message, an assistant's calls into its content as
  `<tool_call>` blocks and tool results into user turns of `<tool_response>` blocks: with
  ChatML that is Qwen 2.5's own rendering.
- `ToolSpec.grammar` makes `required` and a named function a grammar (onebit.grammar, a Lark
  grammar with each function's `parameters` embedded as `%json`): the answer is then exactly
  one call (or, `required` with parallel calls, one or more) whose arguments conform to the
  schema. It rides on the processors every knob uses, so it holds under speculation (each
  draft's row masked by its own prefix's state).
- `CallStream` parses the text, whole or piece by piece, into content and calls; both ways
  give the same content and calls.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from functools import lru_cache

from onebit.serve.errors import RequestError
from onebit.serve.fields import checked_text, refuse_unknown

OPEN, CLOSE = "<tool_call>", "</tool_call>"
NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
CHOICES = ("none", "auto", "required")
MAX_TOOLS = 128  # OpenAI's limit
TOOL_KEYS = frozenset({"type", "function"})
FUNCTION_KEYS = frozenset({"name", "description", "parameters", "strict"})
CHOICE_KEYS = frozenset({"type", "function"})
CALL_KEYS = frozenset({"id", "type", "function", "index"})  # index: a streamed call sent back
CALL_FUNCTION_KEYS = frozenset({"name", "arguments"})
#: the keys a message of each role may add for tools
MESSAGE_KEYS = {"assistant": frozenset({"tool_calls"}), "tool": frozenset({"tool_call_id"})}
#: the arguments of a function that declares no parameters: none at all
NO_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": False}

# The Hermes / Qwen 2.5 system block, for a template that does not render tools itself
# (Qwen 2.5's own words, which Qwen 3 and Hermes read the same way).
TOOLS_HEADER = ("# Tools\n\nYou may call one or more functions to assist with the user "
                "query.\n\nYou are provided with function signatures within <tools></tools> "
                "XML tags:\n<tools>")
TOOLS_FOOTER = ("\n</tools>\n\nFor each function call, return a json object with function "
                "name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")


@dataclass(frozen=True)
class ToolSpec:
    """A request's tools: `tools` as the chat template gets them (OpenAI's
    `{"type": "function", "function": {...}}`), `names` in order, `schemas` each function's
    arguments schema (`parameters`, or no arguments when it has none); `choice` "none",
    "auto", "required" or "function" (`named` then says which); `parallel`: whether one
    answer may make several calls."""

    tools: tuple[dict, ...]
    names: tuple[str, ...]
    schemas: tuple[dict, ...]
    choice: str = "auto"
    named: str | None = None
    parallel: bool = True

    @property
    def parses(self) -> bool:
        """Whether the answer's calls are parsed out of its text (not with "none")."""
        return self.choice != "none"

    @property
    def forced(self) -> bool:
        """Whether the answer must be a call (`required` or a named function)."""
        return self.choice in ("required", "function")

    def rendered(self) -> list[dict]:
        """The tools for the chat template (copies: a template cannot change them)."""
        return json.loads(json.dumps(list(self.tools)))

    def grammar(self, answer):
        """The grammar the answer decodes inside: `required` / named: the calls (the
        request's `response_format`, `answer`, is for a text answer, and there is none);
        "auto" with a JSON `response_format`: that JSON or calls; otherwise `answer` as it
        is (None: unconstrained)."""
        if self.forced:
            return _compiled(self._lark(), "tool_choice")
        if self.choice != "auto" or answer is None or answer.kind not in ("json_schema",
                                                                           "json_object"):
            return answer
        schema = answer.source if answer.kind == "json_schema" else '{"type": "object"}'
        lark = f"start: answer | calls\nanswer: %json {schema}\n{self._calls_rules()}"
        return _compiled(lark, "response_format")

    def _calls_rules(self, names=None, many=None) -> str:
        names = self.names if names is None else names
        many = self.parallel if many is None else many
        more = ' ("\\n" call)*' if many else ""
        rules = [f"calls: call{more}",
                 "call: " + " | ".join(f"call_{self.names.index(n)}" for n in names)]
        for name in names:
            i = self.names.index(name)
            head = json.dumps(f'{OPEN}\n{{"name": "{name}", "arguments": ')
            tail = json.dumps(f"}}\n{CLOSE}")
            rules.append(f"call_{i}: {head} args_{i} {tail}")
            rules.append(f"args_{i}: %json {json.dumps(self.schemas[i])}")
        return "\n".join(rules)

    def _lark(self) -> str:
        if self.choice == "function":
            return "start: calls\n" + self._calls_rules([self.named], many=False)
        return "start: calls\n" + self._calls_rules()

    def stream(self) -> CallStream:
        return CallStream(self)


def _compiled(lark: str, field: str):
    """The Lark grammar compiled (a 400 naming `field` where it cannot be: too large)."""
    from onebit.grammar import Grammar, GrammarError

    try:
        return Grammar.lark(lark, field)
    except GrammarError as error:
        raise RequestError(field, f"the tools' grammar cannot be compiled: {error}") from None


def _shown(value) -> str:
    try:
        return json.dumps(value)[:60]
    except (TypeError, ValueError):
        return repr(value)[:60]


def _function(tool, i: int) -> tuple[dict, str, dict]:
    """tools[i] checked: (the tool as the template gets it, its name, its arguments'
    schema)."""
    where = f"tools[{i}]"
    if not isinstance(tool, dict):
        raise RequestError(where, f"{where} must be an object such as {{\"type\": "
                           "\"function\", \"function\": {\"name\": ...}}")
    refuse_unknown([k for k, v in tool.items() if v is not None], TOOL_KEYS, where,
                    "the answer")
    if tool.get("type") != "function":
        raise RequestError(f"{where}.type", f"{where}.type must be \"function\" (the one kind "
                           f"of tool served), got {_shown(tool.get('type'))}")
    function = tool.get("function")
    where += ".function"
    if not isinstance(function, dict):
        raise RequestError(where, f"{where} must be an object with a name")
    function = {k: v for k, v in function.items() if v is not None}
    refuse_unknown(function, FUNCTION_KEYS, where, "the answer")
    name = function.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise RequestError(f"{where}.name", f"{where}.name must be 1 to 64 of a-z, A-Z, 0-9, "
                           f"_ and -, got {_shown(name)}")
    if not isinstance(function.get("description", ""), str):
        raise RequestError(f"{where}.description", f"{where}.description must be a string")
    checked_text(function.get("description", ""), f"{where}.description")
    if not isinstance(function.get("strict", False), bool):
        raise RequestError(f"{where}.strict", f"{where}.strict must be true or false")
    return {"type": "function", "function": function}, name, _parameters(function, where)


def _parameters(function: dict, where: str) -> dict:
    """The arguments' schema: `parameters`, which must describe an object (OpenAI's rule: a
    call's arguments are an object) and compile in llguidance; none: no arguments."""
    where += ".parameters"
    if "parameters" not in function:
        return NO_PARAMETERS
    schema = function["parameters"]
    if not isinstance(schema, dict):
        raise RequestError(where, f"{where} must be a JSON schema object, got "
                           f"{type(schema).__name__}")
    kind = schema.get("type", "object")
    if kind != "object":
        raise RequestError(where, f"{where} must be the JSON schema of an object (\"type\": "
                           f"\"object\"): a call's arguments are an object; got type "
                           f"{_shown(kind)}")
    schema = {**schema, "type": "object"}
    from onebit.grammar import Grammar, GrammarError

    try:
        Grammar.json_schema(schema, where)
    except GrammarError as error:
        raise RequestError(where, str(error) if where in str(error) else
                           f"{where}: {error}") from None
    return schema


def _choice(value, names: tuple[str, ...]) -> tuple[str, str | None]:
    if value is None:
        return ("auto" if names else "none"), None
    if isinstance(value, str):
        if value not in CHOICES:
            raise RequestError("tool_choice", f"tool_choice must be \"none\", \"auto\", "
                               f"\"required\" or {{\"type\": \"function\", \"function\": "
                               f"{{\"name\": ...}}}}, got {_shown(value)}")
        if value == "required" and not names:
            raise RequestError("tool_choice", "tool_choice \"required\" needs tools")
        return value, None
    if not isinstance(value, dict):
        raise RequestError("tool_choice", f"tool_choice must be a string or an object, got "
                           f"{_shown(value)}")
    refuse_unknown(value, CHOICE_KEYS, "tool_choice", "the answer")
    if value.get("type") != "function":
        raise RequestError("tool_choice.type", f"tool_choice.type must be \"function\", got "
                           f"{_shown(value.get('type'))}")
    function = value.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise RequestError("tool_choice.function", "tool_choice.function must be an object "
                           "with the name of one of the tools")
    refuse_unknown(function, frozenset({"name"}), "tool_choice.function", "the answer")
    if function["name"] not in names:
        raise RequestError("tool_choice", f"tool_choice names the function "
                           f"{_shown(function['name'])}, which is not among the tools "
                           f"({', '.join(names) or 'none given'})")
    return "function", function["name"]


def parse_tools(body: dict) -> ToolSpec | None:
    """The request's `ToolSpec`, or None when it gives no tools (`tools` absent, null or []);
    `tool_choice` and `parallel_tool_calls` are checked either way (a choice that needs tools
    is refused without them)."""
    given = body.get("tools")
    if given is not None and not isinstance(given, list):
        raise RequestError("tools", f"tools must be a list of {{\"type\": \"function\", "
                           f"\"function\": {{...}}}} objects, got {type(given).__name__}")
    if given is not None and len(given) > MAX_TOOLS:
        raise RequestError("tools", f"tools takes at most {MAX_TOOLS} functions, got "
                           f"{len(given)}")
    tools, names, schemas = [], [], []
    for i, tool in enumerate(given or ()):
        rendered, name, schema = _function(tool, i)
        if name in names:
            raise RequestError(f"tools[{i}].function.name", f"tools[{i}].function.name "
                               f"{name!r} is already the name of tools[{names.index(name)}]")
        tools.append(rendered)
        names.append(name)
        schemas.append(schema)
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise RequestError("parallel_tool_calls", f"parallel_tool_calls must be true or "
                           f"false, got {_shown(parallel)}")
    choice, named = _choice(body.get("tool_choice"), tuple(names))
    if not tools:
        return None
    return ToolSpec(tuple(tools), tuple(names), tuple(schemas), choice, named,
                    parallel is not False)


# -- messages -------------------------------------------------------------------------------


def message_fields(role: str, message: dict, where: str, call_ids: set[str]) -> dict:
    """What `message` adds for tools, checked: an assistant's `tool_calls` (each
    `{"id", "type": "function", "function": {"name", "arguments"}}`; its id is added to
    `call_ids`), a tool result's `tool_call_id` (the id of an earlier call). `arguments` (a
    JSON string) reach the template parsed to a dict when they are a JSON object, as
    transformers' templates expect; other text stays a string."""
    if role == "assistant" and message.get("tool_calls") is not None:
        calls = message["tool_calls"]
        if not isinstance(calls, list):
            raise RequestError(f"{where}.tool_calls", f"{where}.tool_calls must be a list")
        return {"tool_calls": [_history_call(call, f"{where}.tool_calls[{j}]", call_ids)
                               for j, call in enumerate(calls)]}
    if role == "tool":
        value = message.get("tool_call_id")
        if not isinstance(value, str):
            raise RequestError(f"{where}.tool_call_id", f"{where}.tool_call_id is required: "
                               "the id of the call this message answers")
        if value not in call_ids:
            raise RequestError(f"{where}.tool_call_id", f"{where}.tool_call_id "
                               f"{_shown(value)} answers no earlier assistant tool call")
        return {"tool_call_id": checked_text(value, f"{where}.tool_call_id")}
    return {}


def _history_call(call, where: str, call_ids: set[str]) -> dict:
    if not isinstance(call, dict):
        raise RequestError(where, f"{where} must be an object such as {{\"id\": ..., \"type\": "
                           "\"function\", \"function\": {\"name\": ..., \"arguments\": ...}}")
    refuse_unknown([k for k, v in call.items() if v is not None], CALL_KEYS, where,
                    "the prompt")
    if not isinstance(call.get("id"), str):
        raise RequestError(f"{where}.id", f"{where}.id must be a string")
    if call.get("type", "function") != "function":
        raise RequestError(f"{where}.type", f"{where}.type must be \"function\"")
    function = call.get("function")
    if not isinstance(function, dict):
        raise RequestError(f"{where}.function", f"{where}.function must be an object with a "
                           "name and arguments")
    refuse_unknown(function, CALL_FUNCTION_KEYS, f"{where}.function", "the prompt")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise RequestError(f"{where}.function.name", f"{where}.function.name must be a "
                           "non-empty string")
    arguments = function.get("arguments", "{}")
    if isinstance(arguments, str):
        checked_text(arguments, f"{where}.function.arguments")
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        arguments = parsed if isinstance(parsed, dict) else arguments
    elif not isinstance(arguments, dict):
        raise RequestError(f"{where}.function.arguments", f"{where}.function.arguments must "
                           "be a string (JSON)")
    call_ids.add(call["id"])
    return {"id": checked_text(call["id"], f"{where}.id"), "type": "function",
            "function": {"name": checked_text(name, f"{where}.function.name"),
                         "arguments": arguments}}


# -- the prompt -----------------------------------------------------------------------------


_PROBE = [{"role": "user", "content": "x"}]
_PROBE_TOOLS = [{"type": "function", "function": {
    "name": "probe", "description": "d",
    "parameters": {"type": "object", "properties": {"a": {"type": "string",
                                                          "description": "a"}}}}}]


@lru_cache(maxsize=16)
def template_uses_tools(template: str | None, bos: str = "", eos: str = "") -> bool:
    """Whether `template` (None: onebit's ChatML) renders `tools`: a one-message chat
    rendered with a tool and without differs (a render that fails counts as a text of its
    own; where both fail, the template is trusted with the tools)."""
    from onebit.text.chat import render
    from onebit.text.errors import ChatTemplateError

    if template is None:
        return False
    outcomes = []
    for tools in (_PROBE_TOOLS, None):
        try:
            outcomes.append(render(template, _PROBE, bos_token=bos, eos_token=eos,
                                   tools=tools))
        except ChatTemplateError as error:
            outcomes.append(error)
    if all(isinstance(o, ChatTemplateError) for o in outcomes):
        return True
    return outcomes[0] != outcomes[1]


def chat_prompt(tokenizer, messages: list[dict], spec: ToolSpec | None):
    """(the messages, the tools) the chat template renders: as they are for a template that
    renders tools; written into the messages the Hermes / Qwen 2.5 way for one that does not
    (`hermes_messages`), the tools then passed as None."""
    tools = spec.rendered() if spec is not None else None
    history = any(m.get("tool_calls") or m.get("role") == "tool" for m in messages)
    if tools is None and not history:
        return messages, None
    template = tokenizer.chat_template
    if template_uses_tools(template, tokenizer.bos_token or "", tokenizer.eos_token or ""):
        return messages, tools
    return hermes_messages(messages, tools), None


def _call_text(call: dict) -> str:
    function = call["function"]
    arguments = function["arguments"]
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments,
                                                                    ensure_ascii=False)
    return f'{OPEN}\n{{"name": "{function["name"]}", "arguments": {shown}}}\n{CLOSE}'


def hermes_messages(messages: list[dict], tools: list[dict] | None) -> list[dict]:
    """`messages` with the tools and the calls written as text, as Qwen 2.5's template
    writes them: the tools (one JSON line each inside <tools></tools>, and the call format)
    after the system message's content (a system message of their own when there is none);
    an assistant's calls as `<tool_call>` blocks after its content, one a line; a run of
    tool results as one user turn of `<tool_response>` blocks."""
    out: list[dict] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            content = message.get("content") or ""
            text = "\n".join([content] * bool(content)
                             + [_call_text(c) for c in message["tool_calls"]])
            out.append({k: v for k, v in message.items() if k != "tool_calls"}
                       | {"content": text})
        elif role == "tool":
            block = f"<tool_response>\n{message.get('content') or ''}\n</tool_response>"
            if out and out[-1].get("_tool_results"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool_results": True})
        else:
            out.append(dict(message))
    for message in out:
        message.pop("_tool_results", None)
    if tools:
        listed = "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools)
        block = TOOLS_HEADER + listed + TOOLS_FOOTER
        if out and out[0].get("role") == "system":
            out[0] = {**out[0], "content": f"{out[0].get('content') or ''}\n\n{block}"}
        else:
            out.insert(0, {"role": "system", "content": block})
    return out


# -- the answer -----------------------------------------------------------------------------


def _space_before(text: str, start: int, end: int) -> int:
    """`end` moved back over the whitespace before it, not past `start`."""
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


class CallStream:
    """The answer's text in, content and calls out: `push(piece)` and `finish()` each return
    (content to send, calls completed). Every complete `<tool_call>...</tool_call>` block
    whose JSON is `{"name": <one of the tools>, "arguments": {...}}` is a call (after the
    first, only with parallel calls); the rest of the text is content, without the
    whitespace next to a call. Pieces hold back what may still become a call (from a
    `<tool_call>` on, or the start of one, and the whitespace before it); `finish` releases
    an unfinished block as text. Joined, what `push` and `finish` give is what one `push` of
    the whole text and `finish` give."""

    def __init__(self, spec: ToolSpec) -> None:
        self.spec = spec
        self.text = ""
        self.calls: list[dict] = []
        self._done = 0          # text before this is settled (sent as content or a call)
        self._after_call = False  # the whitespace that starts the next text is dropped

    def push(self, piece: str) -> tuple[str, list[dict]]:
        self.text += piece
        return self._advance(final=False)

    def finish(self) -> tuple[str, list[dict]]:
        return self._advance(final=True)

    def _plain(self, text: str, out: list[str]) -> None:
        if self._after_call:
            text = text.lstrip()
        if text:
            self._after_call = False
            out.append(text)

    def _advance(self, final: bool) -> tuple[str, list[dict]]:
        t, pos, out, made = self.text, self._done, [], []
        while True:
            start = t.find(OPEN, pos)
            if start < 0:
                end = len(t)
                if not final:  # a tail that may begin a call stays, with the space before it
                    held = next((k for k in range(min(len(OPEN) - 1, len(t) - pos), 0, -1)
                                 if t.endswith(OPEN[:k])), 0)
                    end = _space_before(t, pos, len(t) - held)
                self._plain(t[pos:end], out)
                pos = end
                break
            close = t.find(CLOSE, start + len(OPEN))
            if close < 0:
                end = len(t) if final else _space_before(t, pos, start)
                self._plain(t[pos:end], out)
                pos = end
                break
            start = t.rfind(OPEN, start, close)  # the last block opened before it closes
            stop = close + len(CLOSE)
            call = self._call(t[start + len(OPEN):close])
            if call is None:
                self._plain(t[pos:stop], out)
            else:
                self._plain(t[pos:_space_before(t, pos, start)], out)
                self.calls.append(call)
                made.append(call)
                self._after_call = True
            pos = stop
        self._done = pos
        return "".join(out), made

    def _call(self, body: str) -> dict | None:
        """The call in a block's text, or None where it is not one of the tools' (or a
        second call without parallel calls)."""
        if self.calls and not self.spec.parallel:
            return None
        try:
            call = json.loads(body)
        except ValueError:
            return None
        if not isinstance(call, dict) or call.get("name") not in self.spec.names:
            return None
        arguments = call.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return None
        if not isinstance(arguments, dict):
            return None
        return {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                "function": {"name": call["name"],
                             "arguments": json.dumps(arguments, ensure_ascii=False)}}


def parse_answer(spec: ToolSpec, text: str) -> tuple[str | None, list[dict]]:
    """The whole answer's (content, calls): content None when empty."""
    stream = spec.stream()
    content, calls = stream.push(text)
    rest, more = stream.finish()
    content += rest
    return content or None, calls + more
