"""Tiny random Qwen3 / Qwen3.5 models: the configs and weights `fabricate_model(path, "qwen3")`
and `"qwen3_5"` write (fabricate.py), and the weight draw the Llama family reuses. Apart from
fabricate.py, which reaches every family through the registry, so that the families import
this module and never fabricate.py back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onebit.models.config import FULL, LINEAR, ModelConfig
from onebit.models.registry import FAMILY_NAMES as KINDS  # the registry's families
from onebit.models.weights import expected_shapes


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
