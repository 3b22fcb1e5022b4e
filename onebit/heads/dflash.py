"""DFlash: a block-diffusion drafter that guesses B - 1 tokens in one forward.

The draft is a small Qwen3-style stack with no embedding or lm_head of its own: it embeds with
the target's embedding and scores with the target's lm_head. For a block after token s at
position p (docs/heads.md), with L committed positions 0 .. p - 1:

    ctx   = hidden_norm(fc(concat_l taps_l))         [L, H]   the target's layer outputs at
                                                              target_layer_ids, per position
    x     = embedding_scale * embed([s, mask, ..., mask])     [B, H]  at positions p .. p+B-1
    for each draft layer:
        h  = norm(x)
        q  = rope(q_norm(q_proj h))                           queries: block rows only
        K  = [rope(k_norm(k_proj ctx)) ; rope(k_norm(k_proj h))]   keys: context, then block
        V  = [v_proj ctx ; v_proj h]
        x += o_proj(softmax(q K^T / sqrt(D)) V)               NOT causal inside the block
        x += down(silu(gate(norm x)) * up(norm x))
    rows  = norm(x)                                           the draft's final norm
    draft_i = argmax lm_head(target_final_norm(rows[i])),  i = 1 .. B-1  -> position p + i

The context's keys and values depend only on committed positions, so the head keeps them per
layer and extends them as tokens are committed; nothing of a block is kept.

`target_norm` (config field, default True, as drafts.md says): whether the block rows go
through the target's final norm before its lm_head. The z-lab DFlash reference feeds the
draft's own final norm straight into the target's lm_head; set `"target_norm": false` in a
draft's config.json to load such a checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onebit.heads import checkpoint
from onebit.heads.errors import DraftError, DraftFileError, DraftMismatchError
from onebit.heads.layers import (
    DraftLayer,
    Growing,
    StackConfig,
    attend,
    linear,
    positive_int,
    positive_number,
    random_stack_tensors,
    read_stack_fields,
    rmsnorm,
)
from onebit.heads.target import (
    argmax_tokens,
    check_hidden_size,
    check_target,
    embed_rows,
    final_norm,
)

TAP_NEEDS = ("vocab_size", "hidden_size", "layer_count", "embed_row", "lm_head_logits",
             "set_layer_taps", "tapped_rows")


@dataclass(frozen=True, kw_only=True)
class DFlashConfig(StackConfig):
    block_size: int
    target_layer_ids: tuple[int, ...]
    mask_token_id: int
    embedding_scale: float = 1.0
    target_norm: bool = True

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor the draft reads, by name, with its `[out, in]` shape."""
        H = self.hidden_size
        out = {
            "fc.weight": (H, len(self.target_layer_ids) * H),
            "hidden_norm.weight": (H,),
            "norm.weight": (H,),
        }
        for i in range(self.num_hidden_layers):
            out.update(self.layer_shapes(f"layers.{i}."))
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "config.json") -> DFlashConfig:
        """Read a draft's config.json: flat, or with the DFlash fields under `dflash_config`
        (as the z-lab checkpoints write them)."""
        d = {**raw, **(raw.get("dflash_config") or {})}
        stack = read_stack_fields(d, source)
        for name in ("block_size", "target_layer_ids", "mask_token_id"):
            if d.get(name) is None:
                raise DraftFileError(f"{source}: missing field '{name}'")
        block = positive_int(d["block_size"], "block_size", source)
        if block < 2:
            raise DraftFileError(f"{source}: field 'block_size' must be >= 2 (a block of B "
                                 f"gives B - 1 drafts), got {block}")
        ids = d["target_layer_ids"]
        if (not isinstance(ids, list | tuple) or not ids
                or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                           for i in ids)):
            raise DraftFileError(f"{source}: field 'target_layer_ids' must be a non-empty "
                                 f"list of layer ids >= 0, got {ids!r}")
        mask = d["mask_token_id"]
        if isinstance(mask, bool) or not isinstance(mask, int) or mask < 0:
            raise DraftFileError(f"{source}: field 'mask_token_id' must be a token id, "
                                 f"got {mask!r}")
        return cls(
            **stack,
            block_size=block,
            target_layer_ids=tuple(ids),
            mask_token_id=mask,
            embedding_scale=positive_number(d.get("embedding_scale", 1.0), "embedding_scale",
                                            source),
            target_norm=bool(d.get("target_norm", True)),
        )


