"""From llama.cpp's names to HuggingFace's: the config dict and the tensor names.

A GGUF file says what its model is in `<arch>.*` metadata and names tensors `blk.N.attn_q...`;
the forward is written against HF's `config.json` fields and tensor names. This module maps one
to the other, for the architectures onebit runs:

- `llama` (SmolLM2, Llama 2/3.x, Mistral-style): HF model_type "llama". llama.cpp's converter
  permutes the rows of `attn_q` / `attn_k` so its rotary code can rotate adjacent pairs; HF
  rotates the two halves of each head, so the permutation is undone here (`unpermute`).
  Llama 3.x's frequency scaling arrives as a `rope_freqs.weight` tensor of per-frequency
  divisors; it is turned back into HF's `rope_scaling` (rope_type "llama3") and checked to
  reproduce the tensor.
- `qwen2`: model_type "qwen2", with q/k/v biases; no permutation (NEOX-style rotary).
- `qwen3`: model_type "qwen3", with per-head q/k RMSNorms; no permutation.
- `gemma3`: model_type "gemma3_text" (`onebit/models/gemma3.py`): four norms a layer, q/k
  norms, sliding and global layers. llama.cpp's converter stores Gemma 3's norm weights as
  `1 + w`; they are handed on as HF's `w` (the shift undone in float64, exactly, as
  transformers' GGUF loader undoes it). What llama.cpp fixes rather than reads is fixed here
  the same way (src/models/gemma3.cpp): every 6th layer global (layer i when (i + 1) % 6 == 0)
  when `attention.sliding_window` is set, every layer global when it is not; the sliding layers'
  RoPE base `rope.freq_base_swa` or 10000, unscaled; the query scale head_dim^-0.5 (the 62-layer
  27B: (hidden / heads)^-0.5), as `query_pre_attn_scalar`.
- `gemma2`: model_type "gemma2" (`onebit/models/gemma2.py`): Gemma 3's layer without q/k norms,
  with attention logit soft-capping. As llama.cpp's gemma2 reads it (src/models/gemma2.cpp):
  even layers sliding (`load_swa_pattern(ml, 2)`: il % 2 < 1), odd layers global, one RoPE
  base `rope.freq_base` for both, the window `attention.sliding_window` (4096 when absent),
  `attn_logit_softcapping` (50 when absent) and `final_logit_softcapping` (30 when absent),
  the query scale head_dim^-0.5 (the 46-layer 27B: (hidden / heads)^-0.5); norm weights stored
  as `1 + w` like Gemma 3's; the lm_head is always the embedding (an `output.weight` is a
  tensor llama.cpp does not load, refused).
- `phi3`: model_type "phi3" (`onebit/models/phi3.py`): Llama's layer with `attn_qkv` (q, k, v
  stacked by rows) and `ffn_up` holding gate and up (gate first, llama.cpp's swiglu), handed on
  under HF's fused names (`qkv_proj`, `gate_up_proj`) and cut by rows when the model is built.
  LongRoPE (the `rope_factors_long` / `rope_factors_short` tensors, `rope.scaling.attn_factor`)
  is refused by name; `attention.sliding_window` (0: none) becomes `sliding_window`, whose
  positions past the window the Llama family refuses (llama.cpp ignores Phi-3's window,
  transformers applies it: they agree only before it).

Everything else is refused by name: another architecture, an `<arch>.*` field this module does
not read (a mixture-of-experts count, sliding windows, ...), a tensor the forward would not
use. `general.*` and `quantize.*` fields describe the file, not the model, and are ignored;
`tokenizer.*` fields are handed on untouched for the tokenizer.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from onebit.gguf.errors import GGUFConfigError, UnsupportedGGUFError

ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3",  # GGUF -> HF model_type
                 "gemma3": "gemma3_text", "gemma2": "gemma2", "phi3": "phi3"}
HF_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
              "qwen3": "Qwen3ForCausalLM", "gemma3": "Gemma3ForCausalLM",
              "gemma2": "Gemma2ForCausalLM", "phi3": "Phi3ForCausalLM"}
# prefixes of fields that describe the file or feed the tokenizer, never the forward
PASSED_PREFIXES = ("general.", "quantize.", "tokenizer.")
# <arch>.<suffix> fields this module reads
ARCH_FIELDS = (
    "block_count", "context_length", "embedding_length", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
    "attention.key_length", "attention.value_length", "rope.freq_base", "rope.dimension_count",
    "rope.scaling.type", "rope.scaling.factor", "rope.scaling.original_context_length",
    "vocab_size",
)
# <arch>.<suffix> fields read for one architecture only
ARCH_EXTRA_FIELDS = {
    "gemma3": ("attention.sliding_window", "rope.freq_base_swa", "final_logit_softcapping"),
    "gemma2": ("attention.sliding_window", "attn_logit_softcapping", "final_logit_softcapping"),
    "phi3": ("attention.sliding_window",),
}
GEMMA3_PATTERN = 6          # llama.cpp's load_swa_pattern(ml, 6) for gemma3
GEMMA3_LOCAL_THETA = 10000.0  # llama.cpp's rope_freq_base_train_swa default
GEMMA2_PATTERN = 2          # llama.cpp's load_swa_pattern(ml, 2) for gemma2: even layers sliding
GEMMA2_WINDOW = 4096        # llama.cpp's n_swa default for gemma2
GEMMA2_ATTN_CAP = 50.0      # llama.cpp's f_attn_logit_softcapping default
GEMMA2_FINAL_CAP = 30.0     # llama.cpp's f_final_logit_softcapping default
# Phi-3's LongRoPE, refused by name: its per-frequency factor tensors and its field
LONGROPE_TENSORS = ("rope_factors_long.weight", "rope_factors_short.weight")
LONGROPE_FIELDS = ("rope.scaling.attn_factor",)

GLOBAL_TENSORS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
LAYER_TENSORS = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
}
COMMON = ("attn_norm.weight", "ffn_norm.weight", "attn_q.weight", "attn_k.weight",
          "attn_v.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight",
          "ffn_down.weight")
# per architecture: the layer tensors every block must have
LAYER_SETS = {
    "llama": COMMON,
    "qwen2": COMMON + ("attn_q.bias", "attn_k.bias", "attn_v.bias"),
    "qwen3": COMMON + ("attn_q_norm.weight", "attn_k_norm.weight"),
}
# Gemma 3's layer names: its norms differ from llama's (ffn_norm is the pre-MLP norm)
GEMMA3_LAYER_TENSORS = {
    **{t: LAYER_TENSORS[t] for t in COMMON if t != "ffn_norm.weight"},
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
}
LAYER_SETS["gemma3"] = tuple(GEMMA3_LAYER_TENSORS)
# Gemma 2's: Gemma 3's less the q/k norms
GEMMA2_LAYER_TENSORS = {t: n for t, n in GEMMA3_LAYER_TENSORS.items()
                        if t not in ("attn_q_norm.weight", "attn_k_norm.weight")}
LAYER_SETS["gemma2"] = tuple(GEMMA2_LAYER_TENSORS)
# Phi-3's: fused q/k/v and gate/up, under HF's fused names (cut by onebit/models/phi3.py)
PHI3_LAYER_TENSORS = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_qkv.weight": "self_attn.qkv_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_up.weight": "mlp.gate_up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
LAYER_SETS["phi3"] = tuple(PHI3_LAYER_TENSORS)
LAYER_NAMES = {"gemma3": GEMMA3_LAYER_TENSORS, "gemma2": GEMMA2_LAYER_TENSORS,
               "phi3": PHI3_LAYER_TENSORS}
ROPE_FREQS = "rope_freqs.weight"  # llama3 frequency divisors, consumed into the config
_LAYER = re.compile(r"blk\.(\d+)\.(.+)")


def architecture(metadata: dict[str, Any], source: str) -> str:
    """The file's `general.architecture`, when onebit runs it."""
    arch = metadata.get("general.architecture")
    if arch is None:
        raise GGUFConfigError(f"{source}: missing metadata 'general.architecture'")
    if not isinstance(arch, str) or arch not in ARCHITECTURES:
        raise UnsupportedGGUFError(f"{source}: architecture {_shown(arch)} is not supported; "
                                   f"supported: {sorted(ARCHITECTURES)}")
    return arch


