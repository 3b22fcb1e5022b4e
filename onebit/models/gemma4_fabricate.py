"""Tiny random Gemma 4 text models, built in code (`fabricate_model(path, "gemma4")`).

The default is the smallest model that exercises every part of the forward and tiles into
Q4NX blocks: hidden 256, five layers (sliding, sliding, global, sliding, global) whose last two
share the K/V of layers 1 and 2, sliding layers with 4 heads of 64 and a window of 8 positions
(so short tests cross it), global layers with heads of 128 and proportional RoPE, per-layer
embeddings of 256 per layer, and final logit soft-capping. Norm weights and layer scalars are
perturbed away from 1 so that every term of the forward matters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from onebit.models.gemma4_config import GLOBAL, SLIDING, Gemma4Config
from onebit.models.weights import write_hf, write_q4nx


def tiny_gemma4_config(**overrides: Any) -> Gemma4Config:
    """A tiny Gemma 4 config; overrides use config.json's names (hidden_size, vocab_size, ...,
    global_head_dim, sliding_window, num_kv_shared_layers, hidden_size_per_layer_input)."""
    raw: dict[str, Any] = dict(
        model_type="gemma4_text", hidden_size=256, num_hidden_layers=5, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, global_head_dim=128, intermediate_size=512,
        vocab_size=256, sliding_window=8, hidden_size_per_layer_input=256,
        final_logit_softcapping=30.0, tie_word_embeddings=True,
    )
    raw.update(overrides)
    layers = raw["num_hidden_layers"]
    if "layer_types" not in overrides:  # every third layer global, and the last
        raw["layer_types"] = [GLOBAL if (i + 1) % 3 == 0 or i == layers - 1 else SLIDING
                              for i in range(layers)]
    raw.setdefault("num_kv_shared_layers", 2 if layers >= 5 else 0)
    raw.setdefault("vocab_size_per_layer_input", raw["vocab_size"])
    return Gemma4Config.from_dict(raw, source="tiny_gemma4_config")


def random_gemma4_weights(config: Gemma4Config, seed: int = 0) -> dict[str, np.ndarray]:
    """float32 weights for every tensor the config needs, by HF name and shape."""
    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}
    for name, shape in config.expected_shapes().items():
        if name == "model.embed_tokens.weight":
            # scaled by sqrt(H) in the forward; kept small since the lm_head is this table
            value = 0.05 * rng.standard_normal(shape)
        elif name == "model.embed_tokens_per_layer.weight":
            value = rng.standard_normal(shape) / np.sqrt(config.hidden_size_per_layer_input)
        elif name.endswith("norm.weight"):
            value = 1.0 + 0.2 * rng.standard_normal(shape)
        elif name.endswith("layer_scalar"):
            value = rng.uniform(0.6, 1.4, shape)
        else:  # a projection [out, in] (and an untied lm_head)
            value = rng.standard_normal(shape) / np.sqrt(shape[1])
        weights[name] = value.astype(np.float32)
    return weights


def fabricate_gemma4(path: str | Path, *, quantized: bool = True, seed: int = 0,
                     convention: str = "unsigned", grid: bool = False, **overrides: Any) -> Path:
    """Write a tiny random Gemma 4 to `path` (Q4NX container, or HF float checkpoint)."""
    config = tiny_gemma4_config(**overrides)
    weights = random_gemma4_weights(config, seed)
    if quantized:
        return write_q4nx(path, config, weights, convention=convention, grid=grid)
    return write_hf(path, config, weights)
