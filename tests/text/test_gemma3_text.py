"""Gemma 3 270M by name (`--model gemma3`): loaded from the cache, given Gemma's turn format
(its file carries no template), and run by `generate` and `chat`. Skipped unless
`onebit pull gemma3` has run."""

from __future__ import annotations

import pytest

from onebit.hub import skip_unless_cached


@pytest.fixture(scope="module")
def gemma3_path():
    return skip_unless_cached("gemma3")


@pytest.mark.slow
def test_known_name_gets_gemma_turns(gemma3_path, capsys):
    """`load_text_model("gemma3")` loads the cached file, says on stderr that it is the base
    model, and renders a conversation in Gemma's turns: <bos>, the system text in front of
    the first user turn, `model` for the assistant, the generation prompt; it stops at <eos>
    and <end_of_turn>."""
    from onebit.text.load import load_text_model

    model = load_text_model("gemma3", kernel="numpy")
    assert model.source_path == gemma3_path
    assert "base (pretrained) model" in capsys.readouterr().err
    text = model.tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi "},
         {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}])
    assert text == ("<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                    "<start_of_turn>model\nHello.<end_of_turn>\n"
                    "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n")
    assert set(model.tokenizer.stop_ids) == {1, 106}


@pytest.mark.slow
def test_generate_and_chat_by_name(gemma3_path, onebit_cli):
    """`onebit generate --model gemma3 --no-chat` continues the text (greedy, the same text
    with prompt lookup as without), and `onebit chat --model gemma3` answers a turn."""
    plain = onebit_cli("generate", "--model", "gemma3", "--no-chat", "--head", "none",
                       "--max-tokens", "12", "The capital of France is")
    assert plain.returncode == 0, plain.stderr
    assert "capital" in plain.stdout and "base (pretrained) model" in plain.stderr
    lookup = onebit_cli("generate", "--model", "gemma3", "--no-chat", "--head", "ngram",
                        "--max-tokens", "12", "The capital of France is")
    assert lookup.returncode == 0 and lookup.stdout == plain.stdout
    chat = onebit_cli("chat", "--model", "gemma3", "--max-tokens", "8",
                      stdin="What is the capital of France?\n")
    assert chat.returncode == 0, chat.stderr
    assert "8 tokens" in chat.stderr
