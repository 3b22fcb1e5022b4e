"""The transformer pieces the weighted draft heads (DFlash, MTP) are built from.

A draft layer is a Qwen3-family decoder layer: RMSNorm, attention (q/k/v projections with
optional biases, per-head q_norm / k_norm, rotate-half RoPE at absolute positions, GQA, softmax
scaled by 1/sqrt(D)), RMSNorm, SwiGLU, each added to the residual stream. Two variants:
- Qwen3 (DFlash drafts, the Qwen3-style MTP draft): norms `x_hat * w`, RoPE over all of D;
- Qwen3.5 full attention (Qwen3.5's own MTP layer): norms `x_hat * (1 + w)` (folded to one
  factor at load, as the Qwen3.5 forward does), `q_proj` twice as wide giving `[q | gate]` per
  head with the output multiplied by sigmoid(gate), and RoPE over the first
  `partial_rotary_factor` of each head.
What differs between heads is only which keys a query may see, so `attend` takes the keys,
values and an optional mask explicitly.

Linear weights are stored as HuggingFace stores them, `[out, in]`: `linear(w, x) = x @ w.T`.
Drafts need no batch invariance (a draft is a guess; the base checks it), so plain numpy
products are used throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from onebit.heads.errors import DraftFileError
from onebit.models import config as config_fields


def linear(weight: np.ndarray, x: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """`x @ weight.T (+ bias)` for a weight stored `[out, in]`."""
    out = x @ weight.T
    return out if bias is None else out + bias


def rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm over the last axis: `x / sqrt(mean(x^2) + eps) * w` (w: the whole factor)."""
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# ---------------------------------------------------------------------------------------------
# Rotary position embedding


@dataclass(frozen=True)
class Rotary:
    """Rotate-half RoPE over the first `2 * len(inv_freq)` dims of each head.

    `inv_freq` are the per-pair frequencies (float64); `scale` multiplies cos and sin (YaRN's
    attention factor; 1 for plain RoPE), as transformers' rotary embeddings do."""

    inv_freq: tuple[float, ...]
    scale: float = 1.0

    def apply(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """`x` `[R, heads, D]`, row r at `positions[r]`. Angles in float64, then x's dtype."""
        half = len(self.inv_freq)
        angles = np.asarray(positions, np.float64)[:, None] * np.asarray(self.inv_freq)
        cos = (np.cos(angles) * self.scale).astype(x.dtype)[:, None, :]
        sin = (np.sin(angles) * self.scale).astype(x.dtype)[:, None, :]
        x1, x2 = x[..., :half], x[..., half : 2 * half]
        rotated = [x1 * cos - x2 * sin, x2 * cos + x1 * sin]
        return np.concatenate([*rotated, x[..., 2 * half :]], axis=-1)


ROPE_TYPES = ("default", "yarn")


def make_rotary(head_dim: int, theta: float, partial: float, rope: dict[str, Any],
                max_positions: int | None, source: str) -> Rotary:
    """The `Rotary` of a config: default RoPE, or YaRN (`rope_type: "yarn"`) computed as
    transformers' `_compute_yarn_parameters` does. Other rope types are refused by name."""
    dim = int(head_dim * partial)
    if dim < 2 or dim % 2:
        raise DraftFileError(f"{source}: head_dim {head_dim} x partial_rotary_factor {partial} "
                             f"gives rotary dim {dim}; it must be even and >= 2")
    base = theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    kind = rope.get("rope_type", rope.get("type", "default")) or "default"
    if kind == "default":
        return Rotary(tuple(1.0 / base))
    if kind != "yarn":
        raise DraftFileError(f"{source}: field 'rope_type' is {kind!r}; supported: "
                             f"{list(ROPE_TYPES)}")
    factor = positive_number(rope.get("factor"), "rope_scaling.factor", source)
    original = rope.get("original_max_position_embeddings", max_positions)
    original = positive_int(original, "rope_scaling.original_max_position_embeddings", source)
    attention = rope.get("attention_factor")
    if attention is None:
        mscale, mscale_all = rope.get("mscale"), rope.get("mscale_all_dim")
        attention = (_yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all)
                     if mscale and mscale_all else _yarn_mscale(factor))
    fast, slow = rope.get("beta_fast") or 32, rope.get("beta_slow") or 1

    def correction(rotations: float) -> float:
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction(fast), correction(slow)
    if rope.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # no zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    keep = 1 - ramp  # 1: extrapolate (high frequencies), 0: interpolate (low ones)
    inv_freq = (1.0 / (factor * base)) * (1 - keep) + (1.0 / base) * keep
    return Rotary(tuple(inv_freq), float(attention))


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


