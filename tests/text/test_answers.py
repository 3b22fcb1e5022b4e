"""`greedy_answers`: many prompts decoded side by side give exactly `generate`'s greedy answers,
on the real default model, SmolLM2-135M-Instruct, through the integer kernel's compiled stack
(skipped when the model is not in the cache and cannot be pulled)."""

import pytest

import onebit
from onebit.text.answers import greedy_answers

PROMPTS = [
    "What is the capital of France? Answer in one word.",   # stops early, on <|im_end|>
    "Give me three tips for sleeping better.",
    "Explain what a compiler does.",
    [{"role": "user", "content": "Write a short poem about autumn leaves"}],
    "Say hi.",
]


@pytest.fixture(scope="module")
def smollm2_int8(smollm2_path):
    return onebit.load_model(smollm2_path, kernel="int8")


@pytest.mark.slow  # the real model, each answer against generate (5 s for three)
@pytest.mark.parametrize("batch", [1, 2, 8])
def test_side_by_side_answers_are_generates(smollm2_int8, batch):
    """With 1, 2 or 8 slots (fewer prompts than slots, slots refilled as answers end, an
    answer that stops on its stop token long before the budget) every answer's prompt ids and
    tokens equal `generate`'s greedy run of that prompt alone, stop token included; each is
    reported once as it ends."""
    model = smollm2_int8
    told = []
    got = greedy_answers(model, PROMPTS, max_tokens=24, batch=batch,
                         on_answer=lambda i, a: told.append(i))
    assert sorted(told) == list(range(len(PROMPTS)))
    for prompt, answer in zip(PROMPTS, got, strict=True):
        want = onebit.generate(model, prompt, max_tokens=24, head="none")
        assert answer.prompt_ids == list(want.prompt_ids)
        assert answer.tokens == [int(t) for t in want.result.tokens], prompt
    assert got[0].tokens[-1] == 2 and len(got[0].tokens) < 24  # the early stop


def test_the_model_state_is_untouched(smollm2_int8):
    """Answering side by side uses caches of its own: a model one token into its own sequence
    before it takes its next step after it exactly as it would have without it."""
    import numpy as np

    model = smollm2_int8
    model.reset()
    model.step(7, 0)  # not the chat template's first token: its cache row must differ
    want = model.step(42, 1).copy()
    model.reset()
    model.step(7, 0)  # not the chat template's first token: its cache row must differ
    greedy_answers(model, PROMPTS[:2], max_tokens=4, batch=2)
    assert np.array_equal(model.step(42, 1), want)


@pytest.mark.slow  # the real model without its compiled stack (5.5 s)
def test_a_model_without_a_compiled_stack_answers_one_by_one(smollm2_path):
    """On the float reference (no compiled stack) the answers come from `generate`, one prompt
    at a time, and are its answers."""
    model = onebit.load_model(smollm2_path, kernel="numba")
    assert model.sequence_stack(2) is None
    got = greedy_answers(model, PROMPTS[:2], max_tokens=6, batch=2)
    for prompt, answer in zip(PROMPTS[:2], got, strict=True):
        want = onebit.generate(model, prompt, max_tokens=6, head="none")
        assert answer.tokens == [int(t) for t in want.result.tokens]


@pytest.mark.parametrize("field, value, message", [
    ("batch", 0, "batch must be an integer >= 1"),
    ("batch", True, "batch must be an integer >= 1"),
    ("max_tokens", 0, "max_tokens must be an integer >= 1"),
])
def test_bad_arguments_are_refused_by_name(smollm2_int8, field, value, message):
    """A batch or budget that is not a positive integer is refused before anything runs."""
    kwargs = {"max_tokens": 4, "batch": 2, field: value}
    with pytest.raises(ValueError, match=message):
        greedy_answers(smollm2_int8, PROMPTS[:1], **kwargs)


def test_a_prompt_that_fills_the_context_is_refused_before_any_answer(smollm2_int8):
    """Every prompt is encoded before decoding starts: one that leaves no room in the model's
    context raises PromptError, as `generate` would, and nothing is reported answered."""
    from onebit.text.errors import PromptError

    told = []
    with pytest.raises(PromptError, match="leaves no room"):
        greedy_answers(smollm2_int8, [PROMPTS[0], "hi " * 9000], max_tokens=4,
                       on_answer=lambda i, a: told.append(i))
    assert told == []


@pytest.mark.slow  # the real model's prefill rows (3 s)
def test_distilled_rows_are_a_prefills(smollm2_int8):
    """`onebit.train.data.distil` keeps each position's rows as the side-by-side passes
    compute them; every sequence (tokens, answer start, the three feature rows, the top-32 ids
    and logits, at every position, the last answer token's included) equals, bit for bit, a
    prefill of the whole sequence with the taps set (`sequence_of`), whatever the batch."""
    import numpy as np

    from onebit.heads.eagle import default_taps
    from onebit.train import data

    model = smollm2_int8
    taps = default_taps(model.layer_count)
    for at_once in (1, 3):
        for seq in data.distil(model, PROMPTS, max_tokens=24, taps=taps, at_once=at_once):
            want = data.sequence_of(model, list(seq.tokens), seq.answer_start, taps)
            assert seq.answer_start == want.answer_start
            for name in ("tokens", "features", "top_ids", "top_logits"):
                got, ref = getattr(seq, name), getattr(want, name)
                assert got.dtype == ref.dtype and np.array_equal(got, ref), (at_once, name)
