"""The Gemma 3 text model's config (transformers' `Gemma3TextConfig`, model_type
"gemma3_text"), resolved into the per-layer form Gemma 4's forward runs (docs/gemma4.md,
"Gemma 3").

Gemma 3 is Gemma 4's layer without its additions: every layer owns its K/V and has one head
size, no per-layer embeddings, no layer scalars, no norm on the values. What differs:
- the norm factor is `1 + w` (the weights are stored centred on 0);
- the query is scaled by `query_pre_attn_scalar ** -0.5` before its dot products;
- both layer types use ordinary RoPE, each with its own base: sliding layers
  `rope_local_base_freq` (10000), global layers `rope_theta` (1e6) divided by a linear
  `rope_scaling` factor when there is one;
- the layer pattern, when `layer_types` is not given: layer i is global when
  (i + 1) % sliding_window_pattern == 0 (6), as transformers and llama.cpp both fix it.

What changes the math and is not implemented (a vision tower, attention logit soft-capping,
attention biases, bidirectional attention, another activation or RoPE type, an unknown field
with a value) raises `UnsupportedModelError` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onebit.models.errors import ModelConfigError, UnsupportedModelError
from onebit.models.gemma4_config import (
    _INERT,
    ACTIVATION,
    GLOBAL,
    SLIDING,
    Gemma4Config,
    _has_value,
    _positive_int,
)

MODEL_TYPES = ("gemma3", "gemma3_text")
PATTERN = 6  # transformers' and llama.cpp's sliding_window_pattern: every 6th layer global
LOCAL_THETA = 10_000.0  # llama.cpp's rope_freq_base_train_swa, transformers' local default
GLOBAL_THETA = 1_000_000.0

_READ = {
    "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_activation",
    "rms_norm_eps", "tie_word_embeddings", "rope_parameters", "rope_theta",
    "rope_local_base_freq", "rope_scaling", "sliding_window", "sliding_window_pattern",
    "layer_types", "final_logit_softcapping", "attn_logit_softcapping",
    "query_pre_attn_scalar", "attention_bias", "use_bidirectional_attention",
    "_sliding_window_pattern", "cache_implementation",  # transformers' own copies and hints
}
_WRAPPER = {"boi_token_index", "eoi_token_index", "image_token_index", "mm_tokens_per_image",
            "initializer_range"}


@dataclass(frozen=True)
class Gemma3Config(Gemma4Config):
    """A Gemma 3 text model in Gemma 4's per-layer form (see the module docstring)."""

    query_pre_attn_scalar: int | float = 256

    model_type = "gemma3"

    @property
    def attention_scale(self) -> float:  # type: ignore[override]
        return float(self.query_pre_attn_scalar) ** -0.5

    def inv_freq(self, layer: int) -> list[float]:
        """theta^(-2j/D) for every rotate-half pair, divided by the linear factor if any."""
        rope = self.rope[self.layer_types[layer]]
        D, theta = self.head_dims[layer], float(rope["rope_theta"])
        factor = float(rope.get("factor", 1.0)) if rope["rope_type"] == "linear" else 1.0
        return [1.0 / theta ** (2 * j / D) / factor for j in range(D // 2)]

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "config.json") -> Gemma3Config:
        d = _text_part(raw, source)
        for key in sorted(d):
            if key not in _READ | _INERT and _has_value(d[key]):
                raise UnsupportedModelError(
                    f"{source}: unknown field '{key}' = {d[key]!r}; onebit cannot tell whether "
                    "it changes the math, so it refuses the model")
        _refuse_unimplemented(d, source)

        layers, hidden, heads, head_dim, kv, scalar = attention_shape(d, source)
        types = _layer_types(d, layers, source)
        config = cls(
            hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            vocab_size=required_int(d, "vocab_size", source), layer_types=types,
            head_dims=(head_dim,) * layers, kv_heads=(kv,) * layers,
            intermediate_sizes=(required_int(d, "intermediate_size", source),) * layers,
            kv_sources=tuple(range(layers)),
            sliding_window=_positive_int(d.get("sliding_window", 4096), "sliding_window", source),
            rope=_rope(d, source), rms_norm_eps=d.get("rms_norm_eps", 1e-6),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", True)),
            final_logit_softcapping=d.get("final_logit_softcapping"),
            query_pre_attn_scalar=scalar,
            extra={k: v for k, v in d.items() if k not in _READ},
        )
        config.validate(source)
        return config

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Gemma 4's tensors less the layer scalars (every layer owns its K/V, no PLE)."""
        return {name: shape for name, shape in super().expected_shapes().items()
                if not name.endswith("layer_scalar")}

    def to_dict(self) -> dict[str, Any]:
        """A config.json dict (model_type "gemma3_text") that transformers and this reader
        both read back to the same model."""
        return {
            "model_type": "gemma3_text", "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size, "intermediate_size": self.intermediate_sizes[0],
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.kv_heads[0], "head_dim": self.head_dims[0],
            "hidden_activation": ACTIVATION, "rms_norm_eps": self.rms_norm_eps,
            "tie_word_embeddings": self.tie_word_embeddings,
            "rope_parameters": {k: dict(v) for k, v in self.rope.items()},
            "sliding_window": self.sliding_window, "layer_types": list(self.layer_types),
            "final_logit_softcapping": self.final_logit_softcapping,
            "query_pre_attn_scalar": self.query_pre_attn_scalar,
            "attention_bias": False,
        }


def _text_part(raw: Any, source: str) -> dict[str, Any]:
    """The text model's fields: the dict itself, or the multimodal wrapper's `text_config`
    (refused when it declares a vision tower)."""
    if not isinstance(raw, dict):
        raise ModelConfigError(f"{source}: expected a JSON object, got {type(raw).__name__}")
    if raw.get("model_type") not in MODEL_TYPES:
        raise ModelConfigError(f"{source}: field 'model_type' is {raw.get('model_type')!r}; "
                               f"a Gemma 3 config has one of {list(MODEL_TYPES)}")
    if raw["model_type"] == "gemma3_text":
        return dict(raw)
    if raw.get("vision_config") is not None:
        raise UnsupportedModelError(
            f"{source}: field 'vision_config' declares a vision tower; onebit's Gemma 3 forward "
            "runs the text model only (use a text model's config.json, model_type "
            "'gemma3_text', with the same weights)")
    text = raw.get("text_config")
    if not isinstance(text, dict):
        raise ModelConfigError(f"{source}: a 'gemma3' config needs a 'text_config' object")
    unknown = sorted(k for k, v in raw.items() if k not in _READ | _INERT | _WRAPPER
                     | {"text_config", "vision_config"} and _has_value(v))
    if unknown:
        raise UnsupportedModelError(f"{source}: unknown field '{unknown[0]}' = "
                                    f"{raw[unknown[0]]!r}; onebit refuses the model")
    return dict(text, model_type="gemma3_text")


def _refuse_unimplemented(d: dict[str, Any], source: str) -> None:
    for name in ("attn_logit_softcapping", "attention_bias", "use_bidirectional_attention"):
        if _has_value(d.get(name)):
            raise UnsupportedModelError(f"{source}: field '{name}' is {d[name]!r}; onebit's "
                                        f"Gemma 3 forward does not implement it")
    activation = d.get("hidden_activation", ACTIVATION)
    if activation != ACTIVATION:
        raise UnsupportedModelError(f"{source}: field 'hidden_activation' is {activation!r}; "
                                    f"only {ACTIVATION!r} is implemented")
    cap = d.get("final_logit_softcapping")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int | float)
                            or not cap > 0):
        raise ModelConfigError(f"{source}: field 'final_logit_softcapping' must be a positive "
                               f"number or null, got {cap!r}")


