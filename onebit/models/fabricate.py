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

from onebit.models.qwen3_fabricate import (  # noqa: F401 (their old home)
    draw_weight,
    random_qwen3_weights,
    tiny_qwen3_config,
)
from onebit.models.registry import FAMILY_NAMES as KINDS  # noqa: F401 (the registry's families)
from onebit.models.weights import write_hf, write_q4nx


def tiny_config(kind: str = "qwen3", **overrides: Any):
    """The config of a tiny model of `kind` (a registered family's name); any field can be
    overridden."""
    from onebit.models.registry import family_named

    return family_named(kind).tiny_config(**overrides)


def random_weights(config, seed: int = 0) -> dict[str, np.ndarray]:
    """float32 weights for every tensor the config needs, by HF name and shape (drawn by the
    config's family)."""
    from onebit.models.registry import family_named

    return family_named(config.model_type).random_weights(config, seed)


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
