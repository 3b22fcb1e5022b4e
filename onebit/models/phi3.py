"""The Phi-3 family (HF `model_type` "phi3", Phi-3 mini 4k style): the Llama decoder with its
q/k/v and gate/up projections fused in the file.

Phi-3's layer is Llama's (RMSNorm `x_hat * w`, GQA attention with rotate-half RoPE over the
whole head, scale 1/sqrt(D), a SiLU-gated MLP, an untied or tied lm_head); what differs is how
the weights are stored:

- `self_attn.qkv_proj.weight` is `[q; k; v]` stacked by rows (`Hq*D + 2*Hkv*D` rows), as
  transformers' `Phi3Attention` slices it and llama.cpp's `attn_qkv` holds it;
- `mlp.gate_up_proj.weight` is `[gate; up]` (`2F` rows, gate first): transformers'
  `Phi3MLP` does `gate, up = gate_up_proj(x).chunk(2)` and llama.cpp's phi3 graph runs
  `ffn_up` through `swiglu`, which takes silu of the first half times the second.

`unfuse_phi3` splits both by rows when the model is built (`Family.unfuse`), so the forward is
`LlamaModel` itself and every kernel, the compiled stack and the base contract are the Llama
family's. A row slice of any stored form is exact: float rows, bf16 rows, ggml blocks (which run
along the input dimension, so a row is whole blocks) and Q4NX blocks (32 rows a block row, so
the cut must fall on a multiple of 32, checked).

What is not implemented is refused by name: LongRoPE (`rope_parameters.rope_type` "longrope" /
"su" / "yarn", `rope_scaling`, the GGUF file's `rope_factors_long` / `rope_factors_short`
tensors), partial rotary, another activation, attention or MLP biases, and any unknown field
with a value. `sliding_window` (2047 in Phi-3 mini 4k) is honoured as the Llama family honours
Mistral's: positions at or past the window, where transformers' sliding mask starts to differ
from full attention (and llama.cpp, which ignores Phi-3's window, differs from transformers),
are refused by name rather than computed one way or the other.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from onebit.models.errors import ModelConfigError, ModelFileError, UnsupportedModelError
from onebit.models.gemma4_config import _INERT, _has_value
from onebit.models.llama import LlamaConfig, LlamaModel, random_llama_weights
from onebit.models.registry import Family
from onebit.models.weights import Stored

MODEL_TYPES = ("phi3",)
QKV = "self_attn.qkv_proj.weight"
GATE_UP = "mlp.gate_up_proj.weight"

_READ = {
    "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps",
    "tie_word_embeddings", "rope_parameters", "rope_theta", "rope_scaling", "sliding_window",
    "partial_rotary_factor", "attention_bias", "max_position_embeddings",
    "original_max_position_embeddings",  # only LongRoPE reads it (refused on its own)
}
# dropout rates (no effect at inference) and the remote-code pointer
_PHI3_INERT = {"resid_pdrop", "embd_pdrop", "auto_map"}
_LONGROPE = ("longrope", "su", "yarn")


class Phi3Config(LlamaConfig):
    """A `LlamaConfig` read from a Phi-3 config.json (hf_model_type "phi3")."""

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "config.json") -> Phi3Config:
        if not isinstance(raw, dict):
            raise ModelConfigError(f"{source}: expected a JSON object, got {type(raw).__name__}")
        if raw.get("model_type") not in MODEL_TYPES:
            raise ModelConfigError(f"{source}: field 'model_type' is {raw.get('model_type')!r}; "
                                   f"a Phi-3 config has one of {list(MODEL_TYPES)}")
        for key in sorted(raw):
            if key not in _READ | _INERT | _PHI3_INERT and _has_value(raw[key]):
                raise UnsupportedModelError(
                    f"{source}: unknown field '{key}' = {raw[key]!r}; onebit cannot tell whether "
                    "it changes the math, so it refuses the model")
        _refuse_unimplemented(raw, source)
        rope = raw.get("rope_parameters") or {}
        theta = raw.get("rope_theta", rope.get("rope_theta", 10000.0))
        common = {k: v for k, v in raw.items()
                  if k not in _PHI3_INERT | {"original_max_position_embeddings",
                                              "partial_rotary_factor", "rope_scaling",
                                              "attention_bias"}}
        common.update(model_type="llama", rope_theta=theta,
                      rope_parameters={"rope_type": "default", "rope_theta": theta})
        if common.get("sliding_window") is None:
            common.pop("sliding_window", None)
        base = LlamaConfig.from_dict(common, source=source)
        config = cls(**{name: getattr(base, name) for name in LlamaConfig.__dataclass_fields__})
        return replace(config, hf_model_type="phi3", model_type="phi3")

    def fused_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor as a Phi-3 checkpoint stores it: q/k/v and gate/up fused."""
        shapes: dict[str, tuple[int, ...]] = {}
        D, Hq, Hkv, F = (self.head_dim, self.num_attention_heads, self.num_key_value_heads,
                         self.intermediate_size)
        for name, shape in self.expected_shapes().items():
            if name.endswith(("self_attn.q_proj.weight", "mlp.gate_proj.weight")):
                p = name.rsplit(".", 3)[0] + "."
                if name.endswith("q_proj.weight"):
                    shapes[p + "self_attn.qkv_proj.weight"] = ((Hq + 2 * Hkv) * D, shape[1])
                else:
                    shapes[p + "mlp.gate_up_proj.weight"] = (2 * F, shape[1])
            elif not name.endswith(("k_proj.weight", "v_proj.weight", "up_proj.weight")):
                shapes[name] = shape
        return shapes

    def to_dict(self) -> dict[str, Any]:
        """A Phi-3 config.json dict transformers reads back as the same model."""
        d = LlamaConfig.to_dict(self)
        for name in ("attention_bias", "mlp_bias", "partial_rotary_factor", "gated_attention",
                     "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_conv_kernel_dim"):
            d.pop(name, None)
        d["model_type"] = "phi3"
        d["original_max_position_embeddings"] = d.get("max_position_embeddings", 4096)
        # transformers' Phi3Config defaults both to 32000, past a small vocabulary's end
        d.update(pad_token_id=None, eos_token_id=None)
        return d