def _layer_types(d: dict[str, Any], layers: int, source: str) -> tuple[str, ...]:
    types = d.get("layer_types")
    if types is None:
        pattern = _positive_int(d.get("sliding_window_pattern", PATTERN),
                                "sliding_window_pattern", source)
        types = [SLIDING if (i + 1) % pattern else GLOBAL for i in range(layers)]
    if not isinstance(types, list | tuple) or len(types) != layers:
        raise ModelConfigError(f"{source}: field 'layer_types' must list {layers} layer types "
                               f"(num_hidden_layers), got {types!r}")
    for i, kind in enumerate(types):
        if kind not in (SLIDING, GLOBAL):
            raise UnsupportedModelError(f"{source}: unknown layer type {kind!r} at "
                                        f"layer_types[{i}]; supported: {[SLIDING, GLOBAL]}")
    return tuple(types)


def _rope(d: dict[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """Per layer type: {"rope_type": "default" | "linear", "rope_theta", ["factor"]}, from
    transformers 5's `rope_parameters` or the older rope_theta / rope_local_base_freq /
    rope_scaling fields."""
    params = d.get("rope_parameters")
    if params is None:
        scaling = d.get("rope_scaling")
        params = {SLIDING: {"rope_type": "default",
                            "rope_theta": d.get("rope_local_base_freq", LOCAL_THETA)},
                  GLOBAL: {"rope_type": "default", "rope_theta": d.get("rope_theta",
                                                                       GLOBAL_THETA)}}
        if scaling is not None:
            if not isinstance(scaling, dict):
                raise ModelConfigError(f"{source}: field 'rope_scaling' must be an object")
            params[GLOBAL].update(scaling)
    if not isinstance(params, dict):
        raise ModelConfigError(f"{source}: field 'rope_parameters' must be an object")
    rope = {}
    for kind in (SLIDING, GLOBAL):
        p, where = params.get(kind), f"rope_parameters.{kind}"
        if not isinstance(p, dict):
            raise ModelConfigError(f"{source}: field '{where}' is missing or not an object")
        kind_of = p.get("rope_type", p.get("type", "default"))
        if kind_of not in ("default", "linear"):
            raise UnsupportedModelError(f"{source}: field '{where}.rope_type' is {kind_of!r}; "
                                        "only 'default' and 'linear' are implemented")
        unknown = sorted(set(p) - {"rope_type", "type", "rope_theta", "factor"})
        if unknown:
            raise UnsupportedModelError(f"{source}: field '{where}.{unknown[0]}' is not "
                                        "implemented")
        out = {"rope_type": kind_of, "rope_theta": p.get("rope_theta")}
        if kind_of == "linear":
            out["factor"] = p.get("factor")
        for name, value in out.items():
            if name != "rope_type" and (isinstance(value, bool)
                                        or not isinstance(value, int | float) or not value > 0):
                raise ModelConfigError(f"{source}: field '{where}.{name}' must be a positive "
                                       f"number, got {value!r}")
        rope[kind] = out
    return rope


def required_int(d: dict[str, Any], name: str, source: str) -> int:
    """The config's positive integer `name`; `ModelConfigError` if it is missing or bad."""
    if d.get(name) is None:
        raise ModelConfigError(f"{source}: missing field '{name}'")
    return _positive_int(d[name], name, source)


def attention_shape(d: dict[str, Any], source: str) -> tuple[int, int, int, int, int, float]:
    """(layers, hidden, heads, head_dim, kv heads, query_pre_attn_scalar) of a Gemma 2 or 3
    config.json, with transformers' defaults (head_dim and the scalar 256, kv heads = heads);
    `ModelConfigError` naming a missing or bad field."""

    layers, hidden, heads = (required_int(d, "num_hidden_layers", source),
                             required_int(d, "hidden_size", source),
                             required_int(d, "num_attention_heads", source))
    head_dim = _positive_int(d.get("head_dim", 256), "head_dim", source)
    kv = _positive_int(d.get("num_key_value_heads", heads), "num_key_value_heads", source)
    scalar = d.get("query_pre_attn_scalar", 256)
    if isinstance(scalar, bool) or not isinstance(scalar, int | float) or not scalar > 0:
        raise ModelConfigError(f"{source}: field 'query_pre_attn_scalar' must be a positive "
                               f"number, got {scalar!r}")
    return layers, hidden, heads, head_dim, kv, scalar
