"""Qwen3.5's own MTP head: the `mtp.*` weights a Qwen3.5 checkpoint ships next to its model.

A Qwen3.5 (multimodal: text fields under `text_config`) checkpoint counts its MTP layers in
`mtp_num_hidden_layers` and stores, beside `model.language_model.*` and `lm_head.weight`:

    mtp.pre_fc_norm_embedding.weight  [H]       zero-centred: the factor is 1 + w
    mtp.pre_fc_norm_hidden.weight     [H]
    mtp.fc.weight                     [H, 2H]   over [norm(embed(token)) ; norm(hidden)]
    mtp.layers.N.*                    a Qwen3.5 full-attention decoder layer: q_proj [2*Hq*D, H]
                                      (query and output gate per head), k/v/o, q_norm/k_norm,
                                      input/post norms, dense SwiGLU mlp
    mtp.norm.weight                   [H]

vLLM (`qwen3_5_mtp.py`) runs chained step j through layer `j % n` alone, with the target's
embedding and lm_head; `MTPDraft` with `layer_per_step` does the same (mtp.py). The layer's
arithmetic is the Qwen3.5 forward's full attention: partial rotary (`partial_rotary_factor`,
0.25 by default), `x * (1 + w)` norms, `attn * sigmoid(gate)` before o_proj.

Only the `mtp.*` tensors are read, from the shards the index names for them (never the whole
target). Refused by name: MoE MTP layers (`mlp.experts.*`, `num_experts`), dedicated MTP
embeddings (`mtp_use_dedicated_embeddings`), a checkpoint with 0 MTP layers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onebit.heads import checkpoint
from onebit.heads.errors import DraftFileError
from onebit.heads.layers import random_stack_tensors, read_stack_fields
from onebit.heads.mtp import MTPConfig, MTPDraft, MTPHead

PREFIXES = ("mtp.", "model.mtp.")
DEFAULT_PARTIAL_ROTARY = 0.25  # Qwen3_5TextConfig's default
MOE_MARKERS = (".mlp.experts.", ".mlp.gate.weight", ".mlp.shared_expert")


@dataclass(frozen=True, kw_only=True)
class Qwen35MTPConfig(MTPConfig):
    """A Qwen3.5 MTP stack: Qwen3.5 full-attention layers, one layer per chained step."""

    zero_centred_norms: bool = True
    gated_attention: bool = True
    layer_per_step: bool = True
    partial_rotary_factor: float = DEFAULT_PARTIAL_ROTARY

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "config.json") -> Qwen35MTPConfig:
        """Read the MTP fields of a Qwen3.5 checkpoint's config.json (the text model's fields,
        under `text_config` when there is one)."""
        d, where = text_fields(raw)
        layers = d.get("mtp_num_hidden_layers")
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
            raise DraftFileError(f"{source}: field '{where}mtp_num_hidden_layers' must be a "
                                 f"number of layers, got {layers!r}")
        if layers == 0:
            raise DraftFileError(f"{source}: field '{where}mtp_num_hidden_layers' is 0: this "
                                 "checkpoint has no MTP layers")
        if d.get("num_experts"):
            raise DraftFileError(f"{source}: field '{where}num_experts' is {d['num_experts']}: "
                                 "MoE MTP layers (mtp.layers.N.mlp.experts.*) are not "
                                 "implemented")
        if d.get("mtp_use_dedicated_embeddings"):
            raise DraftFileError(f"{source}: field '{where}mtp_use_dedicated_embeddings' is "
                                 "true: MTP embeddings of its own are not implemented")
        rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
        if "partial_rotary_factor" not in d and "partial_rotary_factor" not in rope:
            d = {**d, "partial_rotary_factor": DEFAULT_PARTIAL_ROTARY}
        fields = read_stack_fields({**d, "num_hidden_layers": layers}, source)
        return cls(**fields)


def text_fields(raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The text model's fields of a config.json, and where they sit (for messages)."""
    if isinstance(raw.get("text_config"), dict):
        return raw["text_config"], "text_config."
    return raw, ""


def has_own_mtp(raw: dict[str, Any]) -> bool:
    """Whether a config.json is a target's that counts MTP layers of its own."""
    return "mtp_num_hidden_layers" in text_fields(raw)[0]


def read_mtp_tensors(path: str | Path) -> dict[str, np.ndarray]:
    """The checkpoint's `mtp.*` tensors, names without the prefix; nothing else is read."""
    tensors = checkpoint.read_tensors(path, keep=lambda name: name.startswith(PREFIXES))
    return checkpoint.strip_prefix(tensors, PREFIXES)