class DFlashDraft:
    """The draft's weights and its forward (no state: the head keeps the context)."""

    def __init__(self, config: DFlashConfig, tensors: dict[str, np.ndarray],
                 dtype: np.dtype | type = np.float32, *, source: str = "DFlash draft") -> None:
        checkpoint.check_shapes(tensors, config.shapes(), source)
        self.config = config
        self.dtype = np.dtype(dtype)
        t = {name: np.asarray(tensors[name], self.dtype) for name in config.shapes()}
        self.fc = t["fc.weight"]
        self.hidden_norm = t["hidden_norm.weight"]
        self.norm = t["norm.weight"]
        self.layers = [DraftLayer.from_tensors(t, f"layers.{i}.")
                       for i in range(config.num_hidden_layers)]

    def context(self, taps: np.ndarray) -> np.ndarray:
        """`[L, H]` context rows from the target's taps `[L, len(ids), H]`."""
        c = self.config
        flat = np.asarray(taps, self.dtype).reshape(taps.shape[0], -1)
        return rmsnorm(linear(self.fc, flat), self.hidden_norm, c.rms_norm_eps)

    def block(self, x: np.ndarray, start: int,
              context_kv: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """The final-normed rows of a block `x` `[B, H]` (embedded, scaled) at positions
        `start ..`, each layer attending to its context keys / values first."""
        c = self.config
        positions = start + np.arange(x.shape[0])
        for layer, (ctx_k, ctx_v) in zip(self.layers, context_kv, strict=True):
            h = rmsnorm(x, layer.input_norm, c.rms_norm_eps)
            q = layer.queries(c, h, positions)
            k, v = layer.keys_values(c, h, positions)
            keys, values = np.concatenate([ctx_k, k]), np.concatenate([ctx_v, v])
            x = x + linear(layer.o, attend(q, keys, values))  # no mask: non-causal
            x = layer.mlp(c, x)
        return rmsnorm(x, self.norm, c.rms_norm_eps)

    def context_kv(self, context: np.ndarray, start: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per layer, the keys and values of context rows at positions `start ..`."""
        positions = start + np.arange(context.shape[0])
        return [layer.keys_values(self.config, context, positions) for layer in self.layers]


class DFlashHead:
    """A one-pass `DraftHead` around a `DFlashDraft` and its target.

    Construction checks the pairing (hidden size, layer ids, mask token) and asks the target
    to record the layers the context is built from (`set_layer_taps`). `commit_rows` reads
    the target's tapped rows of the newly committed positions (only `count` of them) and
    extends the context; `propose` runs one block and returns up to min(k, B - 1) drafts.
    """

    def __init__(self, draft: DFlashDraft, target: object) -> None:
        check_target(target, "a DFlash head", TAP_NEEDS)
        c = draft.config
        check_hidden_size(target, c.hidden_size, "the DFlash draft")
        layers = int(target.layer_count)  # type: ignore[attr-defined]
        bad = [i for i in c.target_layer_ids if not 0 <= i < layers]
        if bad:
            raise DraftMismatchError(
                f"the DFlash draft reads target layers {list(c.target_layer_ids)}; the target "
                f"has layers 0..{layers - 1} (no layer {bad[0]})"
            )
        if not 0 <= c.mask_token_id < int(target.vocab_size):  # type: ignore[attr-defined]
            raise DraftMismatchError(
                f"the DFlash draft's mask_token_id {c.mask_token_id} is outside the target's "
                f"vocabulary [0, {target.vocab_size})"  # type: ignore[attr-defined]
            )
        self.draft = draft
        self.target = target
        self._norm = final_norm(target) if c.target_norm else (lambda rows: rows)
        target.set_layer_taps(list(c.target_layer_ids))  # type: ignore[attr-defined]
        self.reset()

    def __repr__(self) -> str:
        c = self.draft.config
        return f"DFlashHead(block_size={c.block_size}, layers={c.num_hidden_layers})"

    @property
    def block_size(self) -> int:
        return self.draft.config.block_size

    def needs_last_hidden(self) -> bool:
        return False

    def reset(self) -> None:
        c, dtype = self.draft.config, self.draft.dtype
        shape = (c.num_key_value_heads, c.head_dim)
        self._kv = [(Growing(shape, dtype), Growing(shape, dtype)) for _ in self.draft.layers]
        self.length = 0  # committed positions in the context

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        if count <= 0:
            return
        taps = self.target.tapped_rows()  # type: ignore[attr-defined]
        need = self.length + count
        if taps.shape[0] < need:
            raise DraftError(
                f"DFlash head: the target has recorded layer outputs for {taps.shape[0]} "
                f"positions, but {need} are committed; was the target reset or its layer "
                "taps changed after the head was built?"
            )
        context = self.draft.context(taps[self.length : need])
        for (k, v), (ck, cv) in zip(self._kv, self.draft.context_kv(context, self.length),
                                    strict=True):
            k.append(ck)
            v.append(cv)
        self.length = need

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None) -> list[int]:
        c = self.draft.config
        n = min(int(k), c.block_size - 1)
        if n < 1:
            return []
        if pos != self.length:
            raise DraftError(f"DFlash head asked to draft after position {pos}, but its "
                             f"context holds {self.length} committed positions")
        tokens = [int(token)] + [c.mask_token_id] * (c.block_size - 1)
        x = embed_rows(self.target, tokens, c.embedding_scale, self.draft.dtype)
        rows = self.draft.block(x, pos, [(k_.view(), v_.view()) for k_, v_ in self._kv])
        return argmax_tokens(self.target, self._norm(rows[1 : 1 + n]))


# ---------------------------------------------------------------------------------------------
# Files and fabrication


def load_dflash(path: str | Path, target: object) -> DFlashHead:
    """Load the DFlash draft in directory `path` (config.json + *.safetensors) as a head on
    `target`. Bad files raise `DraftFileError`, a misfit `DraftMismatchError`."""
    raw, source = checkpoint.read_config(path)
    config = DFlashConfig.from_dict(raw, source)
    tensors = checkpoint.strip_prefix(checkpoint.read_tensors(path), ("model.",))
    dtype = getattr(target, "dtype", np.float32)
    return DFlashHead(DFlashDraft(config, tensors, dtype, source=str(path)), target)


def tiny_dflash_config(target: object, **overrides: Any) -> DFlashConfig:
    """A small DFlash config sized for `target` (hidden size, layers and vocabulary read from
    it): one layer, block of 4, tapping the first and last target layers."""
    layers = int(target.layer_count)  # type: ignore[attr-defined]
    fields: dict[str, Any] = dict(
        hidden_size=int(target.hidden_size),  # type: ignore[attr-defined]
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=256,
        block_size=4,
        target_layer_ids=tuple(sorted({0, layers - 1})),
        mask_token_id=int(target.vocab_size) - 1,  # type: ignore[attr-defined]
    )
    fields.update(overrides)
    fields["target_layer_ids"] = tuple(fields["target_layer_ids"])
    return DFlashConfig(**fields)


def random_dflash_tensors(config: DFlashConfig, seed: int = 0) -> dict[str, np.ndarray]:
    return random_stack_tensors(config.shapes(), np.random.default_rng(seed))


def fabricate_dflash(path: str | Path, target: object, *, seed: int = 0,
                     **overrides: Any) -> Path:
    """Write a tiny random DFlash draft for `target` to directory `path`; returns it."""
    config = tiny_dflash_config(target, **overrides)
    return checkpoint.write_draft(path, config.to_dict(), random_dflash_tensors(config, seed))
