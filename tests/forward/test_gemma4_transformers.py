"""Cross-check of the Gemma 4 forward against transformers' Gemma4ForCausalLM (CPU torch, the
`peer` extra), in float64: the same tiny random model, saved with save_pretrained and loaded by
onebit's HF loader, gives the same logits at every position of a prompt several times longer
than the sliding window, with per-layer embeddings, KV sharing, soft-capping, and every norm
weight and layer scalar moved away from its initial value.

transformers computes the norms and RoPE angles in float32 even in a float64 model, so the
agreement is to ~1e-6, not to float64 precision; the bound is 1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest
from peer_modules import lazy

from onebit.models import Gemma4Model, load_model

transformers = lazy("transformers")
torch = lazy("torch")


@pytest.fixture(autouse=True)
def _gemma4_in_transformers():
    if not hasattr(transformers, "Gemma4ForCausalLM"):
        pytest.skip("transformers has no Gemma 4 (needs >= 5.5)")


WINDOW = 5
TOKENS = [(29 * i + 3) % 128 for i in range(24)]  # 24 positions: almost 5 windows
TOLERANCE = 1e-4
BASE = dict(
    vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=6,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32,
    sliding_window=WINDOW, vocab_size_per_layer_input=128, hidden_size_per_layer_input=8,
    layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
    num_kv_shared_layers=2, final_logit_softcapping=3.0, attn_implementation="eager",
)


def perturb(model, seed: int) -> None:
    """Norm weights start at 1 and layer scalars at 1: move them, or their product goes
    untested. Projections and embeddings are redrawn at unit gain so that every layer, and
    the PLE path, moves the logits."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            noise = torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype)
            if name.endswith("norm.weight"):
                tensor.add_(0.3 * noise)
            elif name.endswith("layer_scalar"):
                tensor.copy_(1.0 + 0.3 * noise)
            elif name.endswith("embed_tokens.weight"):
                tensor.copy_(0.3 * noise)
            elif name.endswith("embed_tokens_per_layer.weight"):
                tensor.copy_(noise)
            elif tensor.ndim == 2:
                tensor.copy_(noise / tensor.shape[1] ** 0.5)


def build(tmp_path, seed: int = 1, **overrides):
    """A random transformers Gemma 4 (float64, perturbed), saved to tmp_path."""
    config = transformers.Gemma4TextConfig(**{**BASE, **overrides})
    torch.manual_seed(seed)
    hf_model = transformers.Gemma4ForCausalLM(config).double().eval()
    perturb(hf_model, seed)
    hf_model.save_pretrained(tmp_path)
    return hf_model


def logits_of(hf_model, tokens=TOKENS) -> np.ndarray:
    with torch.no_grad():
        return hf_model(torch.tensor([tokens]), use_cache=False).logits[0].double().numpy()


def max_difference(hf_model, path, kernel="numpy") -> float:
    """Max abs logit difference over all positions: transformers' full-sequence forward vs
    onebit stepping the tokens one by one (float64); the greedy token agrees everywhere."""
    expected = logits_of(hf_model)
    model = load_model(path, dtype="float64", kernel=kernel)
    assert isinstance(model, Gemma4Model)
    got = np.stack([model.step(t, pos) for pos, t in enumerate(TOKENS)])
    assert got.shape == expected.shape
    assert np.array_equal(got.argmax(axis=1), expected.argmax(axis=1))
    assert np.abs(expected).max() > 1.0  # logits of O(1): the comparison has signal
    return float(np.abs(got - expected).max())


def test_gemma4_matches_transformers_past_the_window(tmp_path):
    """Six layers (sliding, sliding, global, twice; the last two read layers 1's and 2's
    K/V), PLE, soft-capping at 3, wider global heads with proportional RoPE, window 5 over 24
    positions: onebit's logits equal transformers' within 1e-4 at every position."""
    hf_model = build(tmp_path)
    diff = max_difference(hf_model, tmp_path)
    print(f"gemma4 max abs logit diff vs transformers: {diff:.3g}")
    assert diff < TOLERANCE


@pytest.mark.parametrize("variant", ["k-eq-v", "double-wide-mlp", "no-ple-untied"])
def test_gemma4_variants_match_transformers(tmp_path, variant):
    """The config switches the forward implements: global layers whose values are their raw
    keys (with their own KV head count), a doubled MLP on the KV-shared layers, and a model
    without PLE or soft-capping and with an untied lm_head, each within 1e-4."""
    overrides = {
        "k-eq-v": dict(attention_k_eq_v=True, num_global_key_value_heads=1),
        "double-wide-mlp": dict(use_double_wide_mlp=True),
        "no-ple-untied": dict(hidden_size_per_layer_input=0, final_logit_softcapping=None,
                              num_kv_shared_layers=0,
                              tie_word_embeddings=False),
    }[variant]
    hf_model = build(tmp_path, seed=2, **overrides)
    diff = max_difference(hf_model, tmp_path)
    print(f"gemma4 {variant} max abs logit diff vs transformers: {diff:.3g}")
    assert diff < TOLERANCE


def test_the_window_and_the_ple_both_move_the_logits(tmp_path):
    """The cross-check has teeth: a forward whose sliding window were wider, or whose PLE
    were off, would differ from transformers' by far more than the tolerance."""
    hf_model = build(tmp_path)
    expected = logits_of(hf_model)
    wide = load_model(tmp_path, dtype="float64", kernel="numpy")
    object.__setattr__(wide.config, "sliding_window", 1000)
    wide.reset()
    got = np.stack([wide.step(t, pos) for pos, t in enumerate(TOKENS)])
    assert np.abs(got[:WINDOW] - expected[:WINDOW]).max() < TOLERANCE  # same inside the window
    assert np.abs(got - expected).max() > 100 * TOLERANCE
    no_ple = load_model(tmp_path, dtype="float64", kernel="numpy")
    no_ple._per_layer_inputs = lambda tokens, x: np.zeros(
        (len(tokens), 6, 8), no_ple.dtype)
    got = np.stack([no_ple.step(t, pos) for pos, t in enumerate(TOKENS)])
    assert np.abs(got - expected).max() > 100 * TOLERANCE
