"""`onebit.generate(prediction=...)` and `onebit generate --prediction FILE`: a guess of the
answer (OpenAI's predicted outputs) drafts, and the text is the text without it, greedy and
seeded-sampled; it drafts in place of a named head; one of the wrong type is refused by
name."""

from __future__ import annotations

import pytest

import onebit

PROMPT = "Hello, world"


def test_the_text_is_the_text_without_the_prediction(tiny_model):
    """Greedy: with the answer itself, an edited answer or unrelated text as the prediction,
    the text is plain decoding's; the right prediction's drafts are all accepted."""
    plain = onebit.generate(tiny_model, PROMPT, max_tokens=40, head="none")
    text = plain.text
    for guess in (text, text[:10] + "~~~" + text[14:], "nothing like it at all"):
        got = onebit.generate(tiny_model, PROMPT, max_tokens=40, prediction=guess)
        assert got.result.tokens == plain.result.tokens, guess
    right = onebit.generate(tiny_model, PROMPT, max_tokens=40,
                            prediction=plain.result.tokens)  # token ids work too
    assert right.result.stats.accepted == right.result.stats.proposed > 0


def test_a_seeded_sampled_answer_replays_with_a_prediction(tiny_model):
    """The prediction's drafts are deterministic, so a seeded sampled run replays: the same
    seed and prediction give the same tokens."""
    s = onebit.Sampling(temperature=0.9)
    plain = onebit.generate(tiny_model, PROMPT, max_tokens=30, head="none", sampling=s, seed=4)
    runs = [onebit.generate(tiny_model, PROMPT, max_tokens=30, sampling=s, seed=4,
                            prediction=plain.text) for _ in range(2)]
    assert runs[0].result.tokens == runs[1].result.tokens


def test_the_prediction_drafts_in_place_of_a_named_head(tiny_model):
    """With a prediction, a named head is not asked: the prediction drafts (as the server
    does), and `head="none"` is the same request decoded plainly."""
    plain = onebit.generate(tiny_model, PROMPT, max_tokens=24, head="none")
    got = onebit.generate(tiny_model, PROMPT, max_tokens=24, head="ngram",
                          prediction=plain.result.tokens)
    assert got.result.tokens == plain.result.tokens
    assert got.result.stats.accepted == got.result.stats.proposed > 0
    none = onebit.generate(tiny_model, PROMPT, max_tokens=24, head="none", prediction="x")
    assert none.result.stats.proposed == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"prediction": 3.5}, "prediction must be a str or a list of token ids"),
    ({"prediction": [1, -2]}, "prediction must be a str or a list of token ids"),
])
def test_bad_predictions_are_refused_by_name(tiny_model, kwargs, message):
    """A prediction that is neither text nor token ids is a ValueError saying so."""
    with pytest.raises(ValueError, match=message):
        onebit.generate(tiny_model, PROMPT, max_tokens=4, **{"prediction": "x", **kwargs})


@pytest.mark.slow  # the CLI on the real model in a subprocess (5 s)
def test_the_command_line_takes_a_prediction_file(tiny_dir, tmp_path, onebit_cli):
    """`onebit generate --prediction FILE` prints the text `--head none` prints; a missing
    file is one line naming the option, exit 2 (as a bad --prompt-file)."""
    plain = onebit_cli("generate", "--model", tiny_dir, PROMPT, "--max-tokens", 16,
                       "--head", "none")
    guess = tmp_path / "guess.txt"
    guess.write_text(plain.stdout)
    got = onebit_cli("generate", "--model", tiny_dir, PROMPT, "--max-tokens", 16,
                     "--prediction", guess)
    assert got.returncode == 0 and got.stdout == plain.stdout
    missing = onebit_cli("generate", "--model", tiny_dir, PROMPT, "--prediction",
                         tmp_path / "nope.txt")
    assert missing.returncode == 2 and "--prediction" in missing.stderr
