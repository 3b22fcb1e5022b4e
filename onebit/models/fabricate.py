"""Tiny random models built in code, for tests: seeded, deterministic, written to a directory.

`fabricate_model(path, "qwen3")` writes a two-layer dense Qwen3 (tied embeddings);
`fabricate_model(path, "qwen3_5")` a three-layer Qwen3.5 hybrid (two gated-delta-net layers,
then one full-attention layer). Sizes are the smallest that tile into Q4NX blocks (hidden 256,
intermediate 512, vocab 256), so `quantized=True` stores every projection as real Q4NX blocks;
`quantized=False` writes a HuggingFace-layout float checkpoint instead. The weights are scaled
so that activations stay O(1) through the layers and greedy text does not collapse into one
repeated token, and the norm weights, `A_log` and `dt_bias` are perturbed away from their
initial values so that every term of the forward matters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from onebit.models.config import FULL, LINEAR, ModelConfig
from onebit.models.registry import FAMILY_NAMES as KINDS  # the registry's families
from onebit.models.weights import expected_shapes, write_hf, write_q4nx


def tiny_config(kind: str = "qwen3", **overrides: Any):
    """The config of a tiny model of `kind` (a registered family's name); any field can be
    overridden."""
    from onebit.models.registry import family_named

    return family_named(kind).tiny_config(**overrides)


def tiny_qwen3_config(kind: str = "qwen3", **overrides: Any) -> ModelConfig:
    """A tiny Qwen3 ("qwen3") or Qwen3.5 ("qwen3_5") config."""
    if kind == "qwen3":
        fields: dict[str, Any] = dict(
            model_type="qwen3",
            hidden_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=64,
            intermediate_size=512,
            vocab_size=256,
            tie_word_embeddings=True,
            layer_types=(FULL, FULL),
        )
    elif kind == "qwen3_5":
        fields = dict(
            model_type="qwen3_5",
            hidden_size=256,
            num_hidden_layers=3,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=128,
            intermediate_size=512,
            vocab_size=256,
            tie_word_embeddings=False,
            layer_types=(LINEAR, LINEAR, FULL),
            partial_rotary_factor=0.25,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=64,
            linear_value_head_dim=64,
            linear_conv_kernel_dim=4,
        )
    else:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    pattern = tuple(fields["layer_types"])
    fields.update(overrides)
    if "layer_types" not in overrides:
        # more (or fewer) layers: repeat the family's pattern (Qwen3.5: linear, linear, full)
        fields["layer_types"] = tuple(pattern[i % len(pattern)]
                                      for i in range(fields["num_hidden_layers"]))
    config = ModelConfig(**fields)
    config.validate("tiny_config")
    return config


def random_weights(config, seed: int = 0) -> dict[str, np.ndarray]:
    """float32 weights for every tensor the config needs, by HF name and shape (drawn by the
    config's family)."""
    from onebit.models.registry import family_named

    return family_named(config.model_type).random_weights(config, seed)


def random_qwen3_weights(config: ModelConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """float32 weights for a Qwen3 / Qwen3.5 config."""
    rng = np.random.default_rng(seed)
    return {name: draw_weight(name, shape, config, rng).astype(np.float32)
            for name, shape in expected_shapes(config).items()}


def draw_weight(name: str, shape: tuple[int, ...], config: ModelConfig,
                rng: np.random.Generator) -> np.ndarray:
    """One random weight of a dense / hybrid decoder, scaled for O(1) activations."""
    if name == "model.embed_tokens.weight" and config.tie_word_embeddings:
        # tied: a large embedding would make every token predict itself (its own row
        # dominates the residual stream the lm_head reads)
        value = 0.02 * rng.standard_normal(shape)
    elif name == "model.embed_tokens.weight" or name == "lm_head.weight":
        value = rng.standard_normal(shape)
    elif name.endswith("norm.weight") and "linear_attn" not in name:
        # zero-centred (Qwen3.5) norms are stored as offsets from 1
        base = 0.0 if config.zero_centred_norms else 1.0
        value = base + 0.2 * rng.standard_normal(shape)
    elif name.endswith("linear_attn.norm.weight"):
        value = 1.0 + 0.2 * rng.standard_normal(shape)
    elif name.endswith("A_log"):
        value = np.log(rng.uniform(0.5, 4.0, shape))
    elif name.endswith("dt_bias"):
        value = 0.5 * rng.standard_normal(shape)
    elif name.endswith("conv1d.weight"):
        value = rng.standard_normal(shape) / np.sqrt(shape[-1])
    else:  # a projection [out, in]
        value = rng.standard_normal(shape) / np.sqrt(shape[1])
    return value


def fabricate_model(
    path: str | Path,
    kind: str = "qwen3",
    *,
    quantized: bool = True,
    seed: int = 0,
    convention: str = "unsigned",
    grid: bool = False,
    **overrides: Any,
) -> Path:
    """Write a tiny random model of `kind` to `path`: a Q4NX container (`quantized`) or a
    HuggingFace-layout float checkpoint. Returns the directory."""
    config = tiny_config(kind, **overrides)
    weights = random_weights(config, seed)
    if quantized:
        return write_q4nx(path, config, weights, convention=convention, grid=grid)
    return write_hf(path, config, weights)
