"""The Gemma 2 model on Gemma 4's forward, through Gemma 3's hooks (docs/real-models.md).

Gemma 2's layer is Gemma 3's without the q/k norms and with attention logit soft-capping:

    x = embed[tokens] * sqrt(H)
    for each layer l:
        x += norm(attn(norm(x)))     scores = cap_a * tanh((q * s) . k / cap_a), softmax
        x += norm(mlp(norm(x)))      mlp = down(gelu_tanh(gate(h)) * up(h))
    logits = cap_f * tanh(lm_head @ norm(x) / cap_f)

Every norm multiplies by `1 + w` (Gemma 3's factor, summed in float64); the query scale `s` is
`query_pre_attn_scalar ** -0.5`; layers alternate sliding (even: 0, 2, ...) and global (odd),
as transformers' `Gemma2Config.layer_types` and llama.cpp's `load_swa_pattern(ml, 2)` both fix
it; both layer types rotate with one RoPE base (`rope_theta`). The attention soft-capping is
Gemma 4's attention hook (`attention_softcap`), applied to each row's float64 scores on their
own, so a verify row keeps stepping's bits.

`Gemma2Config` reads transformers' `Gemma2Config` (model_type "gemma2"): a missing
`attn_logit_softcapping` / `final_logit_softcapping` is transformers' default (50 / 30), an
explicit null turns it off. What is not implemented (another activation or RoPE type, RoPE
scaling, attention biases, bidirectional attention, an unknown field with a value) raises
`UnsupportedModelError` naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from onebit.backends import Backend
from onebit.models.errors import ModelConfigError, UnsupportedModelError
from onebit.models.gemma3 import Gemma3Model, random_gemma3_weights
from onebit.models.gemma3_config import Gemma3Config, attention_shape, required_int
from onebit.models.gemma4_config import (
    _INERT,
    ACTIVATION,
    GLOBAL,
    SLIDING,
    _has_value,
    _positive_int,
)
from onebit.models.registry import Family
from onebit.models.weights import WeightStore

MODEL_TYPES = ("gemma2",)
ATTN_CAP = 50.0  # transformers' Gemma2Config default, llama.cpp's f_attn_logit_softcapping
FINAL_CAP = 30.0  # transformers' and llama.cpp's default final soft-capping
THETA = 10_000.0

_READ = {
    "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_activation",
    "hidden_act", "rms_norm_eps", "tie_word_embeddings", "rope_parameters", "rope_theta",
    "rope_scaling", "sliding_window", "layer_types", "final_logit_softcapping",
    "attn_logit_softcapping", "query_pre_attn_scalar", "attention_bias",
    "use_bidirectional_attention", "cache_implementation",
}


def _cap(d: dict[str, Any], name: str, default: float, source: str) -> float | None:
    value = d.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise ModelConfigError(f"{source}: field '{name}' must be a positive number or null, "
                               f"got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Gemma2Config(Gemma3Config):
    """A Gemma 2 model in Gemma 4's per-layer form (see the module docstring)."""

    attn_logit_softcapping: float | None = None

    model_type = "gemma2"

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "config.json") -> Gemma2Config:
        if not isinstance(raw, dict):
            raise ModelConfigError(f"{source}: expected a JSON object, got {type(raw).__name__}")
        d = dict(raw)
        if d.get("model_type") not in MODEL_TYPES:
            raise ModelConfigError(f"{source}: field 'model_type' is {d.get('model_type')!r}; "
                                   f"a Gemma 2 config has one of {list(MODEL_TYPES)}")
        for key in sorted(d):
            if key not in _READ | _INERT and _has_value(d[key]):
                raise UnsupportedModelError(
                    f"{source}: unknown field '{key}' = {d[key]!r}; onebit cannot tell whether "
                    "it changes the math, so it refuses the model")
        for name in ("attention_bias", "use_bidirectional_attention", "rope_scaling"):
            if _has_value(d.get(name)):
                raise UnsupportedModelError(f"{source}: field '{name}' is {d[name]!r}; onebit's "
                                            "Gemma 2 forward does not implement it")
        for name in ("hidden_activation", "hidden_act"):
            if d.get(name, ACTIVATION) not in (ACTIVATION, None):
                raise UnsupportedModelError(f"{source}: field '{name}' is {d[name]!r}; only "
                                            f"{ACTIVATION!r} is implemented")

        layers, hidden, heads, head_dim, kv, scalar = attention_shape(d, source)
        types = d.get("layer_types")
        if types is None:  # transformers' default: even layers sliding, odd layers global
            types = [SLIDING if (i + 1) % 2 else GLOBAL for i in range(layers)]
        if not isinstance(types, list | tuple) or len(types) != layers:
            raise ModelConfigError(f"{source}: field 'layer_types' must list {layers} layer "
                                   f"types (num_hidden_layers), got {types!r}")
        for i, kind in enumerate(types):
            if kind not in (SLIDING, GLOBAL):
                raise UnsupportedModelError(f"{source}: unknown layer type {kind!r} at "
                                            f"layer_types[{i}]; supported: {[SLIDING, GLOBAL]}")
        rope = {"rope_type": "default", "rope_theta": _theta(d, source)}
        config = cls(
            hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            vocab_size=required_int(d, "vocab_size", source), layer_types=tuple(types),
            head_dims=(head_dim,) * layers, kv_heads=(kv,) * layers,
            intermediate_sizes=(required_int(d, "intermediate_size", source),) * layers,
            kv_sources=tuple(range(layers)),
            sliding_window=_positive_int(d.get("sliding_window", 4096), "sliding_window", source),
            rope={SLIDING: dict(rope), GLOBAL: dict(rope)},
            rms_norm_eps=d.get("rms_norm_eps", 1e-6),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", True)),
            final_logit_softcapping=_cap(d, "final_logit_softcapping", FINAL_CAP, source),
            query_pre_attn_scalar=scalar,
            attn_logit_softcapping=_cap(d, "attn_logit_softcapping", ATTN_CAP, source),
            extra={k: v for k, v in d.items() if k not in _READ},
        )
        config.validate(source)
        return config

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Gemma 3's tensors less the q/k norms."""
        return {name: shape for name, shape in super().expected_shapes().items()
                if not name.endswith(("q_norm.weight", "k_norm.weight"))}

    def to_dict(self) -> dict[str, Any]:
        """A config.json dict (model_type "gemma2") that transformers and this reader both read
        back to the same model."""
        d = super().to_dict()
        d.update(model_type="gemma2",
                 rope_parameters=dict(self.rope[GLOBAL]),
                 attn_logit_softcapping=self.attn_logit_softcapping)
        return d


