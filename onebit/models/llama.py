"""The Llama family: HF `model_type` "llama" (SmolLM2, Llama 3.x), "mistral" and "qwen2".

All three are the decoder of qwen3.py without the q/k norms: RMSNorm (`x_hat * w`), GQA
attention with rotate-half RoPE over the whole head, a SwiGLU MLP, a tied or untied lm_head.
What differs is data, read here and handed to the shared decoder:

- projection biases: "qwen2" has q/k/v biases; "llama" has q/k/v/o biases when
  `attention_bias` is true. The decoder adds a bias wherever the family's shapes list one;
- RoPE: "default", or "llama3" (Llama 3.1+), which stretches the low frequencies by `factor`
  and blends the band between `low_freq_factor` and `high_freq_factor` (`llama3_inv_freq`);
- a sliding window ("mistral" `sliding_window`, "qwen2" with `use_sliding_window`): attention
  past the window is not implemented, so positions at or past it are refused by name
  (`LlamaModel.position_limit`), never computed wrongly.

`LlamaModel` overrides only the decoder's named hooks (`rope_inv_freq`, `position_limit`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from onebit.models.config import ModelConfig, positive_int, shown
from onebit.models.errors import ModelConfigError
from onebit.models.qwen3 import Qwen3Model
from onebit.models.registry import Family

MODEL_TYPES = ("llama", "mistral", "qwen2")
ROPE_TYPES = ("default", "llama3")
LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


@dataclass(frozen=True)
class LlamaConfig(ModelConfig):
    """A `ModelConfig` (model_type "llama", the family) plus what the Llama family adds."""

    hf_model_type: str = "llama"  # as config.json names it: "llama", "mistral" or "qwen2"
    qkv_bias: bool = False
    o_bias: bool = False
    rope_scaling: dict[str, float] = field(default_factory=dict)  # the llama3 keys, or empty
    sliding_window: int | None = None

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "config.json") -> LlamaConfig:
        """Read a llama / mistral / qwen2 config.json dict; `ModelConfigError` naming the field."""
        if not isinstance(raw, dict):
            raise ModelConfigError(f"{source}: expected a JSON object, got {type(raw).__name__}")
        hf_type = raw.get("model_type")
        if hf_type not in MODEL_TYPES:
            raise ModelConfigError(f"{source}: field 'model_type' is {shown(hf_type)}; the Llama "
                                   f"family reads {list(MODEL_TYPES)}")
        for name in ("rope_parameters", "rope_scaling"):
            if raw.get(name) is not None and not isinstance(raw[name], dict):
                raise ModelConfigError(
                    f"{source}: field '{name}' must be an object, got {shown(raw[name])}")
        rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type", "default")) or "default"
        if rope_type not in ROPE_TYPES:
            raise ModelConfigError(f"{source}: field 'rope_parameters.rope_type' is "
                                   f"{shown(rope_type)}; supported: {list(ROPE_TYPES)}")
        scaling: dict[str, float] = {}
        if rope_type == "llama3":
            for key in LLAMA3_KEYS:
                value = rope.get(key)
                if (isinstance(value, bool) or not isinstance(value, int | float)
                        or not (math.isfinite(value) and value > 0)):
                    raise ModelConfigError(f"{source}: field 'rope_parameters.{key}' must be a "
                                           f"positive number for llama3 RoPE, got {shown(value)}")
                scaling[key] = float(value)
            if scaling["high_freq_factor"] <= scaling["low_freq_factor"]:
                raise ModelConfigError(
                    f"{source}: field 'rope_parameters.high_freq_factor' "
                    f"({scaling['high_freq_factor']}) must exceed low_freq_factor "
                    f"({scaling['low_freq_factor']})")
        for name in ("mlp_bias",):
            if raw.get(name):
                raise ModelConfigError(f"{source}: field '{name}' is true; MLP biases are not "
                                       "supported")
        if raw.get("pretraining_tp", 1) not in (1, None):
            raise ModelConfigError(f"{source}: field 'pretraining_tp' is "
                                   f"{shown(raw['pretraining_tp'])}; only 1 is supported")
        attention_bias = raw.get("attention_bias", False)
        if not isinstance(attention_bias, bool):
            raise ModelConfigError(f"{source}: field 'attention_bias' must be true or false, got "
                                   f"{shown(attention_bias)}")
        window = raw.get("sliding_window")
        if hf_type == "qwen2":
            sliding = raw.get("use_sliding_window", False) or "sliding_attention" in (
                raw.get("layer_types") or ())
            window = window if sliding else None
        if window is not None:
            window = positive_int(window, "sliding_window", source)
        heads = positive_int(raw.get("num_attention_heads"), "num_attention_heads", source)
        hidden = positive_int(raw.get("hidden_size"), "hidden_size", source)
        # The shared reader does the common fields (as a qwen3 config: no q/k norms there
        # either), then the Llama fields are added.
        common = {k: v for k, v in raw.items()
                  if k not in ("rope_parameters", "rope_scaling", "layer_types", "text_config")}
        common["model_type"] = "qwen3"
        common["rope_theta"] = raw.get("rope_theta", rope.get("rope_theta", 10000.0))
        if common.get("head_dim") is None:
            common["head_dim"] = hidden // heads
        base = ModelConfig.from_dict(common, source=source)
        config = cls(**{name: getattr(base, name) for name in ModelConfig.__dataclass_fields__},
                     hf_model_type=hf_type, qkv_bias=hf_type == "qwen2" or attention_bias,
                     o_bias=hf_type != "qwen2" and attention_bias, rope_scaling=scaling,
                     sliding_window=window)
        return replace(config, model_type="llama")

    def validate(self, source: str = "config") -> None:
        """The shared checks (a Llama layer is a full-attention layer)."""
        ModelConfig.validate(self, source)

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor the forward reads: the dense decoder's, without q/k norms, plus the
        projection biases the config declares."""
        from onebit.models.weights import expected_shapes

        shapes = expected_shapes(self)
        D, Hq, Hkv = self.head_dim, self.num_attention_heads, self.num_key_value_heads
        for i in range(self.num_hidden_layers):
            p = f"model.layers.{i}.self_attn."
            del shapes[p + "q_norm.weight"], shapes[p + "k_norm.weight"]
            if self.qkv_bias:
                shapes[p + "q_proj.bias"] = (Hq * D,)
                shapes[p + "k_proj.bias"] = (Hkv * D,)
                shapes[p + "v_proj.bias"] = (Hkv * D,)
            if self.o_bias:
                shapes[p + "o_proj.bias"] = (self.hidden_size,)
        return shapes

    def to_dict(self) -> dict[str, Any]:
        """A config.json dict transformers reads back as the same model."""
        d = ModelConfig.to_dict(self)
        for name in ("layer_types", "hf_model_type", "qkv_bias", "o_bias", "rope_scaling",
                     "sliding_window"):
            d.pop(name, None)
        d["model_type"] = self.hf_model_type
        d["rope_parameters"] = {"rope_type": "llama3" if self.rope_scaling else "default",
                                "rope_theta": self.rope_theta, **self.rope_scaling}
        if self.hf_model_type == "llama":
            d["attention_bias"] = self.o_bias
        d["sliding_window"] = self.sliding_window
        return d


