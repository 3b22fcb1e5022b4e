"""The batched engine on Gemma 3's forward (`Gemma4Model.sequence_rows`, a cache of its own a
sequence): every answer, tokens and log-probabilities, is bit for bit the ordinary loop's on the
model alone, for plain, prompt-lookup and seeded-sampled requests sharing passes, prompts
prefilled in chunks beside the others' decode rows, answers running past the sliding window
(its ring of window + 64 slots a sequence), and a neighbour cancelled mid-answer.
On a fabricated Gemma 3 GGUF (window 4), and on Gemma 3 270M when it is pulled (slow)."""

from __future__ import annotations

import numpy as np
import pytest
from batch_reference import alone

import onebit
from onebit.batch import BatchEngine, BatchRequest, StackRows
from onebit.gguf.fabricate import fabricate_gguf
from onebit.heads import NgramHead
from onebit.serve.scores import ScoredBase

SAMPLING = onebit.Sampling(temperature=0.8, top_k=40)


@pytest.fixture(scope="module")
def tiny_gemma3(tmp_path_factory):
    """A fabricated Gemma 3 on the integer kernel: sliding layers with a window of 4 (every
    answer crosses it many times), final soft-capping, 8 rows a pass."""
    pytest.importorskip("numba", reason="the int8 kernel needs the `fast` extra")
    path = tmp_path_factory.mktemp("batch-gemma3") / "tiny.gguf"
    fabricate_gguf(path, "gemma3", layers=4, hidden=64, heads=4, kv_heads=2, head_dim=16,
                   ffn=96, vocab=80, fields={"gemma3.final_logit_softcapping": 20.0})
    return onebit.load_model(path, dtype="float32", kernel="int8", max_batch_rows=8)


def _prompts(count: int, vocab: int) -> list[list[int]]:
    """Prompts of 3 to 21 ids, some repeating a phrase (so prompt lookup drafts and accepts)."""
    rng = np.random.default_rng(7)
    prompts = []
    for i in range(count):
        phrase = [int(t) for t in rng.integers(1, vocab, 3 + i % 4)]
        prompts.append((phrase * (1 + i % 3) + [int(t) for t in rng.integers(1, vocab, 3)])[:21])
    return prompts


def _request(prompt: list[int], i: int, budget: int, stop_ids=frozenset()) -> BatchRequest:
    spec = i % 3 != 0
    start = len(prompt)
    return BatchRequest.of(prompt=prompt, max_tokens=budget,
                           head=(lambda clock: NgramHead(2, 4)) if spec else None,
                           k=4 if spec else 0, sampling=SAMPLING if i % 2 else None, seed=i,
                           stop_ids=stop_ids,
                           wrap=lambda base: ScoredBase(base, start=start, top=2))


def _check_answers(model, requests, handles) -> None:
    for i, (request, handle) in enumerate(zip(requests, handles, strict=True)):
        result = handle.result()
        tokens, logprobs = alone(model, request)
        assert result.finish in ("stop", "length") and result.error is None, result.error
        assert result.tokens == tokens, i
        assert result.base.logprobs == logprobs, i


def test_G4_batched_answers_are_the_loops_answers_alone(tiny_gemma3):
    """Six requests on three slots (three wait for a slot), prefill chunks of 8 rows sharing
    passes with decode and verify rows, answers of 24 tokens past a window of 4: each answer's
    tokens and log-probabilities (with their top-2 alternatives) equal `onebit.run` on the
    model alone, greedy and seeded-sampled, plain and with prompt lookup."""
    model = tiny_gemma3
    engine = BatchEngine(model, slots=3, max_rows=24, chunk=8)
    requests = [_request(p, i, 24) for i, p in enumerate(_prompts(6, model.vocab_size))]
    handles = [engine.submit(r) for r in requests]
    engine.run_until_idle(2000)
    assert engine.stats.max_pass_rows > 8  # passes did hold several sequences' rows
    _check_answers(model, requests, handles)


def test_a_cancelled_gemma_neighbour_changes_nobody(tiny_gemma3):
    """A request cancelled after a few passes ends with a prefix of its answer alone; its slot
    (freed, caches as new) goes to the request that waited, whose answer and the others' are
    still the loop's alone."""
    model = tiny_gemma3
    engine = BatchEngine(model, slots=2, max_rows=24, chunk=8)
    requests = [_request(p, i, 20) for i, p in enumerate(_prompts(3, model.vocab_size))]
    handles = [engine.submit(r) for r in requests]
    for _ in range(5):
        engine.step()
    handles[0].cancel()
    engine.run_until_idle(2000)
    cancelled = handles[0].result()
    answer, _ = alone(model, requests[0])
    assert cancelled.finish == "cancelled" and cancelled.tokens == answer[:len(cancelled.tokens)]
    _check_answers(model, requests[1:], handles[1:])


def test_sequence_rows_refuses_what_its_rings_cannot_hold(tiny_gemma3):
    """More rows of one sequence in a pass than the stack's `rows` (its sliding rings' slack),
    or a sequence the stack does not have, is a ValueError naming it, before anything is
    written; the default stack takes the batch engine's default chunk whatever the model's
    own max_batch_rows (8 here)."""
    model = tiny_gemma3
    assert model.sequence_stack(1).rows >= BatchEngine(model, slots=1).chunk
    stack = model.sequence_stack(2, rows=8)
    with pytest.raises(ValueError, match="9 rows of sequence 1 in one pass"):
        model.sequence_rows(stack, [1] * 9, list(range(9)), [1] * 9)
    with pytest.raises(ValueError, match="sequence 2 is not one of the stack's 2"):
        model.sequence_rows(stack, [1], [0], [2])
    assert all(not k.any() for k in stack.k[1].values())


@pytest.mark.slow
def test_batched_gemma3_270m_answers_are_the_loops_answers_alone():
    """The same on Gemma 3 270M (Q4_K_M on the integer kernel, window 512): five prompts on
    three slots, greedy and seeded-sampled, plain and with prompt lookup (skipped when the
    model is not pulled). Slow: five answers alone and batched on a 270M model."""
    from onebit.hub import skip_unless_cached
    from onebit.text.generate import model_tokenizer

    model = onebit.load_model(skip_unless_cached("gemma3"), kernel="int8")
    assert isinstance(StackRows(model, 3), StackRows)
    tok = model_tokenizer(model)
    texts = ["The capital of France is", "Once upon a time, there was a",
             "def fibonacci(n):", "The three primary colours are red, blue and",
             "Water boils at a temperature of"]
    requests = [_request(tok.encode(t), i, 16, frozenset(tok.stop_ids))
                for i, t in enumerate(texts)]
    engine = BatchEngine(model, slots=3, max_rows=24, chunk=8)
    handles = [engine.submit(r) for r in requests]
    engine.run_until_idle(2000)
    _check_answers(model, requests, handles)


def test_kv_bytes_per_position_is_what_a_global_cache_grows_by(tiny_gemma3):
    """`StackRows.kv_bytes_per_position` over Gemma's sequences (what serve's KV bound is made
    of) equals the bytes one more position adds to a sequence's caches, keys and values, summed
    over the layers that own their K/V, read off the caches themselves."""
    model = tiny_gemma3
    rows = StackRows(model, 2)
    k, _ = model.empty_caches()
    per_position = sum(cache.shape[0] * cache.shape[2] * cache.itemsize for cache in k.values())
    assert rows.kv_bytes_per_position() == 2 * per_position > 0
