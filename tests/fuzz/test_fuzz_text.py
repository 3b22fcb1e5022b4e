"""Text in, text out, fed garbage: tokenizer metadata, chat templates, prompt files and the
model cache. Each case ends in a typed one-line error naming the culprit, or in the right
answer; never a traceback, and never a corrupt cached model put to use."""

from __future__ import annotations

import json

import pytest
from cli_driver import judge_cli
from fuzzing import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from onebit import hub
from onebit.models import fabricate_model
from onebit.text import ChatTemplateError, Tokenizer, TokenizerError
from onebit.text.bytelevel import byte_alphabet
from onebit.text.chat import render

VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 10**7), st.floats(),
                   st.text(max_size=8), st.lists(st.text(max_size=3), max_size=4),
                   st.lists(st.integers(-3, 10), max_size=4))
KEYS = ["tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.scores",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.add_bos_token", "tokenizer.chat_template"]


def _good() -> dict:
    tokens = [byte_alphabet()[b] for b in range(256)] + ["<|endoftext|>"]
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": [1] * 256 + [3],
            "tokenizer.ggml.merges": [], "tokenizer.ggml.eos_token_id": 256}


@fuzz_settings(quick=60)
@given(key=st.sampled_from(KEYS), value=VALUES, drop=st.booleans())
def test_tokenizer_metadata(tally, key, value, drop):
    """One field of good metadata replaced by garbage (or dropped): the tokenizer is built and
    round-trips text, or the error is a TokenizerError naming a tokenizer key."""
    metadata = _good()
    if drop:
        metadata.pop(key, None)
    else:
        metadata[key] = value
    try:
        tok = Tokenizer.from_gguf_metadata(metadata)
    except TokenizerError as error:
        assert "tokenizer." in str(error) and "\n" not in str(error), error
        tally("text: bad tokenizer metadata", "clear error")
        return
    assert tok.decode(tok.encode("héllo 🤖", add_special_tokens=False)) == "héllo 🤖"
    tally("text: bad tokenizer metadata", "right answer")


def _sentencepiece() -> dict:
    words = ["\u2581", "\u2581\u2581", "a", "b", "\u2581a", "ab", "\u2581ab"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + words
    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": [2, 3, 3] + [6] * 256 + [1] * len(words),
            "tokenizer.ggml.scores": [0.0] * 259 + [-float(i) for i in range(len(words))]}


TEXT = st.lists(st.one_of(st.characters(), st.sampled_from(
    ["<s>", "</s>", "<|endoftext|>", " ", "  ", "\n", "a", "ab"])), max_size=20).map("".join)


@fuzz_settings(quick=100)
@given(text=TEXT, parse_special=st.booleans())
def test_any_text_comes_back(tally, text, parse_special):
    """Any text, special-token text and space runs mixed in, through a
    byte-level BPE and a SentencePiece vocabulary that can spell every byte: encode never
    fails, and decode gives the text back (SentencePiece with special tokens left as text,
    since a parsed one gets a space after it, and with "▁" read as the space it spells, both
    as in llama.cpp)."""
    text = text.encode("utf-8", "replace").decode("utf-8")
    bpe = Tokenizer.from_gguf_metadata(_good())
    assert bpe.decode(bpe.encode(text, add_special_tokens=False,
                                 parse_special=parse_special)) == text
    spm = Tokenizer.from_gguf_metadata(_sentencepiece())
    ids = spm.encode(text, parse_special=False)
    # SentencePiece spells a space "▁", so a "▁" in the text comes back as a space (llama.cpp's
    # token_to_piece unescapes it the same way)
    assert spm.decode(ids, skip_special_tokens=True) == text.replace("\u2581", " ")
    tally("text: any text through the tokenizers", "right answer")


PIECES = ["{{ ", " }}", "{% ", " %}", "messages", "[0]", "['content']", ".__class__",
          ".__mro__", ".__subclasses__()", ".__globals__", "raise_exception('x')", "| tojson",
          "(", ")", "for m in messages", "endfor", "if", "endif", "range(10**9)", "'a' * 10**9",
          "lipsum", "cycler", "joiner", "namespace()", ".append(1)", ".update({})", "self",
          "loop.index", "1/0", "strftime_now('%Y')", "add_generation_prompt", "bos_token",
          # what the render budget refuses (tests/fuzz/test_fuzz_templates.py composes them)
          " ~ ", "| center(10**9)", "| batch(10**9, 'x')", "lipsum(10**9)", ".ljust(10**9)",
          "{% generation %}", "{% endgeneration %}", "{% macro f() %}{{ f() }}{% endmacro %}",
          "f()", "| truncate(1, end='xx')"]


@fuzz_settings(quick=80)
@given(parts=st.lists(st.sampled_from(PIECES), max_size=10))
def test_chat_templates(tally, parts):
    """A template of hostile pieces (dunder access, mutation, huge ranges, bad syntax): it
    renders to text or fails with one ChatTemplateError line, never another exception."""
    try:
        text = render("".join(parts), [{"role": "user", "content": "hi"}])
    except ChatTemplateError as error:
        assert "\n" not in str(error)
        tally("text: hostile chat template", "clear error")
        return
    assert isinstance(text, str)
    tally("text: hostile chat template", "right answer")


