"""The model config: the fields of a HuggingFace `config.json` that the forward needs.

Two families are supported (docs/forward.md):
- "qwen3": dense Qwen3, every layer full attention, plain RMSNorm (`x_hat * w`);
- "qwen3_5": the Qwen3.5 hybrid, `layer_types` mixing "linear_attention" (gated delta net) and
  "full_attention" (gated, partial RoPE) layers, zero-centred RMSNorm (`x_hat * (1 + w)`).

`ModelConfig.from_dict` reads a config.json dict as transformers writes it (flat, or with the
text model under `text_config` as the multimodal Qwen3.5 checkpoints do; rope settings either
flat or under `rope_parameters`) and validates it, raising `ModelConfigError` naming the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from onebit.models.errors import ModelConfigError
from onebit.models.files import read_small

FULL = "full_attention"
LINEAR = "linear_attention"
LAYER_TYPES = (FULL, LINEAR)

# model_type as written in config.json -> the family this forward implements
FAMILIES = {
    "qwen3": "qwen3",
    "qwen3_5": "qwen3_5",
    "qwen3_5_text": "qwen3_5",
}


@dataclass(frozen=True)
class ModelConfig:
    model_type: str  # family: "qwen3" or "qwen3_5"
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    tie_word_embeddings: bool = False
    layer_types: tuple[str, ...] = ()
    partial_rotary_factor: float = 1.0
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 4
    hidden_act: str = "silu"
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # -- derived ---------------------------------------------------------------------------

    @property
    def zero_centred_norms(self) -> bool:
        """Qwen3.5 stores RMSNorm weights as offsets from 1: `y = x_hat * (1 + w)`."""
        return self.model_type == "qwen3_5"

    @property
    def gated_attention(self) -> bool:
        """Qwen3.5 full attention: `q_proj` yields `[q | gate]` per head."""
        return self.model_type == "qwen3_5"

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def linear_key_dim(self) -> int:
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def linear_value_dim(self) -> int:
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the GDN causal conv: q, k and v side by side."""
        return 2 * self.linear_key_dim + self.linear_value_dim

    # -- reading -----------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "config.json") -> ModelConfig:
        """Read and validate a config.json dict; `source` names it in errors."""
        if not isinstance(raw, dict):
            raise ModelConfigError(f"{source}: expected a JSON object, got {type(raw).__name__}")
        top_type = raw.get("model_type")
        d = dict(raw)
        if raw.get("text_config") is not None:  # multimodal wrapper: the text model
            if not isinstance(raw["text_config"], dict):
                raise ModelConfigError(f"{source}: field 'text_config' must be an object, got "
                                       f"{shown(raw['text_config'])}")
            d = {**raw["text_config"]}
            d.setdefault("model_type", top_type)
            d.setdefault("tie_word_embeddings", raw.get("tie_word_embeddings", False))
        for name in ("rope_parameters", "rope_scaling"):
            if d.get(name) is not None and not isinstance(d[name], dict):
                raise ModelConfigError(
                    f"{source}: field '{name}' must be an object, got {shown(d[name])}")
        rope = d.get("rope_parameters") or d.get("rope_scaling") or {}

        def need(name: str) -> Any:
            if name not in d or d[name] is None:
                raise ModelConfigError(f"{source}: missing field '{name}'")
            return d[name]

        model_type = need("model_type")
        if not isinstance(model_type, str) or model_type not in FAMILIES:
            raise ModelConfigError(
                f"{source}: field 'model_type' is {shown(model_type)}; supported: "
                f"{sorted(FAMILIES)}"
            )
        family = FAMILIES[model_type]
        layers = positive_int(need("num_hidden_layers"), "num_hidden_layers", source)
        heads = positive_int(need("num_attention_heads"), "num_attention_heads", source)
        hidden = positive_int(need("hidden_size"), "hidden_size", source)
        head_dim = d.get("head_dim")
        if head_dim is None:
            head_dim = hidden // heads
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in ("default", None):
            raise ModelConfigError(
                f"{source}: field 'rope_parameters.rope_type' is "
                f"{shown(rope_type)}; only 'default' RoPE is supported"
            )
        theta = d.get("rope_theta", rope.get("rope_theta", 1_000_000.0))
        default_partial = 0.25 if family == "qwen3_5" else 1.0
        partial = d.get("partial_rotary_factor", rope.get("partial_rotary_factor", default_partial))
        layer_types = d.get("layer_types")
        if layer_types is None:
            if family == "qwen3_5":
                interval = positive_int(d.get("full_attention_interval", 4),
                                         "full_attention_interval", source)
                layer_types = [LINEAR if (i + 1) % interval else FULL for i in range(layers)]
            else:
                layer_types = [FULL] * layers
        linear = {}
        for name, default in (
            ("linear_num_key_heads", 0),
            ("linear_num_value_heads", 0),
            ("linear_key_head_dim", 0),
            ("linear_value_head_dim", 0),
            ("linear_conv_kernel_dim", 4),
        ):
            linear[name] = d.get(name, default)
        config = cls(
            model_type=family,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=d.get("num_key_value_heads", heads),
            head_dim=head_dim,
            intermediate_size=need("intermediate_size"),
            vocab_size=need("vocab_size"),
            rms_norm_eps=d.get("rms_norm_eps", 1e-6),
            rope_theta=theta,
            tie_word_embeddings=_bool(d.get("tie_word_embeddings", False),
                                      "tie_word_embeddings", source),
            layer_types=tuple(layer_types)
            if isinstance(layer_types, list | tuple)
            else layer_types,
            partial_rotary_factor=partial,
            hidden_act=d.get("hidden_act", "silu"),
            extra={k: v for k, v in d.items() if k not in _FIELDS},
            **linear,
        )
        config.validate(source)
        return config

    @classmethod
    def from_file(cls, path: str | Path) -> ModelConfig:
        """Read `path` (a regular UTF-8 file holding a JSON object); `ModelConfigError` naming
        the file otherwise."""
        return cls.from_dict(read_config_json(path), source=str(path))

    def to_dict(self) -> dict[str, Any]:
        """A config.json dict transformers reads back (qwen3 / qwen3_5_text model types)."""
        d = asdict(self)
        d.pop("extra")
        d["layer_types"] = list(self.layer_types)
        d["model_type"] = "qwen3" if self.model_type == "qwen3" else "qwen3_5_text"
        d["rope_parameters"] = {
            "rope_type": "default",
            "rope_theta": self.rope_theta,
            "partial_rotary_factor": self.partial_rotary_factor,
        }
        if self.model_type == "qwen3":
            del d["partial_rotary_factor"]
            for name in list(d):
                if name.startswith("linear_"):
                    del d[name]
        return d

    # -- validation ----------------------------------------------------------------------------

    def validate(self, source: str = "config") -> None:
        """Raise `ModelConfigError` naming the first field that is wrong."""
        for name in (*SIZE_FIELDS, "vocab_size"):
            positive_int(getattr(self, name), name, source)
        for name in ("rms_norm_eps", "rope_theta", "partial_rotary_factor"):
            positive_number(getattr(self, name), name, source)
        if self.num_attention_heads % self.num_key_value_heads:
            raise ModelConfigError(
                f"{source}: field 'num_key_value_heads' ({self.num_key_value_heads}) must divide "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.partial_rotary_factor > 1:
            raise ModelConfigError(
                f"{source}: field 'partial_rotary_factor' must be <= 1, got "
                f"{self.partial_rotary_factor}"
            )
        if self.rotary_dim % 2 or self.rotary_dim == 0:
            raise ModelConfigError(
                f"{source}: fields 'head_dim' ({self.head_dim}) x 'partial_rotary_factor' "
                f"({self.partial_rotary_factor}) give rotary dim {self.rotary_dim}; it must be "
                f"even and > 0"
            )
        if not isinstance(self.hidden_act, str) or self.hidden_act != "silu":
            raise ModelConfigError(
                f"{source}: field 'hidden_act' is {shown(self.hidden_act)}; only 'silu' is "
                "supported"
            )
        _bool(self.tie_word_embeddings, "tie_word_embeddings", source)
        if not isinstance(self.layer_types, tuple):
            raise ModelConfigError(f"{source}: field 'layer_types' must be a list of strings")
        if len(self.layer_types) != self.num_hidden_layers:
            raise ModelConfigError(
                f"{source}: field 'layer_types' has {len(self.layer_types)} entries; "
                f"num_hidden_layers is {self.num_hidden_layers}"
            )
        allowed = LAYER_TYPES if self.model_type == "qwen3_5" else (FULL,)
        for i, kind in enumerate(self.layer_types):
            if not isinstance(kind, str) or kind not in allowed:
                raise ModelConfigError(
                    f"{source}: unknown layer type {shown(kind)} at layer_types[{i}] for a "
                    f"{self.model_type} model; supported: {list(allowed)}"
                )
        if LINEAR in self.layer_types:
            for name in (
                "linear_num_key_heads",
                "linear_num_value_heads",
                "linear_key_head_dim",
                "linear_value_head_dim",
                "linear_conv_kernel_dim",
            ):
                positive_int(getattr(self, name), name, source)
            if self.linear_num_value_heads % self.linear_num_key_heads:
                raise ModelConfigError(
                    f"{source}: field 'linear_num_key_heads' ({self.linear_num_key_heads}) must "
                    f"divide linear_num_value_heads ({self.linear_num_value_heads})"
                )


_FIELDS = {f for f in ModelConfig.__dataclass_fields__}


def read_config_json(path: str | Path) -> Any:
    """The JSON in `path`, a regular UTF-8 file of at most 16 MiB (a FIFO is refused, never
    waited on); `ModelConfigError` naming the file otherwise."""
    path = Path(path)
    text = read_small(path, ModelConfigError)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ModelConfigError(f"{path}: not valid JSON: {error}") from None
    except RecursionError:
        raise ModelConfigError(f"{path}: not valid JSON: nested too deeply") from None


def shown(value: Any) -> str:
    """A config value for a message: its repr, cut short (a hostile file can hold megabytes)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: The sizes every dense decoder config has: a model's, and a draft head's layer stack.
SIZE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
               "head_dim", "intermediate_size")


def decoder_sizes(d: dict[str, Any], source: str,
                  error: type[Exception] = ModelConfigError) -> dict[str, int]:
    """The `SIZE_FIELDS` of a config.json dict, each a positive int; `num_key_value_heads`
    defaults to `num_attention_heads` and `head_dim` to `hidden_size / num_attention_heads`.
    `error` names the first missing or bad field."""

    def need(name: str) -> Any:
        if d.get(name) is None:
            raise error(f"{source}: missing field '{name}'")
        return d[name]

    hidden = positive_int(need("hidden_size"), "hidden_size", source, error)
    heads = positive_int(need("num_attention_heads"), "num_attention_heads", source, error)
    return dict(
        hidden_size=hidden,
        num_hidden_layers=positive_int(need("num_hidden_layers"), "num_hidden_layers", source,
                                       error),
        num_attention_heads=heads,
        num_key_value_heads=positive_int(d.get("num_key_value_heads", heads),
                                         "num_key_value_heads", source, error),
        head_dim=positive_int(d.get("head_dim") or hidden // heads, "head_dim", source, error),
        intermediate_size=positive_int(need("intermediate_size"), "intermediate_size", source,
                                       error),
    )


def positive_int(value: Any, name: str, source: str,
                 error: type[Exception] = ModelConfigError) -> int:
    """`value` when it is an int > 0 (not a bool); `error` naming the field otherwise. Shared by
    every config reader (models, draft heads), each passing its own error type."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise error(f"{source}: field '{name}' must be a positive integer, got {shown(value)}")
    return value


def positive_number(value: Any, name: str, source: str,
                    error: type[Exception] = ModelConfigError) -> float:
    """`value` as a float when it is a finite number > 0 (not a bool); `error` naming the field
    otherwise."""
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not (math.isfinite(value) and value > 0)):
        raise error(f"{source}: field '{name}' must be a positive number, got {shown(value)}")
    return float(value)


# the names other modules imported before these were public
_shown = shown
_positive_int = positive_int


def _bool(value: Any, name: str, source: str) -> bool:
    """JSON true / false only: the string "false" is truthy in Python and must not pass."""
    if not isinstance(value, bool):
        raise ModelConfigError(f"{source}: field '{name}' must be true or false, got "
                               f"{shown(value)}")
    return value