# ---------------------------------------------------------------------------------------------
# Attention


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None):
    """Softmax attention. `q` `[R, Hq, D]`; `k`, `v` `[T, Hkv, D]`; query head h reads kv head
    `h // (Hq / Hkv)`. `mask` `[R, T]` (True: may attend) or None (every query sees every key).
    Returns `[R, Hq * D]`."""
    R, Hq, D = q.shape
    Hkv = k.shape[1]
    group = Hq // Hkv
    qg = q.reshape(R, Hkv, group, D).transpose(1, 2, 0, 3)  # [Hkv, g, R, D]
    scores = qg @ k.transpose(1, 2, 0)[:, None] / np.sqrt(D).astype(q.dtype)  # [Hkv, g, R, T]
    if mask is not None:
        scores = np.where(mask[None, None], scores, -np.inf)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    out = probs @ v.transpose(1, 0, 2)[:, None]  # [Hkv, g, R, D]
    return out.transpose(2, 0, 1, 3).reshape(R, Hq * D)


def visibility(query_positions: np.ndarray, key_positions: np.ndarray, *, causal: bool,
               window: int | None) -> np.ndarray | None:
    """`[R, T]` mask of which keys each query may see (None: all), by absolute positions:
    causal keeps keys at or before the query; a window of W keeps keys less than W positions
    before it and, when not causal, less than W after (z-lab DFlash's `_attention_mask`)."""
    if not causal and window is None:
        return None
    q = np.asarray(query_positions)[:, None]
    k = np.asarray(key_positions)[None, :]
    visible = np.ones((q.shape[0], k.shape[1]), bool)
    if causal:
        visible &= k <= q
    if window is not None:
        visible &= q - k < window
        if not causal:
            visible &= k - q < window
    return visible


# ---------------------------------------------------------------------------------------------
# Sizes and weights of a stack of draft layers