@fuzz_settings(quick=20)
@given(data=st.binary(max_size=64), keep_size=st.booleans())
def test_corrupt_cache_is_never_used(tally, tmp_path_factory, monkeypatch, data, keep_size):
    """Whatever bytes sit at the cached model's path, `model_path` refuses them (they cannot
    hash to the model's sha256) and removes the file, so nothing later loads it."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("ONEBIT_HOME", str(home))
    path = hub.cache_path("smollm2")
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    with pytest.raises(hub.NotCachedError):
        hub.model_path("smollm2")
    assert not path.exists()
    tally("text: corrupt cached model", "clear error")


@pytest.fixture(scope="module")
def text_world(tmp_path_factory):
    """A fabricated model with a tokenizer.json and a hostile chat template beside it, and
    prompt files good and bad."""
    root = tmp_path_factory.mktemp("text")
    model = fabricate_model(root / "model", "qwen3", quantized=False, vocab_size=257)
    tok = Tokenizer.from_gguf_metadata(_good())
    tok.save_json(model / "tokenizer.json")
    hostile = fabricate_model(root / "hostile", "qwen3", quantized=False, vocab_size=257)
    tok.save_json(hostile / "tokenizer.json")
    (hostile / "tokenizer_config.json").write_text(json.dumps(
        {"eos_token": "<|endoftext|>", "chat_template": "{{ ''.__class__.__mro__ }}"}))
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    (root / "good.txt").write_text("hello")
    (root / "empty.txt").write_text("")
    return root


def cases(root) -> list[list[str]]:
    model, hostile = str(root / "model"), str(root / "hostile")
    return [
        ["generate", "--model", model, "--prompt-file", str(root / "latin1.txt")],
        ["generate", "--model", model, "--prompt-file", str(root / "nowhere.txt")],
        ["generate", "--model", model, "--prompt-file", str(root / "empty.txt")],
        ["generate", "--model", model, "--prompt-file", "/dev/null"],
        ["generate", "--model", model, "--prompt-file", str(root)],
        ["generate", "--model", model, "hi", "--prompt-file", str(root / "good.txt")],
        ["generate", "--model", model],
        ["generate", "--model", hostile, "hi", "--chat"],
        ["generate", "--model", hostile, "hi", "--no-chat", "--max-tokens", "2"],
        ["generate", "--model", model, "hi", "--no-chat", "--system", "s"],
        ["generate", "--model", model, "hi", "--head", "mtp"],
        ["generate", "--model", model, "hi", "--head", "dflash", "--draft", str(root)],
        ["generate", "--model", model, "hi", "--temperature", "-1"],
        ["generate", "--model", model, "hi", "--top-p", "0"],
        ["generate", "--model", model, "hi", "--max-tokens", "0"],
        ["generate", "--model", str(root / "good.txt"), "hi"],
        ["pull", "nothing"],
    ]


def test_text_commands(tally, text_world):
    """Each bad prompt file, hostile template, bad knob or model is one line and exit 2; the
    model with the hostile template still answers a raw prompt (--no-chat never runs it)."""
    for argv in cases(text_world):
        outcome = judge_cli(argv)
        tally("cli: text commands", outcome)
        expected = "right answer" if "--no-chat" in argv and "--system" not in argv \
            else "clear error"
        assert outcome == expected, argv


MODEL_NAMES = st.sampled_from(["gpt2", "gemma4", "llama", "bert", "t5", "rwkv"])


@fuzz_settings(quick=80)
@given(model=MODEL_NAMES, key=st.sampled_from(KEYS + ["tokenizer.ggml.precompiled_charsmap",
                                                      "tokenizer.ggml.add_space_prefix",
                                                      "tokenizer.ggml.unknown_token_id"]),
       value=VALUES, drop=st.booleans())
def test_every_vocabulary_type_takes_garbage_cleanly(tally, model, key, value, drop):
    """Good byte-level metadata relabelled as each vocabulary type onebit builds, with one
    field replaced by garbage or dropped: the tokenizer is built and encodes text, or the
    error is a one-line TokenizerError naming a tokenizer key; never another exception."""
    metadata = _good()
    metadata["tokenizer.ggml.model"] = model
    metadata["tokenizer.ggml.scores"] = [-float(i) for i in range(257)]
    if drop:
        metadata.pop(key, None)
    else:
        metadata[key] = value
    try:
        tok = Tokenizer.from_gguf_metadata(metadata)
        tok.decode(tok.encode("héllo wörld 🤖\n\t x", parse_special=False))
    except TokenizerError as error:
        assert "\n" not in str(error), error
        tally("text: garbage in every vocabulary type", "clear error")
        return
    tally("text: garbage in every vocabulary type", "right answer")