def _theta(d: dict[str, Any], source: str) -> float:
    """The one RoPE base: `rope_theta`, or transformers 5's flat `rope_parameters`."""
    params = d.get("rope_parameters")
    theta = d.get("rope_theta", THETA)
    if params is not None:
        if not isinstance(params, dict):
            raise ModelConfigError(f"{source}: field 'rope_parameters' must be an object")
        kind = params.get("rope_type", params.get("type", "default"))
        if kind != "default":
            raise UnsupportedModelError(f"{source}: field 'rope_parameters.rope_type' is "
                                        f"{kind!r}; only 'default' is implemented for Gemma 2")
        unknown = sorted(k for k in params if k not in ("rope_type", "type", "rope_theta")
                         and not (k == "partial_rotary_factor" and params[k] in (1, 1.0)))
        if unknown:
            raise UnsupportedModelError(f"{source}: field 'rope_parameters.{unknown[0]}' is not "
                                        "implemented")
        theta = params.get("rope_theta", theta)
    if isinstance(theta, bool) or not isinstance(theta, int | float) or not theta > 0:
        raise ModelConfigError(f"{source}: field 'rope_theta' must be a positive number, got "
                               f"{theta!r}")
    return float(theta)


class Gemma2Model(Gemma3Model):
    """A Gemma 2 forward in numpy, implementing `onebit.BaseModel`: Gemma 3's without q/k
    norms, with attention soft-capping."""

    qk_norm = False

    def attention_softcap(self) -> float | None:
        return self.config.attn_logit_softcapping


def build_gemma2(config: Gemma2Config, weights: WeightStore, *, max_batch_rows: int,
                 max_prefill_rows: int | None = None, kernel: str = "auto",
                 backend: str | Backend = "host") -> Gemma2Model:
    """A Gemma 2 forward. It prefills in batches of `max_batch_rows` and refuses a wider
    `max_prefill_rows`: its sliding-window cache holds that many rows past the window."""
    if max_prefill_rows is not None and max_prefill_rows != max_batch_rows:
        raise ValueError(f"max_prefill_rows = {max_prefill_rows!r}: a Gemma 2 model "
                         f"prefills in batches of max_batch_rows ({max_batch_rows})")
    return Gemma2Model(config, weights, max_batch_rows=max_batch_rows, kernel=kernel,
                       backend=backend, ple_per_token=False)


def tiny_gemma2_config(**overrides: Any) -> Gemma2Config:
    """A tiny Gemma 2 that tiles into Q4NX blocks: four layers (sliding, global, sliding,
    global), a window of 8, grouped-query heads, a query scale that is not head_dim's, and both
    soft-cappings set low enough to bite on random weights (attention 2, final 30). Overrides
    use config.json's names."""
    raw: dict[str, Any] = dict(
        model_type="gemma2", hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, intermediate_size=512, vocab_size=256,
        sliding_window=8, query_pre_attn_scalar=48, final_logit_softcapping=30.0,
        attn_logit_softcapping=2.0, rope_theta=10_000.0,
    )
    raw.update(overrides)
    return Gemma2Config.from_dict(raw, source="tiny_gemma2_config")


GEMMA2 = Family(
    name="gemma2",
    model_types=MODEL_TYPES,
    read_config=lambda raw, source: Gemma2Config.from_dict(raw, source=source),
    shapes=Gemma2Config.expected_shapes,
    build=build_gemma2,
    tiny_config=tiny_gemma2_config,
    random_weights=random_gemma3_weights,
    doc="the Gemma 2 model: alternating sliding and global layers, attention and final "
        "soft-capping",
)