def check_fields(metadata: dict[str, Any], arch: str, source: str) -> None:
    """Refuse a field that is neither the file's description nor one this module reads."""
    known = {f"{arch}.{suffix}" for suffix in ARCH_FIELDS + ARCH_EXTRA_FIELDS.get(arch, ())}
    for key, value in metadata.items():
        if key in (f"{arch}.expert_count", f"{arch}.expert_used_count") and value == 0:
            continue  # some converters write 0 experts for a dense model: that is no change
        if key not in known and not key.startswith(PASSED_PREFIXES):
            raise UnsupportedGGUFError(
                f"{source}: metadata field '{key}' is not one onebit reads for a {arch} model "
                "(refused rather than run a model it may change)")


def hf_config(metadata: dict[str, Any], shapes: dict[str, tuple[int, ...]],
              rope_freqs: np.ndarray | None, source: str) -> dict[str, Any]:
    """The HF config.json dict of the model a GGUF file describes. `shapes` are the file's
    tensor shapes by GGUF name (numpy order), `rope_freqs` the llama3 tensor when present."""
    arch = architecture(metadata, source)
    if arch == "phi3":
        _refuse_longrope(metadata, shapes, source)
    check_fields(metadata, arch, source)

    def field(suffix: str, default: Any = None, kind: type = int) -> Any:
        key = f"{arch}.{suffix}"
        value = metadata.get(key, default)
        if value is None:
            raise GGUFConfigError(f"{source}: missing metadata '{key}'")
        ok = isinstance(value, kind) and not isinstance(value, bool)
        if kind is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or (kind is int and value <= 0) or (kind is float and not
                                                     (math.isfinite(value) and value > 0)):
            raise GGUFConfigError(f"{source}: metadata '{key}' is {_shown(value)}; expected a "
                                  f"positive {kind.__name__}")
        return value

    hidden = field("embedding_length")
    heads = field("attention.head_count")
    head_dim = field("attention.key_length", hidden // heads if hidden % heads == 0 else None)
    if field("attention.value_length", head_dim) != head_dim:
        raise UnsupportedGGUFError(f"{source}: '{arch}.attention.value_length' differs from the "
                                   f"key length {head_dim}; not supported")
    if field("rope.dimension_count", head_dim) != head_dim:
        raise UnsupportedGGUFError(f"{source}: '{arch}.rope.dimension_count' is "
                                   f"{metadata[arch + '.rope.dimension_count']}, not the head "
                                   f"dimension {head_dim}: partial rotary is not supported")
    embed = shapes.get("token_embd.weight")
    if embed is None or len(embed) != 2:
        raise GGUFConfigError(f"{source}: missing tensor 'token_embd.weight' (2-D)")
    vocab = field("vocab_size", embed[0])
    if vocab != embed[0]:
        raise GGUFConfigError(f"{source}: '{arch}.vocab_size' is {vocab} but token_embd.weight "
                              f"has {embed[0]} rows")
    config: dict[str, Any] = {
        "model_type": ARCHITECTURES[arch],
        "architectures": [HF_CLASSES[arch]],
        "hidden_size": hidden,
        "num_hidden_layers": field("block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": field("attention.head_count_kv", heads),
        "head_dim": head_dim,
        "intermediate_size": field("feed_forward_length"),
        "vocab_size": vocab,
        "rms_norm_eps": field("attention.layer_norm_rms_epsilon", kind=float),
        "rope_theta": float(field("rope.freq_base", 10000.0, kind=float)),
        "max_position_embeddings": field("context_length", 2048),
        "tie_word_embeddings": "output.weight" not in shapes,
        "hidden_act": "silu",
    }
    if arch == "llama":
        config.update(attention_bias=False, mlp_bias=False)
    for name in ("bos", "eos"):
        value = metadata.get(f"tokenizer.ggml.{name}_token_id")
        if isinstance(value, int) and not isinstance(value, bool):
            config[f"{name}_token_id"] = value
    scaling = _rope_scaling(metadata, arch, config, rope_freqs, source)
    if arch == "gemma3":
        return _gemma3(config, scaling, field, metadata, source)
    if arch == "gemma2":
        return _gemma2(config, scaling, field, metadata, shapes, source)
    if arch == "phi3":
        return _phi3(config, scaling, field, metadata, source)
    if scaling is not None:
        config["rope_scaling"] = scaling
    return config


def _gemma3(config: dict[str, Any], scaling: dict[str, Any] | None, field, metadata,
            source: str) -> dict[str, Any]:
    """The gemma3_text config: the common fields, then what llama.cpp's gemma3 reads or fixes
    (see the module docstring)."""
    arch, layers = "gemma3", config["num_hidden_layers"]
    del config["hidden_act"]
    window = metadata.get(f"{arch}.attention.sliding_window", 0)
    if window != 0:
        window = field("attention.sliding_window")
    global_rope = {"rope_type": "default", "rope_theta": config.pop("rope_theta")}
    if scaling is not None:
        global_rope.update(scaling)  # linear: the global layers only, as llama.cpp scales them
    config.update(
        hidden_activation="gelu_pytorch_tanh",
        sliding_window=window or config["max_position_embeddings"],
        layer_types=["sliding_attention" if window and (i + 1) % GEMMA3_PATTERN else
                     "full_attention" for i in range(layers)],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": float(
                field("rope.freq_base_swa", GEMMA3_LOCAL_THETA, kind=float))},
            "full_attention": global_rope},
        query_pre_attn_scalar=(config["hidden_size"] // config["num_attention_heads"]
                               if layers == 62 else config["head_dim"]),
    )
    if f"{arch}.final_logit_softcapping" in metadata:
        cap = field("final_logit_softcapping", kind=float)
        config["final_logit_softcapping"] = float(cap)
    return config


