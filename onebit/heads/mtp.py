"""MTP: a multi-token-prediction layer that drafts from the base's hidden after t1.

Two heads share this module's machinery (say which is which, docs/heads.md):
- the **Qwen3-style MTP draft** (`MTPConfig`): a separate draft directory, Qwen3 layers
  (`x * w` norms, full RoPE), every layer run at every step;
- **Qwen3.5's own MTP** (`Qwen35MTPConfig`, qwen3_5_mtp.py): the `mtp.*` weights inside a
  Qwen3.5 / Qwen3-Next checkpoint, Qwen3.5 full-attention layers (gated `q_proj`, partial RoPE,
  `x * (1 + w)` norms), chained step j running layer `j % n` only, as vLLM runs it.

An EAGLE / DeepSeek-style layer on top of the target: it pairs a hidden row (the target's
final-normed hidden at position j) with the embedding of the token that row chose (at j + 1),
projects the concatenation, runs it through a Qwen3-style layer at position j + 1, and scores
the result with the target's lm_head: a guess for position j + 2. Fed its own output and
guess, it drafts further. No embedding or lm_head of its own.

    x     = fc([pre_fc_norm_embedding(embed(token_{j+1})) ; pre_fc_norm_hidden(hidden_j)])
    for each layer of the step:   x += attn(norm x) (causal over the layer's own cache),
                                  x += SwiGLU
    out   = norm(x)        -> lm_head -> the token at j + 2;  out is the next hidden

(The concatenation puts the embedding first, as EAGLE, DeepSeek-V3 and Qwen3-Next do.)

The round is two-pass (docs/contract.md): t1 at `pos` has been stepped and committed, and the
head gets `hidden` = the target's row after it. That row already decides the next token b (the
target's lm_head of it, the same product the base's step ended with), so the first draft is b
and is always accepted; the layer drafts the ones after: (b, hidden) -> d1 at pos + 2, then
(d1, out) -> d2, and so on.

The layer attends to its own keys and values at earlier positions: for each committed pair
(hidden_j, token_{j+1}) the head runs step 0's layers once when token j + 1 is committed and
keeps what they wrote. A proposal's chained rows are kept only while it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onebit.heads import checkpoint
from onebit.heads.choose import SamplingDrafter
from onebit.heads.errors import DraftError, DraftFileError
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
from onebit.heads.target import (
    check_hidden_size,
    check_target,
    embed_rows,
    head_logits,
    pick_tokens,
)

KV = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True, kw_only=True)
class MTPConfig(StackConfig):
    num_hidden_layers: int = 1
    layer_per_step: bool = False  # Qwen3.5: chained step j runs layer j % n only

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
        """A Qwen3-style MTP draft's config.json. Qwen3.5 arithmetic is not switched on by
        keys here (Qwen3.5's own MTP is read from its checkpoint), so they are refused."""
        for key in QWEN3_5_ONLY:
            if raw.get(key):
                raise DraftFileError(f"{source}: field '{key}' is set, but this is a "
                                     "Qwen3-style MTP draft (Qwen3.5's own MTP layers are "
                                     "read from the Qwen3.5 checkpoint itself)")
        return cls(**read_stack_fields(raw, source))

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        for key in QWEN3_5_ONLY:
            d.pop(key)
        return d


QWEN3_5_ONLY = ("zero_centred_norms", "gated_attention", "layer_per_step")


class MTPDraft:
    """The MTP weights and forward (no state: the head keeps the caches)."""

    def __init__(self, config: MTPConfig, tensors: dict[str, np.ndarray],
                 dtype: np.dtype | type = np.float32, *, source: str = "MTP draft") -> None:
        checkpoint.check_shapes(tensors, config.shapes(), source)
        self.config = config
        self.dtype = np.dtype(dtype)
        t = {name: np.asarray(tensors[name], self.dtype) for name in config.shapes()}

        def norm(name: str) -> np.ndarray:  # the whole factor: 1 + w for zero-centred norms
            return (1 + t[name]).astype(self.dtype) if config.zero_centred_norms else t[name]

        self.norm_embedding = norm("pre_fc_norm_embedding.weight")
        self.norm_hidden = norm("pre_fc_norm_hidden.weight")
        self.fc = t["fc.weight"]
        self.norm = norm("norm.weight")
        rotary = config.rotary(source)
        self.layers = [DraftLayer.from_tensors(t, f"layers.{i}.", config, rotary)
                       for i in range(config.num_hidden_layers)]

    def step_layers(self, step: int) -> list[int]:
        """The layers MTP step `step` runs (step 0 drafts from the target's own hidden):
        every layer, or Qwen3.5's one layer `step % n`."""
        n = len(self.layers)
        return [step % n] if self.config.layer_per_step else list(range(n))

    def inputs(self, embeds: np.ndarray, hidden: np.ndarray) -> np.ndarray:
        """`[R, H]` layer inputs from token embeddings and the hidden rows before them."""
        eps = self.config.rms_norm_eps
        both = np.concatenate([rmsnorm(embeds, self.norm_embedding, eps),
                               rmsnorm(hidden, self.norm_hidden, eps)], axis=-1)
        return linear(self.fc, both)

    def forward(self, x: np.ndarray, start: int, past: Sequence[KV], step: int = 0):
        """Rows `x` at positions `start ..` through step `step`'s layers, each attending
        causally to its `past` keys and values (`past[i]`: layer i's) then to the rows up to
        itself. Returns the final-normed rows and {layer: the keys and values it wrote}."""
        c = self.config
        R = x.shape[0]
        positions = start + np.arange(R)
        wrote: dict[int, KV] = {}
        for i in self.step_layers(step):
            layer, (past_k, past_v) = self.layers[i], past[i]
            h = layer.norm_in(x)
            q, gate = layer.queries(h, positions)
            k, v = layer.keys_values(h, positions)
            mask = np.concatenate([np.ones((R, past_k.shape[0]), bool),
                                   np.tril(np.ones((R, R), bool))], axis=1)
            out = attend(q, np.concatenate([past_k, k]), np.concatenate([past_v, v]), mask)
            x = layer.mlp(x + layer.attention_out(out, gate))
            wrote[i] = (k, v)
        return rmsnorm(x, self.norm, c.rms_norm_eps), wrote


class MTPHead(SamplingDrafter):
    """A two-pass `DraftHead` around an `MTPDraft` and its target."""

    def __init__(self, draft: MTPDraft, target: object) -> None:
        check_target(target, "an MTP head")
        check_hidden_size(target, draft.config.hidden_size, "the MTP draft")
        self.draft = draft
        self.target = target
        self.reset()

    def __repr__(self) -> str:
        c = self.draft.config
        kind = "qwen3.5 own" if c.layer_per_step else "qwen3-style"
        return f"MTPHead({kind}, layers={c.num_hidden_layers})"

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
            _, wrote = self.draft.forward(x, start, self._past(), step=0)
            for i, (nk, nv) in wrote.items():
                self._kv[i][0].append(nk)
                self._kv[i][1].append(nv)
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
        drafts, q = self.pick(h)  # b: what the target itself chose
        past = self._past()  # the chain's rows are added to copies, never to the cache
        for i in range(1, k):
            x = self.draft.inputs(embed_rows(self.target, drafts[-1:], 1.0, self.draft.dtype),
                                  h)
            h, wrote = self.draft.forward(x, pos + i, past, step=i - 1)
            for layer, (nk, nv) in wrote.items():
                pk, pv = past[layer]
                past[layer] = (np.concatenate([pk, nk]), np.concatenate([pv, nv]))
            more, q_more = self.pick(h)
            drafts += more
            q = None if q is None else np.concatenate([q, q_more])
        return self.answer(drafts, q)

    def pick(self, rows: np.ndarray) -> tuple[list[int], np.ndarray | None]:
        """Draft tokens of MTP output rows and their q rows (None when greedy): the target's
        lm_head, then `pick_tokens` when greedy, `choose_logits` when sampling."""
        logits = head_logits(self.target, rows)
        if not self.samples:
            return pick_tokens(logits), None
        return self.choose_logits(logits)


# ---------------------------------------------------------------------------------------------
# Files and fabrication


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
