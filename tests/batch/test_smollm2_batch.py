"""The batched engine on the real default model, SmolLM2-135M-Instruct through the integer
kernel's compiled stack: every answer, tokens and log-probabilities, is bit for bit the
ordinary loop's on the model alone, for plain, prompt-lookup and seeded-sampled requests
sharing passes, with prompts prefilled in chunks beside the others' decode rows and a
neighbour cancelled mid-answer (skipped when the model is not in the cache)."""

import pytest
from batch_reference import alone

import onebit
from onebit.batch import BatchEngine, BatchRequest, StackRows
from onebit.heads import NgramHead
from onebit.serve.scores import ScoredBase
from onebit.text.generate import model_tokenizer, prompt_ids

PROMPTS = [
    "What is the capital of France? Answer in one word.",   # stops early, on <|im_end|>
    "Give me three tips for sleeping better.",
    "Explain what a compiler does.",
    "Write a short poem about autumn leaves",
    "List the planets of the solar system and one fact about each.",
]
SAMPLING = onebit.Sampling(temperature=0.8, top_k=40)
BUDGET = 20


@pytest.fixture(scope="module")
def smollm2_int8(smollm2_path):
    return onebit.load_model(smollm2_path, kernel="int8")


def _request(model, i: int) -> BatchRequest:
    tok = model_tokenizer(model)
    ids = prompt_ids(model, tok, PROMPTS[i], BUDGET)[0]
    spec = i % 3 != 0
    start = len(ids)
    return BatchRequest.of(prompt=ids, max_tokens=BUDGET,
                        head=(lambda clock: NgramHead(3, 4)) if spec else None,
                        k=4 if spec else 0, sampling=SAMPLING if i % 2 else None, seed=i,
                        stop_ids=frozenset(tok.stop_ids),
                        wrap=lambda base: ScoredBase(base, start=start, top=2))


def test_batched_answers_are_the_loops_answers_alone(smollm2_int8):
    """Five requests on three slots (two wait for a slot), prefill chunks of 8 rows sharing
    passes with decode and verify rows: each answer's tokens, log-probabilities (and their
    top-2 alternatives) equal `onebit.run` on the model alone, greedy and seeded-sampled,
    plain and with prompt lookup."""
    model = smollm2_int8
    engine = BatchEngine(model, slots=3, max_rows=24, chunk=8)
    requests = [_request(model, i) for i in range(len(PROMPTS))]
    handles = [engine.submit(r) for r in requests]
    engine.run_until_idle(2000)
    assert engine.stats.max_pass_rows > 8  # passes did hold several sequences' rows
    for i, (request, handle) in enumerate(zip(requests, handles, strict=True)):
        result = handle.result()
        tokens, logprobs = alone(model, request)
        assert result.finish in ("stop", "length") and result.error is None, result.error
        assert result.tokens == tokens, PROMPTS[i]
        assert result.base.logprobs == logprobs, PROMPTS[i]
    assert handles[0].result().finish == "stop"


def test_a_cancelled_neighbour_changes_nobody(smollm2_int8):
    """A request cancelled after a few passes ends with a prefix of its answer alone, its slot
    goes to the request that waited, and the others' answers are still the loop's alone."""
    model = smollm2_int8
    engine = BatchEngine(model, slots=2, max_rows=24, chunk=8)
    requests = [_request(model, i) for i in (1, 2, 4)]
    handles = [engine.submit(r) for r in requests]
    for _ in range(6):
        engine.step()
    handles[0].cancel()
    engine.run_until_idle(2000)
    cancelled = handles[0].result()
    answer, _ = alone(model, requests[0])
    assert cancelled.finish == "cancelled" and cancelled.tokens == answer[:len(cancelled.tokens)]
    for request, handle in zip(requests[1:], handles[1:], strict=True):
        assert handle.result().tokens == alone(model, request)[0]


def test_a_model_without_the_compiled_stack_is_refused_by_name(smollm2_path):
    """Batching needs the compiled stack; the float kernel's model is refused with why."""
    model = onebit.load_model(smollm2_path, kernel="numpy")
    with pytest.raises(ValueError, match="batching needs a model that runs several sequences"):
        StackRows(model, 2)
