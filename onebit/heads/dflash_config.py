"""A DFlash draft's config.json, read as z-lab's DFlash reference (`dflash/model.py`) reads it.

The reference builds its draft from a transformers `Qwen3Config` plus a `dflash_config` object;
a DFlash field is looked up in `dflash_config` first, then at the top level, then defaults:

| field | default | what it does |
|---|---|---|
| `block_size` | 16 | rows per block: B - 1 drafts a pass |
| `mask_token_id` | required | the token filling rows 1 .. B-1 |
| `target_layer_ids` | `build_target_layer_ids(num_target_layers, ...)` | taps to read |
| `input_embedding_scale` | 1.0 | multiplies the target's embedding of the block |
| `output_multiplier` | 1.0 | multiplies the logits |
| `final_logit_softcapping` | none | `tanh(logits / c) * c` |

Attention per layer, as `Qwen3Config` and the reference resolve it: `sliding_window` counts only
when `use_sliding_window` is true; `layer_types` defaults to "sliding_attention" for layers
`>= max_window_layers` (28) when there is a window, else "full_attention"; a layer is causal when
the top-level `is_causal` says so, else when it is a sliding layer. RoPE: `rope_parameters` (or
the older `rope_scaling`) of type "default" or "yarn".

Refused by name: a model kind the head does not implement (`architectures` other than
`DFlashDraftModel`, e.g. `DFlash2DraftModel`; a `model_type` other than qwen3), any key that is
neither read nor known to leave the computation unchanged (so nothing that changes the draft is
silently dropped), and `target_norm` / `embedding_scale` (keys of onebit's early drafts that
the reference never had).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onebit.heads.errors import DraftFileError
from onebit.heads.layers import StackConfig, positive_int, positive_number, read_stack_fields

ARCHITECTURE = "DFlashDraftModel"
MODEL_TYPE = "qwen3"
FULL, SLIDING = "full_attention", "sliding_attention"
DEFAULT_BLOCK_SIZE = 16
DEFAULT_MAX_WINDOW_LAYERS = 28  # Qwen3Config's default

# Keys read here or by read_stack_fields (top level, or under dflash_config for DFlash fields).
DFLASH_KEYS = {"block_size", "mask_token_id", "target_layer_ids", "input_embedding_scale",
               "output_multiplier", "final_logit_softcapping"}
READ_KEYS = DFLASH_KEYS | {
    "architectures", "model_type", "dflash_config", "num_target_layers", "hidden_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "rms_norm_eps", "hidden_act", "attention_bias", "rope_theta",
    "rope_parameters", "rope_scaling", "partial_rotary_factor", "max_position_embeddings",
    "layer_types", "sliding_window", "use_sliding_window", "max_window_layers", "is_causal",
    "vocab_size",
}
# Keys a published config carries that change nothing the draft computes.
INERT_KEYS = {
    "auto_map", "dtype", "torch_dtype", "transformers_version", "bos_token_id", "eos_token_id",
    "pad_token_id", "initializer_range", "use_cache", "tie_word_embeddings", "attention_dropout",
    "_name_or_path", "name_or_path",
}
# Keys with a reason to refuse them.
REFUSED = {
    "target_norm": "the reference feeds the draft's own final norm straight into the target's "
                   "lm_head; there is no target norm to switch on or off",
    "embedding_scale": "the reference reads 'input_embedding_scale'; rename the key",
    "conv_kernel_size": "DFlash2's convolutions are not implemented",
    "conv_group_size": "DFlash2's convolutions are not implemented",
    "selector_rank": "DFlash2's candidate selector is not implemented",
    "selector_top_k": "DFlash2's candidate selector is not implemented",
}


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """The reference's default taps: the middle layer for a one-layer draft, else
    `num_draft_layers` layers spread evenly over 1 .. num_target_layers - 3."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    return [int(round(start + i * (end - start) / (num_draft_layers - 1)))
            for i in range(num_draft_layers)]