def _gemma2(config: dict[str, Any], scaling: dict[str, Any] | None, field, metadata,
            shapes: dict[str, tuple[int, ...]], source: str) -> dict[str, Any]:
    """The gemma2 config: the common fields, then what llama.cpp's gemma2 reads or fixes (see
    the module docstring)."""
    arch, layers = "gemma2", config["num_hidden_layers"]
    if scaling is not None:
        raise UnsupportedGGUFError(f"{source}: '{arch}.rope.scaling.type' is "
                                   f"{_shown(scaling.get('rope_type'))}; onebit's Gemma 2 "
                                   "reads no RoPE scaling")
    if "output.weight" in shapes:
        raise UnsupportedGGUFError(f"{source}: tensor 'output.weight' is not one a gemma2 model "
                                   "uses (llama.cpp's gemma2 always reads the embedding as "
                                   "its lm_head)")
    del config["hidden_act"]

    def optional(suffix: str, default: Any, kind: type) -> Any:
        return field(suffix, kind=kind) if f"{arch}.{suffix}" in metadata else default

    config.update(
        hidden_activation="gelu_pytorch_tanh",
        sliding_window=optional("attention.sliding_window", GEMMA2_WINDOW, int),
        layer_types=["sliding_attention" if i % GEMMA2_PATTERN < GEMMA2_PATTERN - 1 else
                     "full_attention" for i in range(layers)],
        query_pre_attn_scalar=(config["hidden_size"] // config["num_attention_heads"]
                               if layers == 46 else config["head_dim"]),
        attn_logit_softcapping=float(optional("attn_logit_softcapping", GEMMA2_ATTN_CAP,
                                              float)),
        final_logit_softcapping=float(optional("final_logit_softcapping", GEMMA2_FINAL_CAP,
                                               float)),
    )
    return config


