"""The transformer pieces the weighted draft heads (DFlash, MTP) are built from.

A draft layer is Qwen3's: RMSNorm, attention (q/k/v projections, per-head q_norm / k_norm,
rotate-half RoPE at absolute positions, GQA, softmax scaled by 1/sqrt(D)), RMSNorm, SwiGLU,
each added to the residual stream. What differs between heads is only which keys a query may
see, so `attend` takes the keys, values and an optional mask explicitly.

Linear weights are stored as HuggingFace stores them, `[out, in]`: `linear(w, x) = x @ w.T`.
Drafts need no batch invariance (a draft is a guess; the base checks it), so plain numpy
products are used throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from onebit.heads.errors import DraftFileError


def linear(weight: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`x @ weight.T` for a weight stored `[out, in]`."""
    return x @ weight.T


def rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm over the last axis: `x / sqrt(mean(x^2) + eps) * w`."""
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def rope(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """Rotate-half RoPE over every dim of each head: `x` is `[R, heads, D]`, row r at
    `positions[r]`. The angles are computed in float64, then rounded to x's dtype."""
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq  # [R, D/2]
    cos = np.cos(angles).astype(x.dtype)[:, None, :]
    sin = np.sin(angles).astype(x.dtype)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


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


# ---------------------------------------------------------------------------------------------
# Sizes and weights of a stack of draft layers


@dataclass(frozen=True, kw_only=True)
class StackConfig:
    """The sizes of a Qwen3-style stack of draft layers."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def layer_shapes(self, prefix: str) -> dict[str, tuple[int, ...]]:
        """Every tensor of one layer, HF names under `prefix`, HF shapes."""
        H, D, I = self.hidden_size, self.head_dim, self.intermediate_size  # noqa: E741
        Hq, Hkv = self.num_attention_heads, self.num_key_value_heads
        return {
            prefix + "input_layernorm.weight": (H,),
            prefix + "self_attn.q_proj.weight": (Hq * D, H),
            prefix + "self_attn.k_proj.weight": (Hkv * D, H),
            prefix + "self_attn.v_proj.weight": (Hkv * D, H),
            prefix + "self_attn.o_proj.weight": (H, Hq * D),
            prefix + "self_attn.q_norm.weight": (D,),
            prefix + "self_attn.k_norm.weight": (D,),
            prefix + "post_attention_layernorm.weight": (H,),
            prefix + "mlp.gate_proj.weight": (I, H),
            prefix + "mlp.up_proj.weight": (I, H),
            prefix + "mlp.down_proj.weight": (H, I),
        }

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def read_stack_fields(d: dict[str, Any], source: str) -> dict[str, Any]:
    """The StackConfig fields of a config.json dict, checked; raises `DraftFileError`."""

    def need(name: str) -> Any:
        if d.get(name) is None:
            raise DraftFileError(f"{source}: missing field '{name}'")
        return d[name]

    hidden = positive_int(need("hidden_size"), "hidden_size", source)
    heads = positive_int(need("num_attention_heads"), "num_attention_heads", source)
    out = dict(
        hidden_size=hidden,
        num_hidden_layers=positive_int(need("num_hidden_layers"), "num_hidden_layers", source),
        num_attention_heads=heads,
        num_key_value_heads=positive_int(
            d.get("num_key_value_heads", heads), "num_key_value_heads", source
        ),
        head_dim=positive_int(d.get("head_dim") or hidden // heads, "head_dim", source),
        intermediate_size=positive_int(need("intermediate_size"), "intermediate_size", source),
        rms_norm_eps=positive_number(d.get("rms_norm_eps", 1e-6), "rms_norm_eps", source),
        rope_theta=positive_number(
            d.get("rope_theta", (d.get("rope_parameters") or {}).get("rope_theta", 1e6)),
            "rope_theta",
            source,
        ),
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
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise DraftFileError(f"{source}: field '{name}' must be a positive integer, got {value!r}")
    return value


def positive_number(value: Any, name: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise DraftFileError(f"{source}: field '{name}' must be a positive number, got {value!r}")
    return float(value)


@dataclass
class DraftLayer:
    """One layer's weights, in the compute dtype."""

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

    @classmethod
    def from_tensors(cls, tensors: dict[str, np.ndarray], prefix: str) -> DraftLayer:
        t = tensors
        a, m = prefix + "self_attn.", prefix + "mlp."
        return cls(
            input_norm=t[prefix + "input_layernorm.weight"],
            q=t[a + "q_proj.weight"],
            k=t[a + "k_proj.weight"],
            v=t[a + "v_proj.weight"],
            o=t[a + "o_proj.weight"],
            q_norm=t[a + "q_norm.weight"],
            k_norm=t[a + "k_norm.weight"],
            post_norm=t[prefix + "post_attention_layernorm.weight"],
            gate=t[m + "gate_proj.weight"],
            up=t[m + "up_proj.weight"],
            down=t[m + "down_proj.weight"],
        )

    def keys_values(self, c: StackConfig, x: np.ndarray, positions: np.ndarray):
        """Keys (k_norm'd, rotated at `positions`) and values of rows `x` `[R, H]`:
        two `[R, Hkv, D]` arrays. This is what a row contributes to others' attention."""
        R, Hkv, D = x.shape[0], c.num_key_value_heads, c.head_dim
        k = rmsnorm(linear(self.k, x).reshape(R, Hkv, D), self.k_norm, c.rms_norm_eps)
        return rope(k, positions, c.rope_theta), linear(self.v, x).reshape(R, Hkv, D)

    def queries(self, c: StackConfig, h: np.ndarray, positions: np.ndarray) -> np.ndarray:
        R, Hq, D = h.shape[0], c.num_attention_heads, c.head_dim
        q = rmsnorm(linear(self.q, h).reshape(R, Hq, D), self.q_norm, c.rms_norm_eps)
        return rope(q, positions, c.rope_theta)

    def mlp(self, c: StackConfig, x: np.ndarray) -> np.ndarray:
        """The second half of the layer: `x + down(silu(gate(h)) * up(h))`, h = norm(x)."""
        h = rmsnorm(x, self.post_norm, c.rms_norm_eps)
        return x + linear(self.down, silu(linear(self.gate, h)) * linear(self.up, h))


def random_stack_tensors(
    shapes: dict[str, tuple[int, ...]], rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """float32 random weights for `shapes`: norms near 1, projections scaled 1/sqrt(in) so
    activations stay O(1)."""
    out = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            value = 1.0 + 0.2 * rng.standard_normal(shape)
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
