"""MTP: a multi-token-prediction layer that drafts from the base's hidden after t1.

An EAGLE / DeepSeek-style layer on top of the target: it pairs a hidden row (the target's
final-normed hidden at position j) with the embedding of the token that row chose (at j + 1),
projects the concatenation, runs it through a Qwen3-style layer at position j + 1, and scores
the result with the target's lm_head: a guess for position j + 2. Fed its own output and
guess, it drafts further. No embedding or lm_head of its own.

    x     = fc([pre_fc_norm_embedding(embed(token_{j+1})) ; pre_fc_norm_hidden(hidden_j)])
    for each layer:   x += attn(norm x)  (causal over the layer's own cache),  x += SwiGLU
    out   = norm(x)        -> lm_head -> the token at j + 2;  out is the next hidden

(The concatenation puts the embedding first, as EAGLE, DeepSeek-V3 and Qwen3-Next do.)

The round is two-pass (docs/contract.md): t1 at `pos` has been stepped and committed, and the
head gets `hidden` = the target's row after it. That row already decides the next token b (the
target's lm_head of it, the same product the base's step ended with), so the first draft is b
and is always accepted; the layer drafts the ones after: (b, hidden) -> d1 at pos + 2, then
(d1, out) -> d2, and so on.

The layer attends to its own keys and values at earlier positions: for each committed pair
(hidden_j, token_{j+1}) the head runs the layer once when token j + 1 is committed and keeps
what it wrote. A proposal's chained rows are kept only while it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onebit.heads import checkpoint
from onebit.heads.errors import DraftError
from onebit.heads.layers import (
    DraftLayer,
    Growing,
    StackConfig,
    attend,
    linear,
    random_stack_tensors,
    read_stack_fields,
    rmsnorm,
)
from onebit.heads.target import argmax_tokens, check_hidden_size, check_target, embed_rows


@dataclass(frozen=True, kw_only=True)
class MTPConfig(StackConfig):
    num_hidden_layers: int = 1

    def shapes(self) -> dict[str, tuple[int, ...]]:
        H = self.hidden_size
        out = {
            "pre_fc_norm_embedding.weight": (H,),
            "pre_fc_norm_hidden.weight": (H,),
            "fc.weight": (H, 2 * H),
            "norm.weight": (H,),
        }
        for i in range(self.num_hidden_layers):
            out.update(self.layer_shapes(f"layers.{i}."))
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "config.json") -> MTPConfig:
        return cls(**read_stack_fields(raw, source))


class MTPDraft:
    """The MTP weights and forward (no state: the head keeps the caches)."""

    def __init__(self, config: MTPConfig, tensors: dict[str, np.ndarray],
                 dtype: np.dtype | type = np.float32, *, source: str = "MTP draft") -> None:
        checkpoint.check_shapes(tensors, config.shapes(), source)
        self.config = config
        self.dtype = np.dtype(dtype)
        t = {name: np.asarray(tensors[name], self.dtype) for name in config.shapes()}
        self.norm_embedding = t["pre_fc_norm_embedding.weight"]
        self.norm_hidden = t["pre_fc_norm_hidden.weight"]
        self.fc = t["fc.weight"]
        self.norm = t["norm.weight"]
        self.layers = [DraftLayer.from_tensors(t, f"layers.{i}.")
                       for i in range(config.num_hidden_layers)]

    def inputs(self, embeds: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """`[R, H]` layer inputs from token embeddings and the hidden rows before them."""
        eps = self.config.rms_norm_eps
        both = np.concatenate([rmsnorm(embeds, self.norm_embedding, eps),
                               rmsnorm(hidden, self.norm_hidden, eps)], axis=-1)
        return linear(self.fc, both)

    def forward(self, x: np.ndarray, start: int, past: Sequence[tuple[np.ndarray, np.ndarray]]):
        """Rows `x` at positions `start ..`, each layer attending causally to its `past` keys
        and values then to the rows up to itself. Returns the final-normed rows and, per
        layer, the keys and values the rows wrote."""
        c = self.config
        R = x.shape[0]
        positions = start + np.arange(R)
        wrote = []
        for layer, (past_k, past_v) in zip(self.layers, past, strict=True):
            h = rmsnorm(x, layer.input_norm, c.rms_norm_eps)
            q = layer.queries(c, h, positions)
            k, v = layer.keys_values(c, h, positions)
            mask = np.concatenate([np.ones((R, past_k.shape[0]), bool),
                                   np.tril(np.ones((R, R), bool))], axis=1)
            out = attend(q, np.concatenate([past_k, k]), np.concatenate([past_v, v]), mask)
            x = layer.mlp(c, x + linear(layer.o, out))
            wrote.append((k, v))
        return rmsnorm(x, self.norm, c.rms_norm_eps), wrote


class MTPHead:
    """A two-pass `DraftHead` around an `MTPDraft` and its target."""

    def __init__(self, draft: MTPDraft, target: object) -> None:
        check_target(target, "an MTP head")
        check_hidden_size(target, draft.config.hidden_size, "the MTP draft")
        self.draft = draft
        self.target = target
        self.reset()

    def __repr__(self) -> str:
        return f"MTPHead(layers={self.draft.config.num_hidden_layers})"

    def needs_last_hidden(self) -> bool:
        return True

    def reset(self) -> None:
        c, dtype = self.draft.config, self.draft.dtype
        shape = (c.num_key_value_heads, c.head_dim)
        self._kv = [(Growing(shape, dtype), Growing(shape, dtype)) for _ in self.draft.layers]
        self.length = 0  # committed positions
        self._last_row: np.ndarray | None = None  # hidden of the last committed position

    def _past(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(k.view(), v.view()) for k, v in self._kv]

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        if count <= 0:
            return
        committed = np.asarray(rows[:count], self.draft.dtype)
        hidden = committed[:-1]
        if self._last_row is not None:  # the previous call's last row pairs with tokens[0]
            hidden = np.concatenate([self._last_row[None], hidden])
        paired = [int(t) for t in tokens[:count]][count - hidden.shape[0]:]
        if paired:
            x = self.draft.inputs(embed_rows(self.target, paired, 1.0, self.draft.dtype),
                                  hidden)
            start = self.length + count - len(paired)
            _, wrote = self.draft.forward(x, start, self._past())
            for (k, v), (nk, nv) in zip(self._kv, wrote, strict=True):
                k.append(nk)
                v.append(nv)
        self._last_row = committed[-1].copy()
        self.length += count

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None) -> list[int]:
        if k < 1:
            return []
        if hidden is None:
            raise DraftError("MTP head: propose needs the target's hidden after t1 (it is a "
                             "two-pass head)")
        if pos + 1 != self.length:
            raise DraftError(f"MTP head asked to draft after t1 at position {pos}, but "
                             f"{self.length} positions are committed (t1 must be the last)")
        h = np.asarray(hidden, self.draft.dtype)[None]
        drafts = argmax_tokens(self.target, h)  # b: what the target itself chose
        past = self._past()  # the chain's rows are added to copies, never to the cache
        for i in range(1, k):
            x = self.draft.inputs(embed_rows(self.target, drafts[-1:], 1.0, self.draft.dtype),
                                  h)
            h, wrote = self.draft.forward(x, pos + i, past)
            past = [(np.concatenate([pk, nk]), np.concatenate([pv, nv]))
                    for (pk, pv), (nk, nv) in zip(past, wrote, strict=True)]
            drafts += argmax_tokens(self.target, h)
        return drafts


# ---------------------------------------------------------------------------------------------
# Files and fabrication


def load_mtp(path: str | Path, target: object) -> MTPHead:
    """Load the MTP draft in directory `path` (config.json + *.safetensors; names may carry a
    `mtp.` or `model.mtp.` prefix) as a head on `target`."""
    raw, source = checkpoint.read_config(path)
    config = MTPConfig.from_dict(raw, source)
    tensors = checkpoint.strip_prefix(checkpoint.read_tensors(path), ("model.mtp.", "mtp."))
    dtype = getattr(target, "dtype", np.float32)
    return MTPHead(MTPDraft(config, tensors, dtype, source=str(path)), target)


def tiny_mtp_config(target: object, **overrides: Any) -> MTPConfig:
    """A one-layer MTP config sized for `target`."""
    fields: dict[str, Any] = dict(
        hidden_size=int(target.hidden_size),  # type: ignore[attr-defined]
        num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        intermediate_size=256,
    )
    fields.update(overrides)
    return MTPConfig(**fields)


def random_mtp_tensors(config: MTPConfig, seed: int = 0) -> dict[str, np.ndarray]:
    return random_stack_tensors(config.shapes(), np.random.default_rng(seed))


def fabricate_mtp(path: str | Path, target: object, *, seed: int = 0, **overrides: Any) -> Path:
    """Write a tiny random MTP draft for `target` to directory `path`; returns it."""
    config = tiny_mtp_config(target, **overrides)
    return checkpoint.write_draft(path, config.to_dict(), random_mtp_tensors(config, seed))
