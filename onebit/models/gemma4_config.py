"""The Gemma 4 text model's config: what `config.json` says, resolved per layer, and refused
where the forward does not implement it.

A Gemma 4 config.json (transformers' `Gemma4TextConfig`, model_type "gemma4_text", or the
text part of the multimodal "gemma4" wrapper) describes layers that differ from each other:
- `layer_types`: "sliding_attention" layers see the last `sliding_window` positions,
  "full_attention" (global) layers see all of them; each type has its own RoPE
  (`rope_parameters[type]`);
- global layers may have a wider head (`global_head_dim`, or transformers' `per_layer_config`)
  and their own KV head count (`num_global_key_value_heads` when `attention_k_eq_v`);
- the last `num_kv_shared_layers` layers compute no keys or values: each reads the cache of the
  last earlier layer of its type;
- `use_double_wide_mlp` doubles the MLP of those KV-shared layers;
- `hidden_size_per_layer_input` > 0 turns on the per-layer embeddings (PLE).

`Gemma4Config.from_dict` resolves all of this into per-layer tuples, so the forward never
re-derives it. What changes the math and is not implemented (the vision and audio towers,
mixture-of-experts blocks, attention biases, bidirectional attention, another activation or
RoPE type, an unknown key with a value) raises `UnsupportedModelError` naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onebit.models.errors import ModelConfigError, UnsupportedModelError

SLIDING = "sliding_attention"
GLOBAL = "full_attention"
MODEL_TYPES = ("gemma4", "gemma4_text")
ACTIVATION = "gelu_pytorch_tanh"

# Keys that describe the model's math, all read below.
_READ = {
    "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_activation",
    "rms_norm_eps", "tie_word_embeddings", "rope_parameters", "sliding_window", "layer_types",
    "final_logit_softcapping", "vocab_size_per_layer_input", "hidden_size_per_layer_input",
    "attention_k_eq_v", "num_kv_shared_layers", "use_double_wide_mlp", "global_head_dim",
    "num_global_key_value_heads", "per_layer_config", "enable_moe_block", "attention_bias",
    "use_bidirectional_attention",
}
# Keys that do not change a forward pass (tokens, generation, training, bookkeeping), and the
# MoE sizes, which only matter with `enable_moe_block` (refused on its own).
_INERT = {
    "architectures", "transformers_version", "torch_dtype", "dtype", "id2label", "label2id",
    "pad_token_id", "bos_token_id", "eos_token_id", "max_position_embeddings",
    "initializer_range", "use_cache", "attention_dropout", "_name_or_path", "output_attentions",
    "output_hidden_states", "return_dict", "chunk_size_feed_forward", "is_encoder_decoder",
    "problem_type", "num_experts", "top_k_experts", "moe_intermediate_size",
    "tokenizer_class", "task_specific_params", "finetuning_task", "cross_attention_hidden_size",
    "add_cross_attention", "tf_legacy_loss", "pruned_heads", "sep_token_id",
    "decoder_start_token_id", "prefix", "use_return_dict", "query_pre_attn_scalar",
}
# Keys of the multimodal wrapper around `text_config`.
_WRAPPER = {
    "boi_token_id", "eoi_token_id", "image_token_id", "video_token_id", "boa_token_id",
    "eoa_token_index", "eoa_token_id", "audio_token_id", "vision_soft_tokens_per_image",
}


@dataclass(frozen=True)
class Gemma4Config:
    """A Gemma 4 text model, resolved per layer (index i of each tuple is layer i)."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    vocab_size: int
    layer_types: tuple[str, ...]
    head_dims: tuple[int, ...]
    kv_heads: tuple[int, ...]
    intermediate_sizes: tuple[int, ...]
    kv_sources: tuple[int, ...]  # the layer whose K/V cache layer i reads (itself if it owns one)
    sliding_window: int
    # per layer type: rope_type, rope_theta and, when set, partial_rotary_factor and factor
    rope: dict[str, dict[str, Any]]
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = True
    hidden_size_per_layer_input: int = 0
    vocab_size_per_layer_input: int = 0
    attention_k_eq_v: bool = False
    final_logit_softcapping: float | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    model_type = "gemma4"
    attention_scale = 1.0  # the query's scale before its dot products (Gemma 3: a field)

    # -- derived -------------------------------------------------------------------------------

    @property
    def ple(self) -> bool:
        """Per-layer embeddings on."""
        return self.hidden_size_per_layer_input > 0

    def owns_kv(self, layer: int) -> bool:
        return self.kv_sources[layer] == layer

    def values_are_keys(self, layer: int) -> bool:
        """`attention_k_eq_v` global layers have no v_proj: the values are the raw keys."""
        return self.attention_k_eq_v and self.layer_types[layer] == GLOBAL

    def inv_freq(self, layer: int) -> list[float]:
        """RoPE inverse frequencies of a layer, one per rotate-half pair (head_dim / 2 of
        them). "default": theta^(-2j/D) for every pair. "proportional" (transformers' global
        layers): only the first int(partial * D // 2) pairs rotate, with exponents still over
        D, the rest have frequency 0 (cos 1, sin 0: passed through); all divided by `factor`."""
        rope = self.rope[self.layer_types[layer]]
        D = self.head_dims[layer]
        theta = float(rope["rope_theta"])
        if rope["rope_type"] == "default":
            return [1.0 / theta ** (2 * j / D) for j in range(D // 2)]
        angles = int(float(rope.get("partial_rotary_factor", 1.0)) * D // 2)
        factor = float(rope.get("factor", 1.0))
        return [(1.0 / theta ** (2 * j / D) if j < angles else 0.0) / factor
                for j in range(D // 2)]

    # -- reading -------------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | Path) -> Gemma4Config:
        return cls.from_dict(read_json(path), source=str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "config.json") -> Gemma4Config:
        """Read, resolve and validate a config.json dict; errors name `source` and the field."""
        d = _text_part(raw, source)
        _refuse_unknown(d, source)
        _refuse_unimplemented(d, source)

        def need(name: str) -> Any:
            if d.get(name) is None:
                raise ModelConfigError(f"{source}: missing field '{name}'")
            return d[name]

        layers = _positive_int(need("num_hidden_layers"), "num_hidden_layers", source)
        hidden = _positive_int(need("hidden_size"), "hidden_size", source)
        heads = _positive_int(need("num_attention_heads"), "num_attention_heads", source)
        layer_types = _layer_types(d, layers, source)
        head_dims, kv_heads = _attention_shapes(d, layer_types, heads, hidden, source)
        kv_sources = _kv_sources(d, layer_types, source)
        intermediate = _positive_int(need("intermediate_size"), "intermediate_size", source)
        double = bool(d.get("use_double_wide_mlp", False))
        ple = d.get("hidden_size_per_layer_input") or 0
        config = cls(
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            vocab_size=_positive_int(need("vocab_size"), "vocab_size", source),
            layer_types=layer_types,
            head_dims=head_dims,
            kv_heads=kv_heads,
            intermediate_sizes=tuple(
                intermediate * (2 if double and kv_sources[i] != i else 1) for i in range(layers)
            ),
            kv_sources=kv_sources,
            sliding_window=_positive_int(d.get("sliding_window", 512), "sliding_window", source),
            rope=_rope(d, layer_types, source),
            rms_norm_eps=d.get("rms_norm_eps", 1e-6),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", True)),
            hidden_size_per_layer_input=ple,
            vocab_size_per_layer_input=d.get("vocab_size_per_layer_input") or 0,
            attention_k_eq_v=bool(d.get("attention_k_eq_v", False)),
            final_logit_softcapping=d.get("final_logit_softcapping"),
            extra={k: v for k, v in d.items() if k not in _READ},
        )
        config.validate(source)
        return config

    def validate(self, source: str = "config") -> None:
        """Raise `ModelConfigError` naming the first field that is wrong."""
        eps = self.rms_norm_eps
        if isinstance(eps, bool) or not isinstance(eps, int | float) or not (
            math.isfinite(eps) and eps > 0
        ):
            raise ModelConfigError(f"{source}: field 'rms_norm_eps' must be a positive number, "
                                   f"got {eps!r}")
        cap = self.final_logit_softcapping
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int | float)
                                or not (math.isfinite(cap) and cap > 0)):
            raise ModelConfigError(f"{source}: field 'final_logit_softcapping' must be a positive "
                                   f"number or null, got {cap!r}")
        for i, (D, kv) in enumerate(zip(self.head_dims, self.kv_heads, strict=True)):
            if D % 2:
                raise ModelConfigError(f"{source}: layer {i} has head_dim {D}; RoPE needs it even")
            if self.num_attention_heads % kv:
                raise ModelConfigError(
                    f"{source}: layer {i} has {kv} key/value heads, which do not divide "
                    f"num_attention_heads ({self.num_attention_heads})")
        for i, source_layer in enumerate(self.kv_sources):
            shape, source_shape = ((self.head_dims[j], self.kv_heads[j]) for j in (i, source_layer))
            if shape != source_shape:
                raise ModelConfigError(
                    f"{source}: layer {i} reads the K/V of layer {source_layer} "
                    f"(num_kv_shared_layers), but its (head_dim, key/value heads) {shape} differ "
                    f"from that layer's {source_shape}")
        if self.ple:
            _positive_int(self.hidden_size_per_layer_input, "hidden_size_per_layer_input", source)
            if (isinstance(self.vocab_size_per_layer_input, bool)
                    or not isinstance(self.vocab_size_per_layer_input, int)
                    or self.vocab_size_per_layer_input < self.vocab_size):
                raise ModelConfigError(
                    f"{source}: field 'vocab_size_per_layer_input' is "
                    f"{self.vocab_size_per_layer_input!r}; the per-layer embedding must hold "
                    f"every token of vocab_size ({self.vocab_size})")

    # -- shapes and writing --------------------------------------------------------------------

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor the forward reads, by HF name, with its HF shape ([out, in])."""
        H, Hq, P, L = (self.hidden_size, self.num_attention_heads,
                       self.hidden_size_per_layer_input, self.num_hidden_layers)
        shapes: dict[str, tuple[int, ...]] = {
            "model.embed_tokens.weight": (self.vocab_size, H),
            "model.norm.weight": (H,),
        }
        if not self.tie_word_embeddings:
            shapes["lm_head.weight"] = (self.vocab_size, H)
        if self.ple:
            shapes["model.embed_tokens_per_layer.weight"] = (self.vocab_size_per_layer_input, L * P)
            shapes["model.per_layer_model_projection.weight"] = (L * P, H)
            shapes["model.per_layer_projection_norm.weight"] = (P,)
        for i in range(L):
            p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
            D, kv, inter = self.head_dims[i], self.kv_heads[i], self.intermediate_sizes[i]
            shapes[a + "q_proj.weight"] = (Hq * D, H)
            shapes[a + "q_norm.weight"] = (D,)
            shapes[a + "o_proj.weight"] = (H, Hq * D)
            if self.owns_kv(i):
                shapes[a + "k_proj.weight"] = (kv * D, H)
                shapes[a + "k_norm.weight"] = (D,)
                if not self.values_are_keys(i):
                    shapes[a + "v_proj.weight"] = (kv * D, H)
            shapes[p + "mlp.gate_proj.weight"] = (inter, H)
            shapes[p + "mlp.up_proj.weight"] = (inter, H)
            shapes[p + "mlp.down_proj.weight"] = (H, inter)
            for norm in ("input_layernorm", "post_attention_layernorm",
                         "pre_feedforward_layernorm", "post_feedforward_layernorm"):
                shapes[p + norm + ".weight"] = (H,)
            shapes[p + "layer_scalar"] = (1,)
            if self.ple:
                shapes[p + "per_layer_input_gate.weight"] = (P, H)
                shapes[p + "per_layer_projection.weight"] = (H, P)
                shapes[p + "post_per_layer_input_norm.weight"] = (H,)
        return shapes

    def to_dict(self) -> dict[str, Any]:
        """A config.json dict (model_type "gemma4_text") that transformers and this reader both
        read back to the same model."""
        sliding = [i for i, t in enumerate(self.layer_types) if t == SLIDING]
        first = sliding[0] if sliding else 0
        shared = sum(1 for i in range(self.num_hidden_layers) if not self.owns_kv(i))
        base_inter = self.intermediate_sizes[0]
        return {
            "model_type": "gemma4_text",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": base_inter,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.kv_heads[first],
            "head_dim": self.head_dims[first],
            "per_layer_config": {
                str(i): {"head_dim": self.head_dims[i], "num_key_value_heads": self.kv_heads[i]}
                for i, t in enumerate(self.layer_types) if t == GLOBAL
            },
            "hidden_activation": ACTIVATION,
            "rms_norm_eps": self.rms_norm_eps,
            "tie_word_embeddings": self.tie_word_embeddings,
            "rope_parameters": {k: dict(v) for k, v in self.rope.items()},
            "sliding_window": self.sliding_window,
            "layer_types": list(self.layer_types),
            "final_logit_softcapping": self.final_logit_softcapping,
            "vocab_size_per_layer_input": self.vocab_size_per_layer_input,
            "hidden_size_per_layer_input": self.hidden_size_per_layer_input,
            "attention_k_eq_v": self.attention_k_eq_v,
            "num_kv_shared_layers": shared,
            "use_double_wide_mlp": any(s != base_inter for s in self.intermediate_sizes),
            "enable_moe_block": False,
            "attention_bias": False,
        }


# ---------------------------------------------------------------------------------------------
# Reading helpers


def read_json(path: str | Path) -> dict[str, Any]:
    """config.json read as every model's is (a regular UTF-8 file; docs/errors.md)."""
    from onebit.models.config import read_config_json

    return read_config_json(path)


def is_gemma4(raw: object) -> bool:
    """Whether a config.json dict describes a Gemma 4 model."""
    return isinstance(raw, dict) and raw.get("model_type") in MODEL_TYPES


def _text_part(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """The text model's fields: the dict itself, or the multimodal wrapper's `text_config`
    (refused when it also declares a vision or audio tower)."""
    if not isinstance(raw, dict):
        raise ModelConfigError(f"{source}: expected a JSON object, got {type(raw).__name__}")
    if raw.get("model_type") not in MODEL_TYPES:
        raise ModelConfigError(f"{source}: field 'model_type' is {raw.get('model_type')!r}; "
                               f"a Gemma 4 config has one of {list(MODEL_TYPES)}")
    if raw["model_type"] == "gemma4_text":
        return dict(raw)
    for tower in ("vision_config", "audio_config"):
        if raw.get(tower) is not None:
            raise UnsupportedModelError(
                f"{source}: field '{tower}' declares a {tower.split('_')[0]} tower; onebit's "
                "Gemma 4 forward runs the text model only (use the text model's config.json, "
                "model_type 'gemma4_text', with the same weights)")
    text = raw.get("text_config")
    if not isinstance(text, dict):
        raise ModelConfigError(f"{source}: a 'gemma4' config needs a 'text_config' object")
    unknown = sorted(k for k, v in raw.items() if k not in _READ | _INERT | _WRAPPER
                     | {"text_config", "vision_config", "audio_config"} and _has_value(v))
    if unknown:
        raise UnsupportedModelError(f"{source}: unknown field '{unknown[0]}' = "
                                    f"{raw[unknown[0]]!r}; onebit cannot tell whether it changes "
                                    "the math, so it refuses the model")
    d = dict(text)
    d["model_type"] = "gemma4_text"
    d.setdefault("tie_word_embeddings", raw.get("tie_word_embeddings", True))
    return d


def _has_value(value: object) -> bool:
    return value not in (None, False, 0, "", [], {})


def _refuse_unknown(d: dict[str, Any], source: str) -> None:
    for key in sorted(d):
        if key not in _READ | _INERT and _has_value(d[key]):
            raise UnsupportedModelError(
                f"{source}: unknown field '{key}' = {d[key]!r}; onebit cannot tell whether it "
                "changes the math, so it refuses the model")


def _refuse_unimplemented(d: dict[str, Any], source: str) -> None:
    if d.get("enable_moe_block"):
        raise UnsupportedModelError(f"{source}: field 'enable_moe_block' is true; onebit's Gemma 4 "
                                    "forward has no mixture-of-experts block")
    if d.get("attention_bias"):
        raise UnsupportedModelError(f"{source}: field 'attention_bias' is true; onebit's Gemma 4 "
                                    "forward has no attention biases")
    if d.get("use_bidirectional_attention") not in (None, "vision"):
        raise UnsupportedModelError(
            f"{source}: field 'use_bidirectional_attention' is "
            f"{d['use_bidirectional_attention']!r}; only causal text attention is implemented")
    activation = d.get("hidden_activation", ACTIVATION)
    if activation != ACTIVATION:
        raise UnsupportedModelError(f"{source}: field 'hidden_activation' is {activation!r}; only "
                                    f"{ACTIVATION!r} is implemented")


def _layer_types(d: dict[str, Any], layers: int, source: str) -> tuple[str, ...]:
    types = d.get("layer_types")
    if types is None:  # transformers' default: five sliding layers, then a global one
        types = [SLIDING if (i + 1) % 6 else GLOBAL for i in range(layers)]
    if not isinstance(types, list | tuple) or len(types) != layers:
        raise ModelConfigError(f"{source}: field 'layer_types' must list {layers} layer types "
                               f"(num_hidden_layers), got {types!r}")
    for i, kind in enumerate(types):
        if kind not in (SLIDING, GLOBAL):
            raise UnsupportedModelError(f"{source}: unknown layer type {kind!r} at "
                                        f"layer_types[{i}]; supported: {[SLIDING, GLOBAL]}")
    if types[-1] != GLOBAL:
        # transformers forces the last layer global (with a warning): a file saying otherwise
        # would be run differently by the two, so it is an error here
        raise ModelConfigError(f"{source}: layer_types[{layers - 1}] is {types[-1]!r}; the last "
                               "Gemma 4 layer must be 'full_attention'")
    return tuple(types)


def _attention_shapes(d: dict[str, Any], types: tuple[str, ...], heads: int, hidden: int,
                      source: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per layer (head_dim, key/value heads): the sliding values, overridden on global layers
    by `global_head_dim` / `num_global_key_value_heads` (checkpoint style) or by
    `per_layer_config` (what transformers writes)."""
    head_dim = _positive_int(d.get("head_dim") or hidden // heads, "head_dim", source)
    kv = _positive_int(d.get("num_key_value_heads", heads), "num_key_value_heads", source)
    dims, kvs = [head_dim] * len(types), [kv] * len(types)
    per_layer = d.get("per_layer_config")
    if per_layer:
        if not isinstance(per_layer, dict):
            raise ModelConfigError(f"{source}: field 'per_layer_config' must be an object")
        for key, overrides in per_layer.items():
            where = f"per_layer_config[{key!r}]"
            try:
                layer = int(key)
            except (TypeError, ValueError):
                raise ModelConfigError(f"{source}: {where}: a key must be a layer index") from None
            if not 0 <= layer < len(types) or not isinstance(overrides, dict):
                raise ModelConfigError(f"{source}: {where}: no layer {key!r}, or not an object")
            for name, value in overrides.items():
                if name == "head_dim":
                    dims[layer] = _positive_int(value, where + ".head_dim", source)
                elif name == "num_key_value_heads":
                    kvs[layer] = _positive_int(value, where + ".num_key_value_heads", source)
                else:
                    raise UnsupportedModelError(f"{source}: {where} overrides '{name}'; only "
                                                "head_dim and num_key_value_heads per layer are "
                                                "implemented")
        return tuple(dims), tuple(kvs)
    global_dim = _positive_int(d.get("global_head_dim", 512), "global_head_dim", source)
    global_kv = d.get("num_global_key_value_heads") if d.get("attention_k_eq_v") else None
    for i, kind in enumerate(types):
        if kind == GLOBAL:
            dims[i] = global_dim
            if global_kv is not None:
                kvs[i] = _positive_int(global_kv, "num_global_key_value_heads", source)
    return tuple(dims), tuple(kvs)


def _kv_sources(d: dict[str, Any], types: tuple[str, ...], source: str) -> tuple[int, ...]:
    """Layer i's K/V come from layer kv_sources[i]: itself, or (for the last
    `num_kv_shared_layers`) the last earlier layer of the same type that has its own."""
    shared = d.get("num_kv_shared_layers") or 0
    layers = len(types)
    if isinstance(shared, bool) or not isinstance(shared, int) or not 0 <= shared < layers:
        raise ModelConfigError(f"{source}: field 'num_kv_shared_layers' must be an integer in "
                               f"[0, {layers}) (num_hidden_layers), got {shared!r}")
    first = layers - shared
    sources = list(range(layers))
    for i in range(first, layers):
        owners = [j for j in range(first) if types[j] == types[i]]
        if not owners:
            raise ModelConfigError(f"{source}: layer {i} ({types[i]}) shares keys and values "
                                   f"(num_kv_shared_layers {shared}), but no earlier layer of "
                                   "that type computes any")
        sources[i] = owners[-1]
    return tuple(sources)


def _rope(d: dict[str, Any], types: tuple[str, ...], source: str) -> dict[str, dict[str, Any]]:
    params = d.get("rope_parameters")
    if params is None:  # transformers' defaults
        params = {SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
                  GLOBAL: {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                           "rope_theta": 1_000_000.0}}
    if not isinstance(params, dict):
        raise ModelConfigError(f"{source}: field 'rope_parameters' must be an object")
    rope = {}
    for kind in sorted(set(types)):
        p = params.get(kind)
        where = f"rope_parameters.{kind}"
        if not isinstance(p, dict):
            raise ModelConfigError(f"{source}: field '{where}' is missing or not an object")
        kind_of = p.get("rope_type", "default")
        if kind_of not in ("default", "proportional"):
            raise UnsupportedModelError(f"{source}: field '{where}.rope_type' is {kind_of!r}; "
                                        "only 'default' and 'proportional' are implemented")
        for name in ("rope_theta", "partial_rotary_factor", "factor"):
            value = p.get(name, 1.0)
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not (math.isfinite(value) and value > 0)):
                raise ModelConfigError(f"{source}: field '{where}.{name}' must be a positive "
                                       f"number, got {value!r}")
        if p.get("partial_rotary_factor", 1.0) > 1:
            raise ModelConfigError(f"{source}: field '{where}.partial_rotary_factor' must be <= 1")
        unknown = sorted(set(p) - {"rope_type", "rope_theta", "partial_rotary_factor", "factor"})
        if unknown:
            raise UnsupportedModelError(f"{source}: field '{where}.{unknown[0]}' is not "
                                        "implemented")
        if "rope_theta" not in p:
            raise ModelConfigError(f"{source}: missing field '{where}.rope_theta'")
        rope[kind] = dict(p, rope_type=kind_of)
    return rope


def _positive_int(value: Any, name: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ModelConfigError(
            f"{source}: field '{name}' must be a positive integer, got {value!r}")
    return value
