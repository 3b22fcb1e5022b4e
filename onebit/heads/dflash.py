"""DFlash: a block-diffusion drafter that guesses B - 1 tokens in one forward.

The draft is a small Qwen3 stack with no embedding or lm_head of its own: it embeds with the
target's embedding and scores with the target's lm_head, exactly as z-lab's DFlash reference
(`dflash/model.py`) does. For a block after token s at position p, with L committed positions
0 .. p - 1:

    ctx   = hidden_norm(fc(concat_l taps_l))         [L, H]   the target's layer outputs at
                                                              target_layer_ids, per position
    x     = input_embedding_scale * embed([s, mask, ..., mask])   [B, H]  at positions p ..
    for each draft layer:
        h  = norm(x)
        q  = rope(q_norm(q_proj h))                           queries: block rows only
        K  = [rope(k_norm(k_proj ctx)) ; rope(k_norm(k_proj h))]   keys: context, then block
        V  = [v_proj ctx ; v_proj h]
        x += o_proj(softmax(q K^T / sqrt(D)) V)               full layers: NOT causal; causal
                                                              and sliding layers masked by
                                                              absolute position
        x += down(silu(gate(norm x)) * up(norm x))
    rows   = norm(x)                                          the draft's own final norm
    logits = lm_head(rows[i]) * output_multiplier, soft-capped, i = 1 .. B-1 -> position p + i

The target's final norm is NOT applied (the reference computes `lm_head(norm(h))`). The
context's keys and values depend only on committed positions, so the head keeps them per layer
and extends them as tokens are committed; nothing of a block is kept. The config keys read
(and refused) are in dflash_config.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from onebit.heads import checkpoint
from onebit.heads.dflash_config import DFlashConfig
from onebit.heads.errors import DraftError, DraftMismatchError
from onebit.heads.layers import (
    DraftLayer,
    Growing,
    attend,
    linear,
    random_stack_tensors,
    rmsnorm,
    visibility,
)
from onebit.heads.target import (
    check_hidden_size,
    check_target,
    embed_rows,
    final_norm,
    head_logits,
    pick_tokens,
)

TAP_NEEDS = ("vocab_size", "hidden_size", "layer_count", "embed_row", "lm_head_logits",
             "set_layer_taps", "tapped_rows")


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
        rotary = config.rotary(source)
        self.layers = [DraftLayer.from_tensors(t, f"layers.{i}.", config, rotary)
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
        for i, (layer, (ctx_k, ctx_v)) in enumerate(zip(self.layers, context_kv, strict=True)):
            h = layer.norm_in(x)
            q, gate = layer.queries(h, positions)
            k, v = layer.keys_values(h, positions)
            keys, values = np.concatenate([ctx_k, k]), np.concatenate([ctx_v, v])
            causal, window = c.layer_attention(i)
            # the context holds positions 0 .. start-1, so a key's index is its position
            mask = visibility(positions, np.arange(keys.shape[0]), causal=causal, window=window)
            x = x + layer.attention_out(attend(q, keys, values, mask), gate)
            x = layer.mlp(x)
        return rmsnorm(x, self.norm, c.rms_norm_eps)

    def logits(self, target: object, rows: np.ndarray) -> np.ndarray:
        """The reference's `compute_logits`: the target's lm_head on final-normed rows, times
        `output_multiplier`, then soft-capped by `final_logit_softcapping` when set."""
        c = self.config
        logits = head_logits(target, rows)
        if c.output_multiplier != 1.0:
            logits = logits * c.output_multiplier
        if c.final_logit_softcapping is not None:
            cap = c.final_logit_softcapping
            logits = np.tanh(logits / cap) * cap
        return logits

    def context_kv(self, context: np.ndarray, start: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per layer, the keys and values of context rows at positions `start ..`."""
        positions = start + np.arange(context.shape[0])
        return [layer.keys_values(context, positions) for layer in self.layers]