@dataclass(frozen=True, kw_only=True)
class DFlashConfig(StackConfig):
    block_size: int = DEFAULT_BLOCK_SIZE
    target_layer_ids: tuple[int, ...]
    mask_token_id: int
    input_embedding_scale: float = 1.0
    output_multiplier: float = 1.0
    final_logit_softcapping: float | None = None
    layer_types: tuple[str, ...] = ()  # empty: every layer full attention
    sliding_window: int | None = None  # effective window (None unless use_sliding_window)
    is_causal: bool | None = None
    num_target_layers: int | None = None
    vocab_size: int | None = None

    def layer_attention(self, layer: int) -> tuple[bool, int | None]:
        """(causal, window) of draft layer `layer`, as the reference resolves them."""
        kind = self.layer_types[layer] if self.layer_types else FULL
        causal = kind == SLIDING if self.is_causal is None else self.is_causal
        return causal, self.sliding_window if kind == SLIDING else None

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
        """Read a draft's config.json as the reference does; raises `DraftFileError` naming
        the key at fault."""
        dflash = raw.get("dflash_config") or {}
        if not isinstance(dflash, dict):
            raise DraftFileError(f"{source}: field 'dflash_config' must be an object")
        _check_kind(raw, source)
        _check_keys(raw, dflash, source)
        d = {**raw, **{k: v for k, v in dflash.items() if k in DFLASH_KEYS}}
        stack = read_stack_fields(d, source)
        block = positive_int(d.get("block_size", DEFAULT_BLOCK_SIZE), "block_size", source)
        if block < 2:
            raise DraftFileError(f"{source}: field 'block_size' must be >= 2 (a block of B "
                                 f"gives B - 1 drafts), got {block}")
        if d.get("mask_token_id") is None:
            raise DraftFileError(f"{source}: missing field 'mask_token_id'")
        mask = d["mask_token_id"]
        if isinstance(mask, bool) or not isinstance(mask, int) or mask < 0:
            raise DraftFileError(f"{source}: field 'mask_token_id' must be a token id, "
                                 f"got {mask!r}")
        targets = d.get("num_target_layers")
        if targets is not None:
            targets = positive_int(targets, "num_target_layers", source)
        softcap = d.get("final_logit_softcapping")
        vocab = d.get("vocab_size")
        return cls(
            **stack,
            **_attention_fields(d, stack["num_hidden_layers"], source),
            block_size=block,
            target_layer_ids=_layer_ids(d, targets, stack["num_hidden_layers"], source),
            mask_token_id=mask,
            input_embedding_scale=positive_number(d.get("input_embedding_scale", 1.0),
                                                  "input_embedding_scale", source),
            output_multiplier=positive_number(d.get("output_multiplier", 1.0),
                                              "output_multiplier", source),
            final_logit_softcapping=None if softcap is None or softcap <= 0 else float(softcap),
            num_target_layers=targets,
            vocab_size=None if vocab is None else positive_int(vocab, "vocab_size", source),
        )

    def published(self) -> dict[str, Any]:
        """This config as z-lab publishes DFlash drafts: Qwen3Config fields at the top,
        the DFlash fields under `dflash_config`."""
        rope = {"rope_type": "default", **self.rope_scaling, "rope_theta": self.rope_theta}
        out: dict[str, Any] = {
            "architectures": [ARCHITECTURE],
            "model_type": MODEL_TYPE,
            "dtype": "bfloat16",
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "rope_parameters": rope,
            "max_position_embeddings": self.max_position_embeddings or 40960,
            "attention_bias": self.attention_bias,
            "attention_dropout": 0.0,
            "use_sliding_window": self.sliding_window is not None,
            "sliding_window": self.sliding_window,
            "layer_types": list(self.layer_types or [FULL] * self.num_hidden_layers),
            "tie_word_embeddings": False,
            "num_target_layers": self.num_target_layers,
            "vocab_size": self.vocab_size,
            "dflash_config": {"block_size": self.block_size,
                              "mask_token_id": self.mask_token_id,
                              "target_layer_ids": list(self.target_layer_ids)},
        }
        if self.is_causal is not None:
            out["is_causal"] = self.is_causal
        extra = {"input_embedding_scale": (self.input_embedding_scale, 1.0),
                 "output_multiplier": (self.output_multiplier, 1.0),
                 "final_logit_softcapping": (self.final_logit_softcapping, None)}
        for name, (value, default) in extra.items():
            if value != default:
                out["dflash_config"][name] = value
        return out


def _check_kind(raw: dict[str, Any], source: str) -> None:
    arch = raw.get("architectures")
    if arch is not None and (not isinstance(arch, list) or ARCHITECTURE not in arch):
        raise DraftFileError(
            f"{source}: architectures {arch!r} is not a model this head implements "
            f"(only {ARCHITECTURE!r}; DFlash2DraftModel's convolutions and candidate "
            "selector are not implemented)")
    kind = raw.get("model_type", MODEL_TYPE)
    if kind != MODEL_TYPE:
        raise DraftFileError(f"{source}: field 'model_type' is {kind!r}; a DFlash draft here "
                             f"is a {MODEL_TYPE!r} stack, as the reference builds it")


def _check_keys(raw: dict[str, Any], dflash: dict[str, Any], source: str) -> None:
    for where, keys, known in (("", raw, READ_KEYS | INERT_KEYS),
                               ("dflash_config.", dflash, DFLASH_KEYS)):
        for key in keys:
            if key in REFUSED:
                raise DraftFileError(f"{source}: field '{where}{key}' is refused: {REFUSED[key]}")
            if key not in known:
                raise DraftFileError(
                    f"{source}: field '{where}{key}' is not one the DFlash reference reads, and "
                    "onebit cannot tell whether it changes the draft; refused rather than "
                    "ignored")


def _layer_ids(d: dict[str, Any], targets: int | None, layers: int, source: str):
    ids = d.get("target_layer_ids")
    if ids is None:
        if targets is None:
            raise DraftFileError(f"{source}: missing field 'target_layer_ids' (and no "
                                 "'num_target_layers' to derive the reference's default from)")
        return tuple(build_target_layer_ids(targets, layers))
    if (not isinstance(ids, list | tuple) or not ids
            or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)):
        raise DraftFileError(f"{source}: field 'target_layer_ids' must be a non-empty "
                             f"list of layer ids >= 0, got {ids!r}")
    return tuple(ids)


def _attention_fields(d: dict[str, Any], layers: int, source: str) -> dict[str, Any]:
    use = d.get("use_sliding_window", False)
    window = d.get("sliding_window") if use else None
    if window is not None:
        window = positive_int(window, "sliding_window", source)
    types = d.get("layer_types")
    if types is None:
        first = d.get("max_window_layers", DEFAULT_MAX_WINDOW_LAYERS)
        types = [SLIDING if window is not None and i >= first else FULL for i in range(layers)]
    if not isinstance(types, list | tuple) or len(types) != layers:
        raise DraftFileError(f"{source}: field 'layer_types' must list one type per layer "
                             f"({layers}), got {types!r}")
    for i, kind in enumerate(types):
        if kind not in (FULL, SLIDING):
            raise DraftFileError(f"{source}: layer_types[{i}] is {kind!r}; supported: "
                                 f"{[FULL, SLIDING]}")
    causal = d.get("is_causal")
    if causal is not None and not isinstance(causal, bool):
        raise DraftFileError(f"{source}: field 'is_causal' must be true, false or null, got "
                             f"{causal!r}")
    return dict(layer_types=tuple(types), sliding_window=window, is_causal=causal)