def _refuse_longrope(metadata: dict[str, Any], shapes: dict[str, tuple[int, ...]],
                     source: str) -> None:
    """Phi-3's LongRoPE (128k models): per-frequency factor tensors and an attention factor
    that onebit does not implement, named rather than read as plain RoPE."""
    for name in LONGROPE_TENSORS:
        if name in shapes:
            raise UnsupportedGGUFError(f"{source}: tensor '{name}' is Phi-3's LongRoPE, which "
                                       "onebit does not implement (a 4k model has none)")
    for suffix in LONGROPE_FIELDS:
        if f"phi3.{suffix}" in metadata:
            raise UnsupportedGGUFError(f"{source}: metadata field 'phi3.{suffix}' is Phi-3's "
                                       "LongRoPE, which onebit does not implement")


def _phi3(config: dict[str, Any], scaling: dict[str, Any] | None, field, metadata,
          source: str) -> dict[str, Any]:
    """The phi3 config: the common fields and the window (0: none)."""
    if scaling is not None:
        raise UnsupportedGGUFError(f"{source}: 'phi3.rope.scaling.type' is "
                                   f"{_shown(scaling.get('rope_type'))}; onebit's Phi-3 reads "
                                   "no RoPE scaling")
    if metadata.get("phi3.attention.sliding_window", 0) != 0:
        config["sliding_window"] = field("attention.sliding_window")
    return config