def _refuse_unimplemented(raw: dict[str, Any], source: str) -> None:
    for name in ("rope_parameters", "rope_scaling"):
        value = raw.get(name)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise ModelConfigError(f"{source}: field '{name}' must be an object, got {value!r}")
        kind = value.get("rope_type", value.get("type", "default"))
        if kind in _LONGROPE or value.get("long_factor") is not None:
            raise UnsupportedModelError(
                f"{source}: field '{name}.rope_type' is {kind!r}: Phi-3's LongRoPE (long and "
                "short factors) is not implemented; use a 4k model without rope scaling")
        if kind != "default":
            raise UnsupportedModelError(f"{source}: field '{name}.rope_type' is {kind!r}; only "
                                        "'default' RoPE is implemented for Phi-3")
        partial = value.get("partial_rotary_factor", 1.0)
        if partial != 1.0:
            raise UnsupportedModelError(f"{source}: field '{name}.partial_rotary_factor' is "
                                        f"{partial!r}; partial rotary is not implemented")
    if raw.get("partial_rotary_factor", 1.0) not in (1, 1.0, None):
        raise UnsupportedModelError(f"{source}: field 'partial_rotary_factor' is "
                                    f"{raw['partial_rotary_factor']!r}; partial rotary is not "
                                    "implemented")
    if raw.get("hidden_act", "silu") != "silu":
        raise UnsupportedModelError(f"{source}: field 'hidden_act' is {raw['hidden_act']!r}; "
                                    "only 'silu' is implemented for Phi-3")
    if _has_value(raw.get("attention_bias")):
        raise UnsupportedModelError(f"{source}: field 'attention_bias' is "
                                    f"{raw['attention_bias']!r}; Phi-3 has no attention biases")


