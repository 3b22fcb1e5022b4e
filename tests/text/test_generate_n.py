"""`n` answers to one prompt (`onebit.generate_n`, the library's `n`; `onebit serve` derives its
answers' seeds the same way): N4, each answer is its own seeded answer alone. The knobs mutant
catalogue runs this file (mutants/knobs/09)."""

from __future__ import annotations

import pytest

import onebit

PROMPT = "abc abc abc abc abc abc abc abc"
WARM = onebit.Sampling(temperature=1.3)


@pytest.mark.parametrize("head", ["none", "ngram"])
def test_N4_each_answer_is_its_seeded_answer_alone(tiny_model, head):
    """N4: answer i of n = 4 sampled answers (seed 11, plain and under prompt lookup, with a
    presence penalty) is, token for token, the one answer `generate` gives alone with seed
    11 + i; the answers are not all the same, and the same call gives the same four again."""
    knobs = onebit.Processors(presence_penalty=0.7)
    options = dict(max_tokens=24, head=head, k=4, sampling=WARM, processors=knobs, chat=False)
    answers = onebit.generate_n(tiny_model, PROMPT, n=4, seed=11, **options)
    alone = [onebit.generate(tiny_model, PROMPT, seed=11 + i, **options) for i in range(4)]
    assert [a.result.tokens for a in answers] == [a.result.tokens for a in alone]
    assert [a.text for a in answers] == [a.text for a in alone]
    assert len({tuple(a.result.tokens) for a in answers}) > 1, "four answers, one stream"
    again = onebit.generate_n(tiny_model, PROMPT, n=4, seed=11, **options)
    assert [a.result.tokens for a in again] == [a.result.tokens for a in answers]


def test_N4_one_answer_is_generate(tiny_model):
    """n = 1 is `generate` itself: the same tokens for a seed, and for an rng of the caller's
    (which n = 1 may take: it is one stream)."""
    options = dict(max_tokens=16, head="none", sampling=WARM, chat=False)
    (one,) = onebit.generate_n(tiny_model, PROMPT, n=1, seed=3, **options)
    assert one.result.tokens == onebit.generate(tiny_model, PROMPT, seed=3, **options).result.tokens
    (mine,) = onebit.generate_n(tiny_model, PROMPT, n=1, rng=onebit.SeededRng(3), **options)
    assert mine.result.tokens == one.result.tokens


def test_unseeded_answers_draw_streams_of_their_own(tiny_model):
    """Without a seed each answer draws a fresh seed: eight unseeded answers are not all the
    same (a shared fixed seed would make them so)."""
    answers = onebit.generate_n(tiny_model, PROMPT, n=8, max_tokens=12, head="none",
                                sampling=WARM, chat=False)
    assert len({tuple(a.result.tokens) for a in answers}) > 1


@pytest.mark.parametrize("n, message", [(0, "n must be an integer >= 1, got 0"),
                                        (2.0, "n must be an integer >= 1, got 2.0"),
                                        (True, "n must be an integer >= 1, got True")])
def test_bad_n_is_refused_by_name(tiny_model, n, message):
    """An n that is not a positive integer is a ValueError naming it, before anything runs."""
    with pytest.raises(ValueError, match=message):
        onebit.generate_n(tiny_model, PROMPT, n=n, max_tokens=4)


def test_one_rng_for_several_answers_is_refused(tiny_model):
    """One rng cannot give n > 1 answers a stream each (each answer would take the draws the
    one before it left, so answer i would depend on answer i - 1's length): refused, naming
    rng and the way out (seed)."""
    with pytest.raises(ValueError, match="rng with n=3.*pass seed"):
        onebit.generate_n(tiny_model, PROMPT, n=3, rng=onebit.SeededRng(1), max_tokens=4,
                          sampling=WARM)
