"""The gated delta net (GDN) token mixer of the Qwen3.5 hybrid ("linear_attention" layers).

Per token (docs/forward.md, and transformers' Qwen3_5GatedDeltaNet in its decode form):

    qkv = in_proj_qkv(h)                 C = 2*Hk*dk + Hv*dv channels
    z, b, a = in_proj_z(h), in_proj_b(h), in_proj_a(h)
    qkv = silu(causal depthwise conv1d(qkv))   kernel K over this token and the K-1 before it
    q, k, v = split(qkv)                 Hk heads of dk, Hk heads of dk, Hv heads of dv
    q, k = l2norm(q), l2norm(k);  q /= sqrt(dk)
    q, k repeated up to Hv heads         v-head h reads k-head h // (Hv / Hk)
    beta = sigmoid(b);  decay = exp(-exp(A_log) * softplus(a + dt_bias))
    per v-head:  S *= decay;  S += k outer (beta * (v - S^T k));  o = S^T q
    out_proj(rmsnorm_gated(o) * silu(z))  the norm is per head, weight NOT zero-centred

The state is the conv window (the last K-1 *inputs* of the conv, oldest first) and the
recurrent matrix S[Hv, dk, dv]. Neither can be cropped after the fact, so the forward keeps
one snapshot per row of a verify batch and `commit_verify(n)` restores row n-1's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onebit.models.config import ModelConfig


@dataclass
class GDNState:
    conv: np.ndarray  # [K-1, C], the last K-1 conv inputs, oldest first
    recurrent: np.ndarray  # [Hv, dk, dv]

    @classmethod
    def zeros(cls, config: ModelConfig, dtype: np.dtype) -> GDNState:
        c = config
        return cls(
            np.zeros((c.linear_conv_kernel_dim - 1, c.conv_dim), dtype=dtype),
            np.zeros(
                (c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim),
                dtype=dtype,
            ),
        )

    def copy(self) -> GDNState:
        return GDNState(self.conv.copy(), self.recurrent.copy())


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def softplus(x: np.ndarray) -> np.ndarray:
    # torch's softplus (threshold 20): linear where exp would only add rounding error
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def l2norm(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Normalise the last axis to unit length (the FLA / transformers form: eps inside)."""
    return x / np.sqrt((x * x).sum(axis=-1, keepdims=True) + eps)


def gdn_token(
    config: ModelConfig,
    state: GDNState,
    qkv: np.ndarray,  # [C], this token's in_proj_qkv output
    b: np.ndarray,  # [Hv]
    a: np.ndarray,  # [Hv]
    conv_weight: np.ndarray,  # [C, K]
    a_log: np.ndarray,  # [Hv]
    dt_bias: np.ndarray,  # [Hv]
) -> tuple[np.ndarray, GDNState]:
    """One token through the conv and the delta-rule recurrence.

    Returns the core output `o[Hv, dv]` (before the gated norm) and the new state; `state` is
    not modified, so a verify batch can keep every row's state as its snapshot.
    """
    c = config
    Hk, Hv = c.linear_num_key_heads, c.linear_num_value_heads
    dk, dv = c.linear_key_head_dim, c.linear_value_head_dim

    # Causal depthwise conv: this token and the K-1 inputs before it (oldest first), one
    # kernel per channel, then SiLU. The window minus its oldest row is the next conv state.
    window = np.concatenate([state.conv, qkv[None, :]], axis=0)  # [K, C]
    mixed = silu((window * conv_weight.T).sum(axis=0))

    q = mixed[: Hk * dk].reshape(Hk, dk)
    k = mixed[Hk * dk : 2 * Hk * dk].reshape(Hk, dk)
    v = mixed[2 * Hk * dk :].reshape(Hv, dv)

    # Unit-length q and k keep the delta rule a stable projection; q also gets 1/sqrt(dk).
    q = l2norm(q) / np.sqrt(dk).astype(q.dtype)
    k = l2norm(k)
    group = Hv // Hk  # consecutive v-heads share a k-head
    q = np.repeat(q, group, axis=0)  # [Hv, dk]
    k = np.repeat(k, group, axis=0)

    # beta: how much of this token's correction is written; decay in (0, 1): how much of
    # the old memory survives this token.
    beta = sigmoid(b)
    decay = np.exp(-np.exp(a_log) * softplus(a + dt_bias))

    S = state.recurrent * decay[:, None, None]  # [Hv, dk, dv]
    remembered = (S * k[:, :, None]).sum(axis=1)  # S^T k: what S recalls for k, [Hv, dv]
    delta = (v - remembered) * beta[:, None]  # the delta rule writes only the error
    S = S + k[:, :, None] * delta[:, None, :]
    o = (S * q[:, :, None]).sum(axis=1)  # S^T q, [Hv, dv]
    return o, GDNState(window[1:].copy(), S)


def gated_norm(o: np.ndarray, z: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm of each head's output (weight used as is, not 1 + w), gated by silu(z)."""
    variance = (o * o).mean(axis=-1, keepdims=True)
    return weight * (o / np.sqrt(variance + eps)) * silu(z)