def check_pairing(c: DFlashConfig, target: object) -> None:
    """The fit of a draft's fields to its target (hidden size, tapped layers, mask token,
    vocab_size, num_target_layers); raises `DraftMismatchError`."""
    check_hidden_size(target, c.hidden_size, "the DFlash draft")
    layers = int(target.layer_count)  # type: ignore[attr-defined]
    bad = [i for i in c.target_layer_ids if not 0 <= i < layers]
    if bad:
        raise DraftMismatchError(
            f"the DFlash draft reads target layers {list(c.target_layer_ids)}; the target "
            f"has layers 0..{layers - 1} (no layer {bad[0]})"
        )
    vocab = int(target.vocab_size)  # type: ignore[attr-defined]
    if not 0 <= c.mask_token_id < vocab:
        raise DraftMismatchError(f"the DFlash draft's mask_token_id {c.mask_token_id} is outside "
                                 f"the target's vocabulary [0, {vocab})")
    if c.vocab_size is not None and c.vocab_size != vocab:
        raise DraftMismatchError(f"the DFlash draft's config says vocab_size {c.vocab_size}, "
                                 f"its target has {vocab}: the draft was made for another model")
    if c.num_target_layers is not None and c.num_target_layers != layers:
        raise DraftMismatchError(f"the DFlash draft was made for a target of "
                                 f"{c.num_target_layers} layers (num_target_layers); this one "
                                 f"has {layers}")


class DFlashHead:
    """A one-pass `DraftHead` around a `DFlashDraft` and its target.

    Construction checks the pairing (`check_pairing`) and asks the target to record the
    layers the context is built from (`set_layer_taps`). `commit_rows` reads the target's
    tapped rows of the newly committed positions (only `count` of them) and extends the
    context; `propose` runs one block and returns up to min(k, B - 1) drafts.

    The reference reads the target's `hidden_states[id + 1]`, whose last entry transformers
    returns after the final norm: a tap of the target's last layer goes through the target's
    `final_norm` first, the others are the raw layer outputs.
    """

    def __init__(self, draft: DFlashDraft, target: object) -> None:
        check_target(target, "a DFlash head", TAP_NEEDS)
        c = draft.config
        check_pairing(c, target)
        self.draft = draft
        self.target = target
        last = int(target.layer_count) - 1  # type: ignore[attr-defined]
        self._normed = [j for j, i in enumerate(c.target_layer_ids) if i == last]
        self._final_norm = final_norm(target) if self._normed else None
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
        taps = np.array(taps[self.length : need])
        for j in self._normed:  # the last layer's hidden state, as transformers returns it
            taps[:, j] = self._final_norm(taps[:, j])
        context = self.draft.context(taps)
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
        x = embed_rows(self.target, tokens, c.input_embedding_scale, self.draft.dtype)
        rows = self.draft.block(x, pos, [(k_.view(), v_.view()) for k_, v_ in self._kv])
        return pick_tokens(self.draft.logits(self.target, rows[1 : 1 + n]))


# ---------------------------------------------------------------------------------------------
# Files and fabrication


def load_dflash(path: str | Path, target: object) -> DFlashHead:
    """Load the DFlash draft in directory `path` (config.json + *.safetensors, the published
    layout) as a head on `target`. Bad files raise `DraftFileError`, a misfit
    `DraftMismatchError`."""
    raw, source = checkpoint.read_config(path)
    config = DFlashConfig.from_dict(raw, source)
    tensors = checkpoint.strip_prefix(checkpoint.read_tensors(path), ("model.",))
    checkpoint.check_known(tensors, config.shapes(), str(path), "a DFlashDraftModel")
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
        num_target_layers=layers,
        vocab_size=int(target.vocab_size),  # type: ignore[attr-defined]
        max_position_embeddings=40960,
    )
    fields.update(overrides)
    fields["target_layer_ids"] = tuple(fields["target_layer_ids"])
    return DFlashConfig(**fields)


def random_dflash_tensors(config: DFlashConfig, seed: int = 0) -> dict[str, np.ndarray]:
    return random_stack_tensors(config.shapes(), np.random.default_rng(seed))


def fabricate_dflash(path: str | Path, target: object, *, seed: int = 0,
                     **overrides: Any) -> Path:
    """Write a tiny random DFlash draft for `target` to directory `path`, in the published
    layout (config.json as z-lab writes it, BF16 tensors named as theirs); returns it."""
    config = tiny_dflash_config(target, **overrides)
    return checkpoint.write_draft(path, config.published(), random_dflash_tensors(config, seed))