def _rows(stored: Stored, start: int, end: int, shape: tuple[int, int], name: str,
          source: str) -> Stored:
    """Rows start .. end-1 of a stored [rows, cols] weight, in its own stored form."""
    data = stored.data
    if stored.kind == "q4nx":
        from onebit.models import q4nx

        if start % q4nx.BLOCK_ROWS or end % q4nx.BLOCK_ROWS:
            raise ModelFileError(f"{source}: tensor '{name}' is stored as Q4NX blocks of "
                                 f"{q4nx.BLOCK_ROWS} rows; its split at rows {start}..{end} "
                                 "does not fall on a block row")
        try:
            grid = q4nx.as_grid(data, *shape)
        except q4nx.Q4NXError as error:
            raise ModelFileError(f"{source}: tensor '{name}': {error}") from None
        part = grid[start // q4nx.BLOCK_ROWS:end // q4nx.BLOCK_ROWS]
    else:
        if data.ndim != 2 or data.shape[0] != shape[0]:
            raise ModelFileError(f"{source}: tensor '{name}' has shape {tuple(data.shape)}; the "
                                 f"config needs {shape[0]} rows")
        part = data[start:end]
    return Stored(np.ascontiguousarray(part), stored.kind, stored.file)


def unfuse_phi3(config: Phi3Config, tensors: dict[str, Stored], source: str
                ) -> dict[str, Stored]:
    """The tensors with every fused `qkv_proj` cut into q/k/v and every `gate_up_proj` into
    gate (the first half) and up, by rows (see the module docstring). A fused tensor that is
    missing is left to the weight store's 'missing tensor' error, naming the unfused parts."""
    from onebit.models.weights import canonical_name

    fused = config.fused_shapes()
    D, Hq, Hkv, F = (config.head_dim, config.num_attention_heads,
                     config.num_key_value_heads, config.intermediate_size)
    q, kv = Hq * D, Hkv * D
    out: dict[str, Stored] = {}
    for stored_name, stored in tensors.items():
        name = canonical_name(stored_name)
        if name.endswith("." + QKV):
            p = name[: -len(QKV)]
            shape = fused[name] if name in fused else (q + 2 * kv, config.hidden_size)
            for part, (start, end) in (("q_proj", (0, q)), ("k_proj", (q, q + kv)),
                                       ("v_proj", (q + kv, q + 2 * kv))):
                out[f"{p}self_attn.{part}.weight"] = _rows(stored, start, end, shape, name,
                                                           source)
        elif name.endswith("." + GATE_UP):
            p = name[: -len(GATE_UP)]
            shape = fused[name] if name in fused else (2 * F, config.hidden_size)
            out[p + "mlp.gate_proj.weight"] = _rows(stored, 0, F, shape, name, source)
            out[p + "mlp.up_proj.weight"] = _rows(stored, F, 2 * F, shape, name, source)
        else:
            out[stored_name] = stored
    return out


def tiny_phi3_config(**overrides: Any) -> Phi3Config:
    """A tiny Phi-3 (hidden 256, two layers, GQA 4/2, head_dim 64, untied, vocab 256), so every
    fused cut falls on a Q4NX block row; overrides use config.json's names."""
    raw: dict[str, Any] = dict(
        model_type="phi3", hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=512, vocab_size=256,
        tie_word_embeddings=False, rope_theta=10000.0, rms_norm_eps=1e-5,
        max_position_embeddings=4096,
    )
    raw.update(overrides)
    return Phi3Config.from_dict(raw, source="tiny_phi3_config")


def random_phi3_weights(config: Phi3Config, seed: int = 0) -> dict[str, np.ndarray]:
    """float32 weights as a Phi-3 checkpoint stores them (q/k/v and gate/up fused), drawn as
    the Llama family draws its unfused ones."""
    unfused = random_llama_weights(config, seed)
    out: dict[str, np.ndarray] = {}
    for name, value in unfused.items():
        if name.endswith("self_attn.q_proj.weight"):
            p = name[: -len("q_proj.weight")]
            out[p + "qkv_proj.weight"] = np.concatenate(
                [value, unfused[p + "k_proj.weight"], unfused[p + "v_proj.weight"]])
        elif name.endswith("mlp.gate_proj.weight"):
            p = name[: -len("gate_proj.weight")]
            out[p + "gate_up_proj.weight"] = np.concatenate([value, unfused[p + "up_proj.weight"]])
        elif not name.endswith(("k_proj.weight", "v_proj.weight", "up_proj.weight")):
            out[name] = value
    return out


def build_phi3(config: Phi3Config, weights, **options: Any) -> LlamaModel:
    return LlamaModel(config, weights, **options)


PHI3 = Family(
    name="phi3",
    model_types=MODEL_TYPES,
    read_config=lambda raw, source: Phi3Config.from_dict(raw, source=source),
    shapes=Phi3Config.expected_shapes,
    build=build_phi3,
    tiny_config=tiny_phi3_config,
    random_weights=random_phi3_weights,
    doc="Phi-3 (mini 4k style): the Llama decoder with fused qkv and gate_up projections, "
        "split by rows at load",
    unfuse=unfuse_phi3,
)

__all__ = ["PHI3", "Phi3Config", "tiny_phi3_config", "unfuse_phi3"]