def hf_values(name: str, arch: str, values: np.ndarray) -> np.ndarray:
    """A tensor's values as HF holds them: Gemma 2's and 3's norm weights shifted back by 1, in
    float64 (exact: `1 + w` in float64 gives the stored float32 value again)."""
    if arch in ("gemma2", "gemma3") and name.endswith("norm.weight"):
        return np.asarray(values, dtype=np.float64) - 1.0
    return values


def _rope_scaling(metadata, arch, config, rope_freqs, source) -> dict[str, Any] | None:
    kind = metadata.get(f"{arch}.rope.scaling.type", "none")
    if rope_freqs is not None:
        if arch != "llama" or kind not in ("none", "llama3"):
            raise UnsupportedGGUFError(f"{source}: tensor '{ROPE_FREQS}' in a {arch} file with "
                                       f"rope scaling {_shown(kind)} is not supported")
        original = metadata.get(f"{arch}.rope.scaling.original_context_length", 8192)
        return llama3_scaling(rope_freqs, config["rope_theta"], config["head_dim"], original,
                              source)
    if kind == "none":
        return None
    if kind == "linear":
        factor = metadata.get(f"{arch}.rope.scaling.factor")
        if not isinstance(factor, int | float) or not factor > 0:
            raise GGUFConfigError(f"{source}: '{arch}.rope.scaling.factor' is {_shown(factor)};"
                                  " linear scaling needs a positive factor")
        return {"rope_type": "linear", "factor": float(factor)}
    raise UnsupportedGGUFError(f"{source}: '{arch}.rope.scaling.type' is {_shown(kind)}; "
                               "supported: none, linear, and llama3 (by rope_freqs.weight)")


def llama3_frequency_divisors(theta: float, head_dim: int, factor: float, low: float,
                              high: float, original: int) -> np.ndarray:
    """The divisor of each rotary frequency under HF's llama3 rule: 1 for short wavelengths,
    `factor` for long ones, and a smooth blend in between (what llama.cpp stores)."""
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * math.pi / inv
    smooth = (original / wavelen - low) / (high - low)
    blended = 1.0 / ((1 - smooth) / factor + smooth)
    out = np.where(wavelen < original / high, 1.0, blended)
    return np.where(wavelen > original / low, factor, out)


