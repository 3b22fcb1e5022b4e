"""Chat templates render as the model's file says, in a sandbox, with one-line errors."""

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


@pytest.mark.parametrize("template, says", [
    ("{{ messages.__class__.__mro__ }}", "sandbox"),
    ("{{ ''.__class__.__subclasses__() }}", "sandbox"),
    ("{{ messages.append(1) }}", "sandbox"),
    ("{{ cycler.__init__.__globals__ }}", "failed to render|sandbox"),
    ("{% for %}", "does not parse"),
    ("{{ undefined_function() }}", "failed to render"),
    ("{{ 1 / 0 }}", "failed to render"),
    ("{{ 'a' * 10**9 }}", "sandbox"),
    ("{{ [1] * 100000000 }}", "sandbox"),
    ("{{ 2 ** 100000000 }}", "sandbox"),
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