@dataclass(frozen=True, kw_only=True)
class StackConfig:
    """The sizes and arithmetic of a stack of draft layers."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    rope_scaling: dict[str, Any] = field(default_factory=dict)  # rope_type and its fields
    partial_rotary_factor: float = 1.0
    max_position_embeddings: int | None = None
    attention_bias: bool = False
    # Qwen3.5 full attention: norms x_hat * (1 + w), q_proj giving [q | gate] per head
    zero_centred_norms: bool = False
    gated_attention: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def rotary(self, source: str = "config") -> Rotary:
        return make_rotary(self.head_dim, self.rope_theta, self.partial_rotary_factor,
                           self.rope_scaling, self.max_position_embeddings, source)

    def layer_shapes(self, prefix: str) -> dict[str, tuple[int, ...]]:
        """Every tensor of one layer, HF names under `prefix`, HF shapes."""
        H, D, I = self.hidden_size, self.head_dim, self.intermediate_size  # noqa: E741
        Hq, Hkv = self.num_attention_heads, self.num_key_value_heads
        a = prefix + "self_attn."
        out = {
            prefix + "input_layernorm.weight": (H,),
            a + "q_proj.weight": (Hq * D * (2 if self.gated_attention else 1), H),
            a + "k_proj.weight": (Hkv * D, H),
            a + "v_proj.weight": (Hkv * D, H),
            a + "o_proj.weight": (H, Hq * D),
            a + "q_norm.weight": (D,),
            a + "k_norm.weight": (D,),
            prefix + "post_attention_layernorm.weight": (H,),
            prefix + "mlp.gate_proj.weight": (I, H),
            prefix + "mlp.up_proj.weight": (I, H),
            prefix + "mlp.down_proj.weight": (H, I),
        }
        if self.attention_bias:
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                out[a + name + ".bias"] = (out[a + name + ".weight"][0],)
        return out

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def rope_fields(d: dict[str, Any], source: str) -> dict[str, Any]:
    """rope_theta, rope_scaling (the rope dict: `rope_parameters` or the older
    `rope_scaling`) and partial_rotary_factor of a config dict, as transformers merges them."""
    rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise DraftFileError(f"{source}: field 'rope_parameters' must be an object, got "
                             f"{rope!r}")
    theta = d.get("rope_theta", rope.get("rope_theta", 1e6))
    partial = d.get("partial_rotary_factor", rope.get("partial_rotary_factor", 1.0))
    scaling = {k: v for k, v in rope.items() if k not in ("rope_theta", "partial_rotary_factor")}
    return dict(rope_theta=positive_number(theta, "rope_theta", source),
                rope_scaling=scaling,
                partial_rotary_factor=positive_number(partial, "partial_rotary_factor", source))


def read_stack_fields(d: dict[str, Any], source: str) -> dict[str, Any]:
    """The StackConfig fields of a config.json dict, checked; raises `DraftFileError`. The
    sizes are read as a model's are (`onebit.models.config.decoder_sizes`)."""
    sizes = config_fields.decoder_sizes(d, source, DraftFileError)
    heads = sizes["num_attention_heads"]
    if d.get("hidden_act", "silu") != "silu":
        raise DraftFileError(f"{source}: field 'hidden_act' is {d['hidden_act']!r}; only "
                             "'silu' is implemented")
    bias = d.get("attention_bias", False)
    if not isinstance(bias, bool):
        raise DraftFileError(f"{source}: field 'attention_bias' must be true or false, got "
                             f"{bias!r}")
    max_positions = d.get("max_position_embeddings")
    out = dict(
        **sizes,
        rms_norm_eps=positive_number(d.get("rms_norm_eps", 1e-6), "rms_norm_eps", source),
        attention_bias=bias,
        max_position_embeddings=None if max_positions is None else positive_int(
            max_positions, "max_position_embeddings", source),
        **rope_fields(d, source),
    )
    if out["num_attention_heads"] % out["num_key_value_heads"]:
        raise DraftFileError(
            f"{source}: field 'num_key_value_heads' ({out['num_key_value_heads']}) must divide "
            f"num_attention_heads ({heads})"
        )
    if out["head_dim"] % 2:
        raise DraftFileError(f"{source}: field 'head_dim' must be even, got {out['head_dim']}")
    return out


def positive_int(value: Any, name: str, source: str) -> int:
    """The models' field check (`onebit.models.config.positive_int`), as a `DraftFileError`."""
    return config_fields.positive_int(value, name, source, DraftFileError)


def positive_number(value: Any, name: str, source: str) -> float:
    """The models' field check (finite and > 0), as a `DraftFileError`."""
    return config_fields.positive_number(value, name, source, DraftFileError)