def llama3_scaling(freqs: np.ndarray, theta: float, head_dim: int, original: Any,
                   source: str) -> dict[str, Any]:
    """HF's llama3 `rope_scaling` that reproduces the divisors in `rope_freqs.weight`: the
    factor is their largest value, and the low / high frequency factors are Meta's published
    1 and 4 (GGUF does not store them); a file whose divisors do not match is refused."""
    freqs = np.asarray(freqs, dtype=np.float64).reshape(-1)
    if freqs.shape != (head_dim // 2,) or not np.isfinite(freqs).all() or freqs.min() <= 0:
        raise GGUFConfigError(f"{source}: tensor '{ROPE_FREQS}' must hold {head_dim // 2} "
                              f"positive divisors, got shape {freqs.shape}")
    if not isinstance(original, int) or isinstance(original, bool) or original <= 0:
        raise GGUFConfigError(f"{source}: rope original context length is {_shown(original)}")
    factor = float(freqs.max())
    expected = llama3_frequency_divisors(theta, head_dim, factor, 1.0, 4.0, original)
    if not np.allclose(freqs, expected, rtol=1e-5, atol=0):
        raise UnsupportedGGUFError(
            f"{source}: tensor '{ROPE_FREQS}' is not llama3 scaling with factor {factor}, "
            f"low/high frequency factors 1/4 and original context {original}")
    return {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": original}


def hf_name(name: str, arch: str, layers: int, source: str) -> str:
    """The HF name of GGUF tensor `name`; `UnsupportedGGUFError` for one the forward does not
    use (or a block past `layers`)."""
    if name in GLOBAL_TENSORS:
        return GLOBAL_TENSORS[name]
    match = _LAYER.fullmatch(name)
    if match and match.group(2) in LAYER_SETS[arch]:
        layer = int(match.group(1))
        names = LAYER_NAMES.get(arch, LAYER_TENSORS)
        if layer < layers and match.group(1) == str(layer):
            return f"model.layers.{layer}.{names[match.group(2)]}"
        raise GGUFConfigError(f"{source}: tensor '{name}' is for block {match.group(1)}; the "
                              f"model has {layers} blocks")
    raise UnsupportedGGUFError(f"{source}: tensor '{name}' is not one a {arch} model uses")


def required(arch: str, layers: int, tied: bool) -> list[str]:
    """Every GGUF tensor name a `arch` model of `layers` blocks must have."""
    names = ["token_embd.weight", "output_norm.weight"] + ([] if tied else ["output.weight"])
    return names + [f"blk.{i}.{t}" for i in range(layers) for t in LAYER_SETS[arch]]


def unpermute(rows: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's row order for a llama q/k projection (weights [out, in] or their
    blocks): within each head it stores the rotary pairs interleaved (row 2i is the first half's
    row i, row 2i + 1 the second half's); HF keeps the halves apart."""
    out = rows.shape[0]
    if out % (2 * heads):
        raise GGUFConfigError(f"{out} rows do not split into {heads} heads of rotary pairs")
    half = out // heads // 2
    grouped = rows.reshape(heads, half, 2, *rows.shape[1:])
    return np.ascontiguousarray(grouped.swapaxes(1, 2).reshape(rows.shape))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def expected_shapes(config: dict[str, Any], arch: str) -> dict[str, tuple[int, ...]]:
    """The shape (numpy order) of every tensor a model of `config` has, by GGUF name."""
    H, D, F, V = (config["hidden_size"], config["head_dim"], config["intermediate_size"],
                  config["vocab_size"])
    q, kv = config["num_attention_heads"] * D, config["num_key_value_heads"] * D
    per_layer = {
        "attn_norm.weight": (H,), "ffn_norm.weight": (H,), "attn_q.weight": (q, H),
        "attn_k.weight": (kv, H), "attn_v.weight": (kv, H), "attn_output.weight": (H, q),
        "ffn_gate.weight": (F, H), "ffn_up.weight": (F, H), "ffn_down.weight": (H, F),
        "attn_q.bias": (q,), "attn_k.bias": (kv,), "attn_v.bias": (kv,),
        "attn_q_norm.weight": (D,), "attn_k_norm.weight": (D,),
        "post_attention_norm.weight": (H,), "post_ffw_norm.weight": (H,),
        "attn_qkv.weight": (q + 2 * kv, H),
    }
    if arch == "phi3":  # gate and up in one tensor
        per_layer["ffn_up.weight"] = (2 * F, H)
    shapes = {"token_embd.weight": (V, H), "output_norm.weight": (H,), "output.weight": (V, H)}
    for i in range(config["num_hidden_layers"]):
        shapes.update({f"blk.{i}.{t}": per_layer[t] for t in LAYER_SETS[arch]})
    return shapes