def load_own_mtp(path: str | Path, target: object, raw: dict[str, Any] | None = None,
                 source: str | None = None) -> MTPHead:
    """The MTP head of the Qwen3.5 checkpoint in `path`, drafting for `target` (the model
    loaded from the same checkpoint)."""
    if raw is None or source is None:
        raw, source = checkpoint.read_config(path)
    if not has_own_mtp(raw):
        raise DraftFileError(f"{source}: no field 'mtp_num_hidden_layers': this checkpoint has "
                             "no MTP layers of its own (give an MTP draft directory instead)")
    config = Qwen35MTPConfig.from_dict(raw, source)
    tensors = read_mtp_tensors(path)
    if not tensors:
        raise DraftFileError(f"{path}: the config counts {config.num_hidden_layers} MTP "
                             "layer(s), but no shard holds an 'mtp.*' tensor")
    moe = sorted(name for name in tensors if any(m in name for m in MOE_MARKERS))
    if moe:
        raise DraftFileError(f"{path}: tensor 'mtp.{moe[0]}': MoE MTP layers are not "
                             "implemented")
    checkpoint.check_known({f"mtp.{k}": v for k, v in tensors.items()},
                           {f"mtp.{k}": v for k, v in config.shapes().items()},
                           str(path), "a Qwen3.5 MTP head")
    dtype = getattr(target, "dtype", np.float32)
    return MTPHead(MTPDraft(config, tensors, dtype, source=str(path)), target)


# ---------------------------------------------------------------------------------------------
# Fabrication: a Qwen3.5 checkpoint in the published layout, with MTP weights

LANGUAGE_PREFIX = "model.language_model."
SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")


def add_own_mtp(path: str | Path, *, layers: int = 1, seed: int = 0) -> Path:
    """Turn the flat HuggingFace-layout Qwen3.5 text checkpoint in `path` (config.json +
    model.safetensors, as `onebit fabricate qwen3_5 --float` writes it) into the published
    layout with random MTP weights: a `Qwen3_5ForConditionalGeneration` config with the text
    fields and `mtp_num_hidden_layers` under `text_config`; `model.language_model.*`,
    `lm_head.weight` and `mtp.*` tensors in BF16, over two shards and their index."""
    from safetensors.numpy import load_file

    path = Path(path)
    if layers < 1:
        raise ValueError(f"MTP layers must be >= 1, got {layers}")
    if not (path / checkpoint.WEIGHTS_FILE).is_file():
        raise DraftFileError(f"{path}: no {checkpoint.WEIGHTS_FILE}: MTP layers are added to a "
                             "flat float Qwen3.5 checkpoint (onebit fabricate qwen3_5 --float)")
    flat = json.loads((path / checkpoint.CONFIG_FILE).read_text())
    if flat.get("model_type") != "qwen3_5_text":
        raise DraftFileError(f"{path}: model_type {flat.get('model_type')!r}: MTP layers of "
                             "its own come with a Qwen3.5 text checkpoint (qwen3_5_text)")
    text = {**flat, "model_type": "qwen3_5_text", "mtp_num_hidden_layers": layers,
            "mtp_use_dedicated_embeddings": False}
    config = Qwen35MTPConfig.from_dict({"text_config": text}, "fabricated config")
    rng = np.random.default_rng(seed)
    mtp = random_stack_tensors(config.shapes(), rng, zero_centred=True)
    model = load_file(str(path / checkpoint.WEIGHTS_FILE))
    shards = [
        {LANGUAGE_PREFIX + name[len("model."):]: value for name, value in model.items()
         if name.startswith("model.")},
        {**{n: v for n, v in model.items() if not n.startswith("model.")},
         **{"mtp." + n: v for n, v in mtp.items()}},
    ]
    (path / checkpoint.WEIGHTS_FILE).unlink()
    weight_map = {}
    for shard, tensors in zip(SHARDS, shards, strict=True):
        checkpoint.write_bf16(path / shard, tensors)
        weight_map.update({name: shard for name in tensors})
    index = {"metadata": {}, "weight_map": dict(sorted(weight_map.items()))}
    (path / checkpoint.INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
    wrapped = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
               "text_config": text,
               "tie_word_embeddings": bool(flat.get("tie_word_embeddings", False))}
    (path / checkpoint.CONFIG_FILE).write_text(json.dumps(wrapped, indent=2) + "\n")
    return path
