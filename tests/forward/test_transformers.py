"""Cross-check against HuggingFace transformers (CPU torch): the same tiny random Qwen3 and
Qwen3.5, saved with save_pretrained and loaded by onebit's HF loader, give the same logits
position by position, in float64.

transformers computes some parts in float32 even in a float64 model (RMSNorm, the GDN kernel
and its gated norm cast to float32), so agreement is to ~1e-6, not to float64 precision.
"""

from __future__ import annotations

import numpy as np
import pytest
from peer_modules import lazy

from onebit.models import load_model

transformers = lazy("transformers")
torch = lazy("torch")

TOKENS = [3, 17, 99, 5, 64, 64, 120, 1, 42, 77, 8, 33, 90, 11]
TOLERANCE = 1e-4


def perturb(model, seed: int) -> None:
    """Norm weights start at 0 (zero-centred) or 1, and dt_bias at 1: move them, or `1 + w`
    and the dt_bias term go untested. Projections are redrawn at unit gain (std 1/sqrt(in)
    instead of 0.02), so every layer moves the logits and a wrong term shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator, dtype=param.dtype)
            if name.endswith("norm.weight") or name.endswith("dt_bias"):
                param.add_(0.3 * noise)
            elif name.endswith("embed_tokens.weight"):
                param.copy_(0.5 * noise)
            elif name.endswith("conv1d.weight"):
                param.copy_(noise / param.shape[-1] ** 0.5)
            elif param.ndim == 2:
                param.copy_(noise / param.shape[1] ** 0.5)


def compare(hf_model, path, kernel="numpy") -> float:
    """Max abs difference of logits over all positions: HF full-sequence forward vs onebit
    stepping the tokens one by one (float64)."""
    hf_model.save_pretrained(path)
    with torch.no_grad():
        expected = hf_model(torch.tensor([TOKENS])).logits[0].double().numpy()
    model = load_model(path, dtype="float64", kernel=kernel)
    got = np.stack([model.step(t, pos) for pos, t in enumerate(TOKENS)])
    assert got.shape == expected.shape
    # the same text: argmax agrees at every position
    assert np.array_equal(got.argmax(axis=1), expected.argmax(axis=1))
    assert np.abs(expected).max() > 1.0  # logits of O(1): the comparison has signal
    return float(np.abs(got - expected).max())


def test_qwen3_matches_transformers(tmp_path):
    """A two-layer random Qwen3 (GQA, q/k norms, tied lm_head) matches transformers'
    Qwen3ForCausalLM logits at every position to within 1e-4 (float64)."""
    config = transformers.Qwen3Config(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=True,
        rope_theta=10000.0,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    hf_model = transformers.Qwen3ForCausalLM(config).double().eval()
    perturb(hf_model, 1)
    diff = compare(hf_model, tmp_path / "qwen3")
    print(f"qwen3 max abs logit diff vs transformers: {diff:.3g}")  # seen: ~1e-6
    assert diff < TOLERANCE


def test_qwen3_5_matches_transformers(tmp_path):
    """A four-layer random Qwen3.5 hybrid (GDN, GDN, full, GDN: conv, delta rule, gated norm;
    gated attention with partial RoPE; zero-centred norms) matches transformers'
    Qwen3_5ForCausalLM logits at every position to within 1e-4."""
    if not hasattr(transformers, "Qwen3_5ForCausalLM"):
        pytest.skip("transformers has no Qwen3.5 (needs >= 5.2)")
    config = transformers.Qwen3_5TextConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"],
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    hf_model = transformers.Qwen3_5ForCausalLM(config).double().eval()
    perturb(hf_model, 2)
    diff = compare(hf_model, tmp_path / "qwen3_5")
    print(f"qwen3_5 max abs logit diff vs transformers: {diff:.3g}")  # seen: ~1e-6
    assert diff < TOLERANCE
