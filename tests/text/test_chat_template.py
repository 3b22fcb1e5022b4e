"""Chat templates render as the model's file says, in a sandbox, with one-line errors."""
# ruff: noqa: E501 - the family templates below keep their lines as the families write them

import pytest

from onebit.text import ChatTemplateError
from onebit.text.chat import render

MESSAGES = [{"role": "user", "content": "Hi there"}]


def test_smollm2_template_renders_chatml(smollm2_tokenizer):
    """SmolLM2's own template (from the GGUF) adds its default system turn and, asked for a
    generation prompt, opens the assistant turn; the text tokenizes with the special tokens
    whole."""
    text = smollm2_tokenizer.apply_chat_template(MESSAGES)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert text.endswith("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n")
    ids = smollm2_tokenizer.apply_chat_template(MESSAGES, tokenize=True)
    assert ids[0] == 1 and ids.count(2) == 2


def test_template_features():
    """What real templates use works: tojson with indent (and no HTML escaping), strftime_now,
    bos/eos tokens, loop controls, raise_exception surfacing as a ChatTemplateError."""
    t = ("{{ bos_token }}{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
         "{{ m | tojson(indent=1) }}{% endfor %}{{ strftime_now('%Y') | length }}{{ eos_token }}")
    out = render(t, [{"role": "user", "content": "<a&b>"}, {"role": "x", "content": "y"}],
                 bos_token="<s>", eos_token="</s>")
    assert out == '<s>{\n "role": "user",\n "content": "<a&b>"\n}4</s>'
    with pytest.raises(ChatTemplateError, match="refused the messages: no system role"):
        render("{{ raise_exception('no system role') }}", MESSAGES)


def test_inputs_reach_the_template_as_transformers_gives_them():
    """`tools` and `documents` are None when not given (a template's `tools is not none` is
    false, as under transformers); a key whose value is None is dropped (OpenAI clients send
    `"content": null` beside tool calls); a message's reasoning is under both
    `reasoning_content` and `thinking`, whichever of the three names the caller used, and a
    `thinking` the caller wrote is kept."""
    assert render("{{ tools is none }} {{ documents is none }}", MESSAGES) == "True True"
    template = ("{% for m in messages %}{{ m.content is defined }}/{{ m.reasoning_content }}/"
                "{{ m.thinking }};{% endfor %}")
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "reasoning": "r"},
                {"role": "assistant", "content": "a", "thinking": "t", "reasoning_content": "c"}]
    assert render(template, messages) == "True//;False/r/r;True/c/t;"
    assert messages[1] == {"role": "assistant", "content": None, "reasoning": "r"}


@pytest.mark.parametrize("kwargs, says", [
    ({"tools": "get_weather"}, "tools must be a list of dicts, got str"),
    ({"tools": [{"type": "function"}, print]}, r"tools\[1\] is"),
    ({"documents": [["title", "text"]]}, r"documents\[0\] is"),
])
def test_tools_and_documents_are_lists_of_dicts(kwargs, says):
    """Tools (JSON schemas) and documents that are not lists of dicts are refused in one line
    naming the first that is not, before any template runs."""
    with pytest.raises(ChatTemplateError, match=says):
        render(None, MESSAGES, **kwargs)


def test_str_methods_take_arguments_inside_loops_and_blocks():
    """A str method called inside a for loop or a set block (where jinja2 adds its own loop
    variables to the call) renders, with the budget's checks on its arguments: NVIDIA
    Nemotron Nano v2's template strips `/think` from the system turn this way."""
    template = ("{% for m in messages %}{{ m.content.replace('/think', '').strip() }}"
                "{% set block %}{{ m.content.replace('/', '-', 1).split('-', maxsplit=1) }}"
                "{% endset %}|{{ block }}{% endfor %}")
    out = render(template, [{"role": "system", "content": "be brief /think"}])
    assert out == "be brief|['be brief ', 'think']"


@pytest.mark.parametrize("template, says", [
    ("{{ messages.__class__.__mro__ }}", "sandbox"),
    ("{{ ''.__class__.__subclasses__() }}", "sandbox"),
    ("{{ messages.append(1) }}", "sandbox"),
    ("{{ cycler.__init__.__globals__ }}", "failed to render|sandbox"),
    ("{% for %}", "does not parse"),
    ("{{ undefined_function() }}", "failed to render"),
    ("{{ 1 / 0 }}", "failed to render"),
    ("{{ 'a' * 10**9 }}", "budget: a string of 1000000000 characters"),
    ("{{ [1] * 100000000 }}", "budget: a sequence of 100000000 items"),
    ("{{ 2 ** 100000000 }}", "budget: the power 100000000"),
    ("{% for i in range(99999) %}{% for j in range(99999) %}xxxxxxxxxx{% endfor %}{% endfor %}",
     "rendered over"),
    ("{{ messages[5]['content'] }}", "failed to render"),
])
def test_bad_templates_fail_in_one_line(template, says):
    """A template that tries to reach Python internals, mutate its input or allocate without
    bound, or simply fails, raises one ChatTemplateError line saying which, never another
    exception (and never fills memory first)."""
    with pytest.raises(ChatTemplateError, match=says) as info:
        render(template, MESSAGES)
    assert "\n" not in str(info.value)


