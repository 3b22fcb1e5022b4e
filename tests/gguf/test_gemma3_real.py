"""Gemma 3 270M (Q4_K_M, `onebit pull gemma3`) read by onebit, checked against transformers'
load of the same file (`Gemma3ForCausalLM`, float64): logits and greedy text; prompt lookup on
it equals greedy; the base contract holds. Skipped when the file is absent or transformers /
torch are not installed. `benchmarks/gemma3_greedy.py` runs the 10-prompt, 64-token greedy
comparison and prints it."""

from __future__ import annotations

import numpy as np
import pytest
from peer_modules import lazy

import onebit
from onebit.gguf import read_gguf
from onebit.models import load_model

torch = lazy("torch")
transformers = lazy("transformers")

PROMPTS = [  # the base model continues text: ordinary openings
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the nth Fibonacci number.\"\"\"\n",
    "Photosynthesis is the process by which",
    "Once upon a time, in a small village by the sea,",
]
NEW_TOKENS = 16


@pytest.fixture(scope="module")
def peer(gemma3):
    """transformers' float64 model from the same GGUF file."""
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(gemma3.parent), gguf_file=gemma3.name, dtype=torch.float64)
    return model.eval()


@pytest.fixture(scope="module")
def ours64(gemma3):
    return load_model(gemma3, dtype="float64", kernel="numpy")


@pytest.mark.slow
def test_logits_float64(peer, ours64):
    """On four prompts, every position's logits agree with transformers' within 1e-6 of the
    logit range (SmolLM2's bound; printed: the figure docs/real-models.md reports)."""
    worst = 0.0
    for prompt in PROMPTS:
        ids = ours64.tokenizer.encode(prompt)[:24]
        with torch.no_grad():
            theirs = peer(torch.tensor([ids])).logits[0].numpy()
        ours64.reset()
        ours = np.stack([ours64.step(t, p) for p, t in enumerate(ids)])
        span = float(theirs.max() - theirs.min())
        worst = max(worst, float(np.abs(ours - theirs).max()) / span)
    print(f"max |onebit - transformers| / logit range, float64: {worst:.3g}")
    assert worst <= 1e-6


@pytest.mark.slow
def test_greedy_text_float64(peer, ours64):
    """onebit's float64 greedy tokens equal transformers' float64 greedy, token for token, on
    the prompts (16 tokens each, or up to transformers' EOS)."""
    for prompt in PROMPTS:
        ids = ours64.tokenizer.encode(prompt)
        with torch.no_grad():
            out = peer.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False)
        theirs = [int(t) for t in out[0, len(ids):]]
        ours64.reset()
        ours = onebit.greedy(ours64, ids, max_tokens=len(theirs)).tokens
        assert list(ours) == theirs, prompt


REPEATING = ("Rewrite this sentence exactly: the quick brown fox jumps over the lazy dog, "
             "and the quick brown fox jumps over the lazy dog again.\n")


@pytest.fixture(scope="module")
def contents(gemma3):
    return read_gguf(gemma3)


def fresh32(contents, gemma3, **options):
    """A new float32 Gemma 3 from the file's contents, read once."""
    from onebit.models.registry import build_model

    return build_model(contents.config, contents.tensors, source=str(gemma3), **options)


@pytest.mark.slow
def test_prompt_lookup_equals_greedy(contents, gemma3, ours64):
    """`onebit.run` with prompt lookup (the ngram head) emits greedy's tokens, and on a prompt
    that repeats itself accepts drafts (so the speculative path is what is compared)."""
    from onebit.heads.ngram import NgramHead

    base = fresh32(contents, gemma3)
    accepted = 0
    for prompt in [*PROMPTS[:2], REPEATING]:
        ids = ours64.tokenizer.encode(prompt)
        base.reset()
        want = onebit.greedy(base, ids, max_tokens=NEW_TOKENS).tokens
        base.reset()
        got = onebit.run(base, NgramHead(n=3, k=4), ids, max_tokens=NEW_TOKENS, k=4)
        assert got.tokens == want, prompt
        accepted += got.stats.accepted
    assert accepted > 0


@pytest.mark.slow
def test_base_contract_on_gemma3(contents, gemma3):
    """The base contract (B1..B8) holds on Gemma 3 270M in float32: batches equal steps bit for
    bit, commits, refusals and resets behave."""
    from pytest_onebit import check_base
    from pytest_onebit.base.checks import BaseSettings

    report = check_base(lambda: fresh32(contents, gemma3, max_batch_rows=8),
                        settings=BaseSettings(positions=(0, 2), script_length=8, examples=2))
    assert report.ok, report.to_text()
