"""The Gemma 3 text model on Gemma 4's forward (docs/gemma4.md, "Gemma 3").

Gemma 3's layer is Gemma 4's without the per-layer embeddings, the layer scalars and the norm
on the values, so `Gemma3Model` is `Gemma4Model` with those hooks changed: the norm factor is
`1 + w` (summed in float64 from the stored weight, then rounded once to the compute dtype, so a
GGUF file's stored `1 + w` comes back bit for bit), no scalars, raw values. The query scale
(`query_pre_attn_scalar ** -0.5`), the two RoPE bases and the layer pattern come from
`Gemma3Config`; the sliding ring cache, the exact rollback, the RoPE tables, the attention and
the final soft-capping are Gemma 4's code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onebit.backends import Backend
from onebit.models.gemma3_config import MODEL_TYPES, Gemma3Config
from onebit.models.gemma4 import Gemma4Model
from onebit.models.gemma4_config import GLOBAL, SLIDING
from onebit.models.registry import Family
from onebit.models.weights import WeightStore


class Gemma3Model(Gemma4Model):
    """A Gemma 3 text forward in numpy, implementing `onebit.BaseModel`."""

    value_norm = False

    def norm_factor(self, name: str) -> np.ndarray:
        """`1 + w`, summed in float64 and rounded once."""
        return (1.0 + self.weights.float64(name)).astype(self.dtype)

    def layer_scalars(self) -> None:
        return None


def build_gemma3(config: Gemma3Config, weights: WeightStore, *, max_batch_rows: int,
                 max_prefill_rows: int | None = None, kernel: str = "auto",
                 backend: str | Backend = "host") -> Gemma3Model:
    """A Gemma 3 forward. It prefills in batches of `max_batch_rows` and refuses a wider
    `max_prefill_rows`: its sliding-window cache holds that many rows past the window."""
    if max_prefill_rows is not None and max_prefill_rows != max_batch_rows:
        raise ValueError(f"max_prefill_rows = {max_prefill_rows!r}: a Gemma 3 model "
                         f"prefills in batches of max_batch_rows ({max_batch_rows})")
    return Gemma3Model(config, weights, max_batch_rows=max_batch_rows, kernel=kernel,
                       backend=backend, ple_per_token=False)


def tiny_gemma3_config(**overrides: Any) -> Gemma3Config:
    """A tiny Gemma 3 that tiles into Q4NX blocks and exercises every part of the forward:
    four layers (sliding, sliding, global, sliding), a window of 8, grouped-query heads, a
    query scale that is not head_dim's, linear RoPE scaling on the global layer and final
    soft-capping. Overrides use config.json's names."""
    raw: dict[str, Any] = dict(
        model_type="gemma3_text", hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, intermediate_size=512, vocab_size=256,
        sliding_window=8, query_pre_attn_scalar=48, final_logit_softcapping=30.0,
        rope_parameters={SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
                         GLOBAL: {"rope_type": "linear", "rope_theta": 1_000_000.0,
                                  "factor": 2.0}},
    )
    raw.update(overrides)
    if "layer_types" not in overrides and "sliding_window_pattern" not in overrides:
        raw["layer_types"] = [GLOBAL if (i + 1) % 3 == 0 else SLIDING
                              for i in range(raw["num_hidden_layers"])]
    return Gemma3Config.from_dict(raw, source="tiny_gemma3_config")


def random_gemma3_weights(config: Gemma3Config, seed: int = 0) -> dict[str, np.ndarray]:
    """float32 weights for every tensor the config needs; norm weights centred on 0 (the
    factor is 1 + w), moved off it so that every norm matters."""
    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}
    for name, shape in config.expected_shapes().items():
        if name == "model.embed_tokens.weight":
            value = 0.05 * rng.standard_normal(shape)
        elif name.endswith("norm.weight"):
            value = 0.2 * rng.standard_normal(shape)
        else:
            value = rng.standard_normal(shape) / np.sqrt(shape[1])
        weights[name] = value.astype(np.float32)
    return weights


GEMMA3 = Family(
    name="gemma3",
    model_types=MODEL_TYPES,
    read_config=lambda raw, source: Gemma3Config.from_dict(raw, source=source),
    shapes=Gemma3Config.expected_shapes,
    build=build_gemma3,
    tiny_config=tiny_gemma3_config,
    random_weights=random_gemma3_weights,
    doc="the Gemma 3 text model: sliding and global layers with their own RoPE bases",
)
