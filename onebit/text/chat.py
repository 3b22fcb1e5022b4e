"""Render a chat template: jinja2 code from a model file, run in jinja2's immutable sandbox.

A chat template is code that comes with a downloaded file, so it runs where it cannot reach
Python objects' internals, call unsafe methods or mutate what it is given
(`ImmutableSandboxedEnvironment`). It gets what real templates use: `messages`,
`add_generation_prompt`, `bos_token`/`eos_token`, `raise_exception(msg)`, `strftime_now(fmt)`,
the `tojson` filter with its keyword arguments, and `{% break %}`/`{% continue %}`. Whatever goes
wrong (a syntax error, an undefined call, a sandbox violation, the template's own
`raise_exception`) is one `ChatTemplateError` line.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from onebit.text.errors import ChatTemplateError

MAX_TEMPLATE_CHARS = 1_000_000
MAX_RENDERED_CHARS = 10_000_000
ROLES = ("system", "user", "assistant", "tool")

# A plain ChatML template, for a model whose file carries none (SmolLM2 and Qwen speak it).
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class _TemplateRaised(Exception):
    """What `raise_exception(...)` in a template raises; caught and reported as the template's."""


def _raise_exception(message):
    raise _TemplateRaised(str(message))


def _strftime_now(fmt):
    return datetime.now().strftime(str(fmt))


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # templates print tool schemas with this; jinja2's own tojson escapes HTML, which changes
    # the text the model was trained on
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with `*` and `**` checked: `'a' * 10**9` would allocate a
    gigabyte before any output limit could see it."""

    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context, operator, left, right):
        if operator == "**" and isinstance(right, int) and abs(right) > 64:
            raise SecurityError(f"the power {right} is too large")
        if operator == "*":
            sized, count = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(sized, str | list | tuple) and isinstance(count, int) \
                    and len(sized) * count > MAX_RENDERED_CHARS:
                raise SecurityError(f"a repetition of {len(sized)} x {count} items")
        return super().call_binop(context, operator, left, right)


@lru_cache(maxsize=16)
def _compile(source: str) -> jinja2.Template:
    # the default Undefined, not StrictUndefined: templates test `{% if tools %}` for
    # variables a caller may not pass; calling or indexing an undefined still fails
    env = _Sandbox(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def check_messages(messages) -> list[dict]:
    """The messages as a list of {"role", "content"} dicts; a ChatTemplateError naming the index
    of the first that is not one."""
    if isinstance(messages, str) or not isinstance(messages, list | tuple):
        raise ChatTemplateError(f"messages must be a list of dicts, got {type(messages).__name__}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) \
                or not isinstance(message.get("content", ""), str):
            raise ChatTemplateError(f"messages[{i}] is {str(message)[:60]!r}: expected a dict "
                                    "with a str 'role' and a str 'content'")
    return [dict(m) for m in messages]


def render(template: str | None, messages, *, add_generation_prompt: bool = True,
           bos_token: str = "", eos_token: str = "", **extra) -> str:
    """The prompt text `template` makes of `messages`; ChatML when `template` is None."""
    source = CHATML if template is None else template
    if not isinstance(source, str):
        raise ChatTemplateError(f"a chat template is text, got {type(source).__name__}")
    if len(source) > MAX_TEMPLATE_CHARS:
        raise ChatTemplateError(f"the chat template is {len(source)} characters "
                                f"(limit {MAX_TEMPLATE_CHARS})")
    messages = check_messages(messages)
    try:
        compiled = _compile(source)
        text = _bounded(compiled.generate(
            messages=messages, add_generation_prompt=add_generation_prompt,
            bos_token=bos_token, eos_token=eos_token, **extra))
    except _TemplateRaised as e:
        raise ChatTemplateError(f"the chat template refused the messages: {e}") from None
    except SecurityError as e:
        raise ChatTemplateError(f"the chat template tried to leave its sandbox: {e}") from None
    except jinja2.TemplateSyntaxError as e:
        raise ChatTemplateError(f"the chat template does not parse (line {e.lineno}): "
                                f"{e.message}") from None
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, AttributeError,
            IndexError, ZeroDivisionError, OverflowError, RecursionError) as e:
        raise ChatTemplateError(f"the chat template failed to render: "
                                f"{type(e).__name__}: {' '.join(str(e).split())}") from None
    return text


def _bounded(chunks) -> str:
    """The rendered text, stopped as soon as it passes the limit (a loop that prints without
    end fails here instead of filling memory)."""
    parts, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_RENDERED_CHARS:
            raise ChatTemplateError(f"the chat template rendered over {MAX_RENDERED_CHARS} "
                                    "characters")
        parts.append(chunk)
    return "".join(parts)
