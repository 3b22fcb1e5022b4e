"""Render a chat template: jinja2 code from a model file, run in jinja2's immutable sandbox.

A chat template is code that comes with a downloaded file, so it runs where it cannot reach
Python objects' internals, call unsafe methods or mutate what it is given
(`ImmutableSandboxedEnvironment`), and under a render budget (template_budget.py: CPU time,
string, list and integer sizes, memory held) so that it cannot hang the process or fill its
memory either. It gets what transformers gives real templates: `messages` (keys whose value
is None dropped, reasoning under both `reasoning_content` and `thinking`), `tools` and
`documents` (None when not given), `add_generation_prompt`, `bos_token`/`eos_token`,
`raise_exception(msg)`, `strftime_now(fmt)`, `dict(...)`, a `namespace` that takes no
`_`-prefixed name, the `tojson` filter with its keyword arguments, `{% break %}`/
`{% continue %}`, `{% generation %}`, and trim_blocks/lstrip_blocks; the corpus of real
templates in tests/text/test_real_templates.py renders to transformers' text. Whatever goes
wrong (a syntax error, an undefined call, a sandbox violation, a budget passed, the
template's own `raise_exception`) is one `ChatTemplateError` line.
"""

from __future__ import annotations

import sys
from functools import lru_cache

import jinja2
from jinja2.sandbox import SecurityError

from onebit.text import template_budget
from onebit.text.errors import ChatTemplateError
from onebit.text.template_budget import (
    BudgetExceeded,
    RenderBudget,
    TemplateRaised,
    compile_template,
    metered,
)

MAX_TEMPLATE_CHARS = 1_000_000
MAX_RENDERED_CHARS = 10_000_000
ROLES = ("system", "user", "assistant", "tool")
# the names a message's reasoning comes under, the one templates read most first
REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")

# A plain ChatML template, for a model whose file carries none (SmolLM2 and Qwen speak it).
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@lru_cache(maxsize=16)
def _compile(source: str) -> jinja2.Template:
    return compile_template(source)


def check_messages(messages) -> list[dict]:
    """The messages as a list of {"role", "content"} dicts (copies, without the keys whose value
    is None); a ChatTemplateError naming the index of the first that is not one.

    None values are dropped as transformers drops them: OpenAI clients send `"content": null`
    beside tool calls, and templates test whether a key is there, not whether it is None."""
    if isinstance(messages, str) or not isinstance(messages, list | tuple):
        raise ChatTemplateError(f"messages must be a list of dicts, got {type(messages).__name__}")
    checked = []
    for i, message in enumerate(messages):
        if isinstance(message, dict):
            message = {key: value for key, value in message.items() if value is not None}
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) \
                or not isinstance(message.get("content", ""), str):
            raise ChatTemplateError(f"messages[{i}] is {str(message)[:60]!r}: expected a dict "
                                    "with a str 'role' and a str 'content'")
        checked.append(message)
    return checked


def with_reasoning_aliases(message: dict) -> dict:
    """`message` with its reasoning under both `reasoning_content` and `thinking`, as
    transformers gives it to templates: most read `reasoning_content`, gpt-oss's reads
    `thinking`, and a caller may have written either, or `reasoning`. A `thinking` the caller
    wrote is kept; `reasoning_content` takes the first of the three that is set."""
    reasoning = next((message[key] for key in REASONING_KEYS if message.get(key) is not None),
                     None)
    if reasoning is None:
        return message
    aliased = {"thinking": reasoning}   # first, where the caller had none
    aliased.update(message)
    aliased["reasoning_content"] = reasoning
    return aliased


def render(template: str | None, messages, *, add_generation_prompt: bool = True,
           bos_token: str = "", eos_token: str = "", tools: list | None = None,
           documents: list | None = None, budget: RenderBudget | None = None,
           **extra) -> str:
    """The prompt text `template` makes of `messages`; ChatML when `template` is None.

    `tools` (JSON schemas) and `documents` reach the template as None when not given, as
    transformers passes them: templates test `tools is not none` as often as `tools is
    defined`, and one written for tools only fails on None as it does there. `extra` (such
    as `enable_thinking=False`) is passed to the template as it is.

    The render spends at most `budget` (template_budget.DEFAULT_BUDGET when None: 2 s of CPU
    time, strings of 10 million characters, lists of a million items, 128 MiB of memory);
    past it, a ChatTemplateError names what was refused."""
    if budget is None:
        budget = template_budget.DEFAULT_BUDGET
    elif not isinstance(budget, RenderBudget):
        raise TypeError(f"budget must be a RenderBudget, got {type(budget).__name__}")
    source = CHATML if template is None else template
    if not isinstance(source, str):
        raise ChatTemplateError(f"a chat template is text, got {type(source).__name__}")
    if len(source) > MAX_TEMPLATE_CHARS:
        raise ChatTemplateError(f"the chat template is {len(source)} characters "
                                f"(limit {MAX_TEMPLATE_CHARS})")
    messages = [with_reasoning_aliases(m) for m in check_messages(messages)]
    _check_dicts(tools, "tools")
    _check_dicts(documents, "documents")
    try:
        with metered(budget):
            compiled = _compile(source)
            text = _bounded(compiled.generate(
                messages=messages, tools=tools, documents=documents,
                add_generation_prompt=add_generation_prompt, bos_token=bos_token,
                eos_token=eos_token, **extra))
    except BudgetExceeded as e:
        raise ChatTemplateError(f"the chat template went past its budget: {e}") from None
    except RecursionError:
        raise ChatTemplateError("the chat template went past its budget: it recursed too "
                                f"deep (Python's limit, {sys.getrecursionlimit()} frames)") \
            from None
    except MemoryError:
        raise ChatTemplateError("the chat template ran the process out of memory") from None
    except TemplateRaised as e:
        raise ChatTemplateError(f"the chat template refused the messages: {e}") from None
    except SecurityError as e:
        raise ChatTemplateError(f"the chat template tried to leave its sandbox: {e}") from None
    except jinja2.TemplateSyntaxError as e:
        raise ChatTemplateError(f"the chat template does not parse (line {e.lineno}): "
                                f"{e.message}") from None
    # AssertionError: jinja2's own filters assert on their arguments (truncate's end longer
    # than its length)
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, AttributeError,
            IndexError, ZeroDivisionError, OverflowError, AssertionError) as e:
        raise ChatTemplateError(f"the chat template failed to render: "
                                f"{type(e).__name__}: {' '.join(str(e).split())}") from None
    return text


def _check_dicts(values, name: str) -> None:
    """`tools` and `documents` are None or a list of dicts (a tool's JSON schema, a document's
    title and text); anything else is refused naming the first that is not a dict."""
    if values is None:
        return
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise ChatTemplateError(f"{name} must be a list of dicts, got {type(values).__name__}")
    for i, value in enumerate(values):
        if not isinstance(value, dict):
            raise ChatTemplateError(f"{name}[{i}] is {str(value)[:60]!r}: expected a dict")


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
