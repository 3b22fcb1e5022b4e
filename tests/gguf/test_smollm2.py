"""SmolLM2-135M-Instruct Q4_1 read by onebit, checked against transformers' load of the same
file (both in float64, from the same dequantised weights): tensors, logits, greedy text; and
speculation on it equals greedy, and the base contract holds. Skipped when the file is absent
(`onebit pull smollm2`) or transformers / torch are not installed."""

from __future__ import annotations

import numpy as np
import pytest
from peer_modules import lazy

import onebit
from onebit.gguf import read_gguf
from onebit.models import load_model

torch = lazy("torch")
transformers = lazy("transformers")

PROMPTS = [
    "Write a Python function that returns the nth Fibonacci number.",
    "What is the capital of France?",
    "Give me three tips for sleeping better.",
    "Translate 'good morning' into Spanish.",
    "Explain photosynthesis in one sentence.",
    "List the first five prime numbers.",
    "Write a haiku about the sea.",
    "What is 12 times 12?",
    "Name a famous painting by Leonardo da Vinci.",
    "How many legs does a spider have?",
]
NEW_TOKENS = 16


@pytest.fixture(scope="module")
def peer(smollm2):
    """transformers' float64 model and tokenizer from the same GGUF file."""
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(smollm2.parent), gguf_file=smollm2.name, dtype=torch.float64)
    tok = transformers.AutoTokenizer.from_pretrained(str(smollm2.parent), gguf_file=smollm2.name)
    return model.eval(), tok


@pytest.fixture(scope="module")
def ours64(smollm2):
    return load_model(smollm2, dtype="float64")


def chat_ids(tok, prompt: str) -> list[int]:
    ids = tok.apply_chat_template([{"role": "user", "content": prompt}],
                                  add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    return [int(i) for i in ids]


@pytest.mark.slow
def test_tensors_equal_transformers(smollm2, peer):
    """Every weight onebit reads (dequantised, q/k rows in HF order) equals the parameter
    transformers loads from the same file, exactly."""
    model, _ = peer
    contents = read_gguf(smollm2)
    params = dict(model.named_parameters())
    for name, stored in contents.tensors.items():
        theirs = params[name].detach().numpy()
        assert np.array_equal(stored.data.astype(np.float64), theirs), name
    assert set(params) - set(contents.tensors) <= {"lm_head.weight"}  # tied to the embedding


@pytest.mark.slow
def test_logits_float64(peer, ours64):
    """On several prompts, every position's logits agree with transformers' within 1e-6 of
    the logit range (printed: the figure the note reports)."""
    model, tok = peer
    worst = 0.0
    for prompt in PROMPTS[:4]:
        ids = chat_ids(tok, prompt)[:24]
        with torch.no_grad():
            theirs = model(torch.tensor([ids])).logits[0].numpy()
        ours64.reset()
        ours = np.stack([ours64.step(t, p) for p, t in enumerate(ids)])
        span = float(theirs.max() - theirs.min())
        worst = max(worst, float(np.abs(ours - theirs).max()) / span)
    print(f"max |onebit - transformers| / logit range, float64: {worst:.3g}")
    assert worst <= 1e-6


@pytest.mark.slow
def test_greedy_text_float64(peer, ours64):
    """onebit's float64 greedy tokens equal transformers' float64 greedy on 10 chat prompts,
    token for token (prompt ids from transformers' own tokenizer and chat template), up to
    where transformers stops at EOS. (generate is called with the file's own generation
    config: overriding eos_token_id=None there changes transformers' output, not ours.)"""
    model, tok = peer
    for prompt in PROMPTS:
        ids = chat_ids(tok, prompt)
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS,
                                 do_sample=False)
        theirs = [int(t) for t in out[0, len(ids):]]
        assert theirs
        ours64.reset()
        ours = onebit.greedy(ours64, ids, max_tokens=len(theirs)).tokens
        assert list(ours) == theirs, (prompt, tok.decode(ours), tok.decode(theirs))


REPEATING = ("Rewrite this sentence exactly: the quick brown fox jumps over the lazy dog, "
             "and the quick brown fox jumps over the lazy dog again.")


@pytest.fixture(scope="module")
def contents(smollm2):
    return read_gguf(smollm2)


def fresh32(contents, smollm2):
    """A new float32 SmolLM2 from the file's contents, read once (no re-reading per base)."""
    from onebit.models.registry import build_model

    return build_model(contents.config, contents.tensors, source=str(smollm2))


@pytest.mark.slow
def test_prompt_lookup_equals_greedy(peer, contents, smollm2):
    """`onebit.run` with prompt lookup (the ngram head) emits greedy's tokens on chat prompts
    and on a prompt that repeats itself, where it must also accept drafts (so the speculative
    path, not only plain steps, is what is compared)."""
    from onebit.heads.ngram import NgramHead

    _, tok = peer
    base = fresh32(contents, smollm2)
    accepted = 0
    for prompt in [*PROMPTS[:3], REPEATING]:
        ids = chat_ids(tok, prompt)
        base.reset()
        want = onebit.greedy(base, ids, max_tokens=NEW_TOKENS).tokens
        base.reset()
        got = onebit.run(base, NgramHead(n=3, k=4), ids, max_tokens=NEW_TOKENS, k=4)
        assert got.tokens == want, prompt
        accepted += got.stats.accepted
    assert accepted > 0