def llama3_inv_freq(inv_freq: np.ndarray, scaling: dict[str, float]) -> np.ndarray:
    """Llama 3's RoPE frequencies: wavelengths longer than `original / low_freq_factor` are
    stretched by `factor`, shorter than `original / high_freq_factor` kept, and the band between
    blended linearly in `original / wavelength` (float64)."""
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / inv_freq
    out = np.where(wavelength > original / low, inv_freq / factor, inv_freq)
    blend = (original / wavelength - low) / (high - low)
    mixed = (1 - blend) * out / factor + blend * out
    middle = (wavelength >= original / high) & (wavelength <= original / low)
    return np.where(middle, mixed, out)


class LlamaModel(Qwen3Model):
    """A Llama / Mistral / Qwen2 forward: the shared decoder with the Llama hooks."""

    config: LlamaConfig

    def rope_inv_freq(self) -> np.ndarray:
        inv_freq = super().rope_inv_freq()
        if self.config.rope_scaling:
            return llama3_inv_freq(inv_freq, self.config.rope_scaling)
        return inv_freq

    def position_limit(self) -> int | None:
        return self.config.sliding_window


def tiny_llama_config(**overrides: Any) -> LlamaConfig:
    """A tiny Llama config (hidden 256, two layers, GQA 4/2, tied, vocab 256, Q4NX-tileable);
    overrides use config.json's names (`model_type` "qwen2" / "mistral", `attention_bias`,
    `rope_parameters`, `tie_word_embeddings`, ...)."""
    raw: dict[str, Any] = dict(
        model_type="llama", hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, intermediate_size=512, vocab_size=256,
        tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-6,
    )
    raw.update(overrides)
    return LlamaConfig.from_dict(raw, source="tiny_llama_config")


def random_llama_weights(config: LlamaConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """float32 weights for every tensor the config needs (as `random_weights` draws a
    Qwen3's), biases included."""
    from onebit.models.qwen3_fabricate import draw_weight

    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in config.expected_shapes().items():
        if name.endswith(".bias"):
            value = 0.1 * rng.standard_normal(shape)
        else:
            value = draw_weight(name, shape, config, rng)
        weights[name] = value.astype(np.float32)
    return weights


def build_llama(config: LlamaConfig, weights, **options: Any) -> LlamaModel:
    return LlamaModel(config, weights, **options)


LLAMA = Family(
    name="llama",
    model_types=MODEL_TYPES,
    read_config=lambda raw, source: LlamaConfig.from_dict(raw, source=source),
    shapes=LlamaConfig.expected_shapes,
    build=build_llama,
    tiny_config=tiny_llama_config,
    random_weights=random_llama_weights,
    doc="Llama 2/3.x, SmolLM2, Mistral, Qwen2: dense GQA decoder, optional q/k/v biases, "
        "llama3 RoPE scaling",
)

__all__ = ["LLAMA", "LlamaConfig", "LlamaModel", "llama3_inv_freq", "tiny_llama_config"]