def test_bad_messages_are_named():
    """A message that is not a {role, content} dict is refused with its index."""
    with pytest.raises(ChatTemplateError, match=r"messages\[1\]"):
        render(None, [{"role": "user", "content": "a"}, {"content": "b"}])
    with pytest.raises(ChatTemplateError, match="list of dicts"):
        render(None, "hello")


# Chat templates of real model families, written here from memory of the templates those
# families publish (not downloaded, and trimmed where a family's template is very long): they
# exercise what real templates do (tools through tojson, namespaces, raise_exception, slicing,
# str methods, `{% generation %}`), for the cross-check with transformers and the timings of
# docs/real-models.md.
FAMILIES = {
    "chatml-default": None,
    "smollm2": (
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
        "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\n' }}{% endif %}"),
    "llama3": (
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
        "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] "
        "| trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
        "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"),
    "mistral": (
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
        "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
        "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
        "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
        "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
        "roles are supported!') }}{% endif %}{% endfor %}"),
    "gemma": (
        "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role "
        "not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == "
        "'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must "
        "alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == "
        "'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
        "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + "
        "'<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}"
        "{{'<start_of_turn>model\n'}}{% endif %}"),
    "phi3": (
        "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
        "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
        "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
        "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}"
        "{% endif %}"),
    "qwen2.5-tools": """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
""",
    "qwen3-thinking": """{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.role == "assistant" %}
        {%- set content = message.content %}
        {%- if '</think>' in content %}
            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {{- '<|im_start|>' + message.role + '\\n<think>\\n</think>\\n\\n' + content + '<|im_end|>\\n' }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}
        {%- endif %}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}
""",
    "llama3.1-date": """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = strftime_now("%d %b %Y") %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
""",
    "generation-block": (
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
        "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + "
        "'<|im_end|>\n' }}{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>\n' }}"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
        "{% endif %}"),
}

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city, now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]

CONVERSATIONS = {
    "one user turn": [{"role": "user", "content": "Hi there"}],
    "system": [{"role": "system", "content": "  You are terse.  "},
               {"role": "user", "content": "Hi <b>&</b>"}],
    "multi-turn": [{"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "<think>hm</think>\nHello!"},
                   {"role": "user", "content": "Tell me a joke"},
                   {"role": "assistant", "content": "No."},
                   {"role": "user", "content": "Please"}],
    "tools": [{"role": "user", "content": "Weather in Paris?"},
              {"role": "assistant", "content": "", "tool_calls": [{
                  "type": "function", "function": {"name": "get_weather",
                                                   "arguments": {"city": "Paris"}}}]},
              {"role": "tool", "content": "{\"temp\": 21}"},
              {"role": "user", "content": "Thanks"}],
}


@pytest.mark.parametrize("family", FAMILIES)
def test_families_render_as_transformers_renders_them(family):
    """Each family template, on a system turn, a multi-turn chat and a tool call, with and
    without the generation prompt, renders to the text transformers' own chat-template
    renderer gives (or both refuse the conversation: Mistral and Gemma take no system or tool
    turn). Proves onebit's sandbox gives templates what transformers' does: trim_blocks,
    lstrip_blocks, loop controls, `{% generation %}`, tojson, raise_exception, strftime_now,
    namespace, `tools`."""
    utils = pytest.importorskip("transformers.utils.chat_template_utils",
                                reason="transformers is not installed (the `peer` extra)")
    from onebit.text.chat import CHATML

    template = FAMILIES[family]
    for name, messages in CONVERSATIONS.items():
        tools = TOOLS if name == "tools" else None
        for add_generation_prompt in (True, False):
            kwargs = dict(add_generation_prompt=add_generation_prompt, bos_token="<s>",
                          eos_token="</s>")
            try:
                ours = render(template, messages, tools=tools, **kwargs)
            except ChatTemplateError as error:
                ours = error
            try:
                theirs = utils.render_jinja_template(
                    [messages], tools=tools, chat_template=template or CHATML, **kwargs)[0][0]
            except Exception as error:  # noqa: BLE001 - transformers raises jinja2's own
                theirs = error
            case = (family, name, add_generation_prompt)
            if isinstance(theirs, Exception):
                assert isinstance(ours, ChatTemplateError), (case, ours, theirs)
                assert str(theirs) in str(ours), case
            else:
                assert ours == theirs, case