@dataclass
class DraftLayer:
    """One layer's weights in the compute dtype, and the sizes its arithmetic needs. Norm
    weights hold the whole factor (`1 + w` already added for zero-centred norms)."""

    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    gated: bool
    rotary: Rotary
    input_norm: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    o: np.ndarray
    q_norm: np.ndarray
    k_norm: np.ndarray
    post_norm: np.ndarray
    gate: np.ndarray
    up: np.ndarray
    down: np.ndarray
    biases: dict[str, np.ndarray | None] = field(default_factory=dict)

    @classmethod
    def from_tensors(cls, tensors: dict[str, np.ndarray], prefix: str, config: StackConfig,
                     rotary: Rotary) -> DraftLayer:
        t = tensors
        a, m = prefix + "self_attn.", prefix + "mlp."

        def norm(name: str) -> np.ndarray:
            w = t[name]
            return (1 + w).astype(w.dtype) if config.zero_centred_norms else w

        return cls(
            heads=config.num_attention_heads, kv_heads=config.num_key_value_heads,
            head_dim=config.head_dim, eps=config.rms_norm_eps,
            gated=config.gated_attention, rotary=rotary,
            input_norm=norm(prefix + "input_layernorm.weight"),
            q=t[a + "q_proj.weight"],
            k=t[a + "k_proj.weight"],
            v=t[a + "v_proj.weight"],
            o=t[a + "o_proj.weight"],
            q_norm=norm(a + "q_norm.weight"),
            k_norm=norm(a + "k_norm.weight"),
            post_norm=norm(prefix + "post_attention_layernorm.weight"),
            gate=t[m + "gate_proj.weight"],
            up=t[m + "up_proj.weight"],
            down=t[m + "down_proj.weight"],
            biases={p: t.get(f"{a}{p}_proj.bias") for p in "qkvo"},
        )

    def norm_in(self, x: np.ndarray) -> np.ndarray:
        return rmsnorm(x, self.input_norm, self.eps)

    def keys_values(self, x: np.ndarray, positions: np.ndarray):
        """Keys (k_norm'd, rotated at `positions`) and values of normed rows `x` `[R, H]`:
        two `[R, Hkv, D]` arrays. This is what a row contributes to others' attention."""
        R, Hkv, D = x.shape[0], self.kv_heads, self.head_dim
        k = linear(self.k, x, self.biases.get("k")).reshape(R, Hkv, D)
        k = rmsnorm(k, self.k_norm, self.eps)
        v = linear(self.v, x, self.biases.get("v")).reshape(R, Hkv, D)
        return self.rotary.apply(k, positions), v

    def queries(self, h: np.ndarray, positions: np.ndarray):
        """Queries `[R, Hq, D]` of normed rows `h`, and the output gate `[R, Hq * D]` (None
        unless gated: Qwen3.5's q_proj gives `[q | gate]` per head)."""
        R, Hq, D = h.shape[0], self.heads, self.head_dim
        q = linear(self.q, h, self.biases.get("q"))
        gate = None
        if self.gated:
            q = q.reshape(R, Hq, 2 * D)
            q, gate = q[:, :, :D], q[:, :, D:].reshape(R, Hq * D)
        q = rmsnorm(q.reshape(R, Hq, D), self.q_norm, self.eps)
        return self.rotary.apply(q, positions), gate

    def attention_out(self, out: np.ndarray, gate: np.ndarray | None) -> np.ndarray:
        """o_proj of the attention output `[R, Hq * D]`, gated by sigmoid(gate) first."""
        if gate is not None:
            out = out * sigmoid(gate)
        return linear(self.o, out, self.biases.get("o"))

    def mlp(self, x: np.ndarray) -> np.ndarray:
        """The second half of the layer: `x + down(silu(gate(h)) * up(h))`, h = norm(x)."""
        h = rmsnorm(x, self.post_norm, self.eps)
        return x + linear(self.down, silu(linear(self.gate, h)) * linear(self.up, h))


def random_stack_tensors(
    shapes: dict[str, tuple[int, ...]], rng: np.random.Generator, *, zero_centred: bool = False
) -> dict[str, np.ndarray]:
    """float32 random weights for `shapes`: norm factors near 1 (stored near 0 when
    zero-centred), projections scaled 1/sqrt(in) so activations stay O(1), small biases."""
    out = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            value = (0.0 if zero_centred else 1.0) + 0.2 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            value = 0.1 * rng.standard_normal(shape)
        else:
            value = rng.standard_normal(shape) / np.sqrt(shape[-1])
        out[name] = value.astype(np.float32)
    return out


class Growing:
    """Rows appended over time (a draft's committed keys or values), viewed as one array."""

    def __init__(self, row_shape: tuple[int, ...], dtype: np.dtype) -> None:
        self._data = np.zeros((16, *row_shape), dtype)
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def append(self, rows: np.ndarray) -> None:
        need = self._length + rows.shape[0]
        if need > self._data.shape[0]:
            grown = np.zeros((max(need, 2 * self._data.shape[0]), *self._data.shape[1:]),
                             self._data.dtype)
            grown[: self._length] = self._data[: self._length]
            self._data = grown
        self._data[self._length : need] = rows
        self._length = need

    def view(self) -> np.ndarray:
        return self._data[: self._length]
