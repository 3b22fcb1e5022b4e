"""onebit's trained head (`onebit.heads.eagle`) written in the speculators EAGLE-3 layout, the
one vLLM serves (`vllm serve DIR`) and llama.cpp's `convert_hf_to_gguf.py` converts, and read
back from it.

The layout cannot hold onebit's head exactly (docs/heads.md, "Exporting a head: the
speculators EAGLE-3 layout", has the table). Two parts differ, whatever the weights:

- the fused input: onebit fuses `[n(low); n(mid); high]`, two layer outputs RMS-normalised
  without weight and the base's final-normed row; an engine feeds `fc` the raw residual rows
  of `eagle_aux_hidden_state_layer_ids` (llama.cpp's `norm_before_fc` normalises the 3H
  concatenation as one row, not each tap);
- attention: onebit's block has none; EAGLE-3's layer attends over every position in its
  cache (the context and the earlier drafts).

So `export_eagle3` refuses with `NotRepresentableError`, naming both, unless it is told
`inexact=True`; then it writes the file an engine runs closest to onebit's head, records the
differences in config.json (`onebit_export`), and returns them. That file's layer computes,
at a position that sees only itself, exactly onebit's block: q_proj and k_proj are zero (every
score 0), v_proj = [W_in; 0 | I] over [n(embed); n(u)] and o_proj = [I | -I], so with
`norm_before_residual` the residual n(u) and the -n(u) from o_proj cancel and the layer adds
nothing to `W_in [n(u); n(embed)]`; every norm onebit applies without weight is a norm of
weight ones (the same RMS, the same eps). At a position that sees others, an engine's uniform
attention averages that over them: the second difference, stated in the file.

`load_eagle3` reads back only what `export_eagle3` wrote (the `onebit_export` block, the
structure above checked tensor by tensor, lm_head equal to the base's own rows), into an
`EagleHead` that drafts exactly the tokens of the head it came from. A file from elsewhere (an
EAGLE-3 head that attends) is refused by name: onebit's head cannot run it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onebit.heads.eagle import (
    MAX_FILE_BYTES,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_VOCAB,
    EagleConfig,
    EagleHead,
    check_base,
    load_eagle,
)
from onebit.heads.errors import DraftError, DraftFileError, DraftMismatchError

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
EXPORT_KEY = "onebit_export"  # config.json's block of what onebit needs back, and the differences
EXPORT_VERSION = 1
MAX_HEADER_BYTES = 1 << 20

#: where onebit's head and an engine running the exported file part ways, whatever the weights
DIFFERENCES = (
    "fused input: onebit fuses [n(low); n(mid); high] (its low and middle taps RMS-normalised "
    "without weight, high the base's final-normed row); vLLM and llama.cpp feed fc the raw "
    "residual rows of eagle_aux_hidden_state_layer_ids (the third of them the input of the "
    "base's last layer, the nearest row a llama target gives an EAGLE-3 head)",
    "attention: onebit's block has none; EAGLE-3's layer attends over every earlier position "
    "in its cache (the context and the earlier drafts). The file's q_proj and k_proj are zero, "
    "so an engine averages over those positions what onebit computes from the current one "
    "alone; at a position that sees only itself the layer is exactly onebit's block",
)


class NotRepresentableError(DraftError):
    """A head the speculators EAGLE-3 layout cannot hold exactly (and no leave to write it
    inexactly), or an EAGLE-3 file onebit's head cannot run."""


@dataclass(frozen=True)
class Export:
    """What `export_eagle3` wrote: the directory and how an engine's run of it differs from
    onebit's (empty when exact)."""

    path: Path
    differences: tuple[str, ...]


def _tensor_shapes(config: dict[str, int]) -> dict[str, tuple[tuple[int, ...], tuple[str, ...]]]:
    """name -> (shape, allowed safetensors dtypes) of the layout, from its sizes."""
    h, i, d, v = config["hidden"], config["intermediate"], config["draft_vocab"], config["vocab"]
    qkv = config["heads"] * config["head_dim"]
    w = ("F32", "F16")
    p = "layers.0."
    return {
        "fc.weight": ((h, 3 * h), w),
        p + "input_layernorm.weight": ((h,), w),
        p + "hidden_norm.weight": ((h,), w),
        p + "self_attn.q_proj.weight": ((qkv, 2 * h), w),
        p + "self_attn.k_proj.weight": ((qkv, 2 * h), w),
        p + "self_attn.v_proj.weight": ((qkv, 2 * h), w),
        p + "self_attn.o_proj.weight": ((h, qkv), w),
        p + "post_attention_layernorm.weight": ((h,), w),
        p + "mlp.gate_proj.weight": ((i, h), w),
        p + "mlp.up_proj.weight": ((i, h), w),
        p + "mlp.down_proj.weight": ((h, i), w),
        "norm.weight": ((h,), w),
        "lm_head.weight": ((d, h), w),
        "d2t": ((d,), ("I64",)),
        "t2d": ((v,), ("BOOL",)),
    }


def _head_dim(hidden: int, preferred: int | None) -> int:
    """A head width that tiles 2 x hidden (the v rows carry [W_in x; n(u)]) and RoPE can
    rotate (even): the base's own when it does."""
    for dim in ([preferred] if preferred else []) + [128, 64, 32, 16, 8, 4, 2]:
        if dim and dim % 2 == 0 and (2 * hidden) % dim == 0:
            return int(dim)
    raise NotRepresentableError(f"hidden size {hidden}: no even head width tiles {2 * hidden}")


def _base_rows(base: object, d2t: np.ndarray) -> np.ndarray:
    """The base's lm_head rows of `d2t` as float32: the rows onebit's head scores with."""
    weights = getattr(base, "weights", None)
    if weights is None or not hasattr(weights, "lm_head_name"):
        raise DraftMismatchError("the base does not give its lm_head's rows (weights."
                                 "lm_head_name()): an EAGLE-3 file carries them")
    full = weights.get(weights.lm_head_name())
    return np.ascontiguousarray(np.asarray(full[d2t], np.float32))


# ---------------------------------------------------------------------------------------------
# Export


def _source(head, base):
    """(config, tensors, base) of an `EagleHead`, a head directory or a (config, tensors)
    pair."""
    if isinstance(head, EagleHead):
        return head.config, head.tensors, base if base is not None else head.base
    if isinstance(head, tuple):
        config, tensors = head
    else:
        config, tensors = load_eagle(head)
    if base is None:
        raise ValueError("export_eagle3 of a head directory needs base= (its lm_head rows "
                         "go into the file)")
    return config, tensors, base


def layout_tensors(config: EagleConfig, tensors: dict[str, np.ndarray],
                   lm_rows: np.ndarray) -> dict[str, np.ndarray]:
    """onebit's tensors in the layout (module docstring: v_proj = [W_in; 0 | I] over
    [n(embed); n(u)], o_proj = [I | -I], q and k zero, the weightless norms ones)."""
    h, v = config.hidden_size, config.vocab_size
    f32 = np.float32
    into = np.asarray(tensors["into.weight"], f32)  # over [n(u); n(embed)]
    eye = np.eye(h, dtype=f32)
    v_proj = np.block([[into[:, h:], into[:, :h]], [np.zeros((h, h), f32), eye]])
    ones = np.ones(h, f32)
    d2t = np.asarray(tensors["d2t"], np.int64)
    t2d = np.zeros(v, bool)
    t2d[d2t] = True
    p = "layers.0."
    out = {
        "fc.weight": np.asarray(tensors["fuse.weight"], f32),
        p + "input_layernorm.weight": ones, p + "hidden_norm.weight": ones,
        p + "self_attn.q_proj.weight": np.zeros((2 * h, 2 * h), f32),
        p + "self_attn.k_proj.weight": np.zeros((2 * h, 2 * h), f32),
        p + "self_attn.v_proj.weight": v_proj,
        p + "self_attn.o_proj.weight": np.concatenate([eye, -eye], axis=1),
        p + "post_attention_layernorm.weight": ones,
        p + "mlp.gate_proj.weight": np.asarray(tensors["gate.weight"], f32),
        p + "mlp.up_proj.weight": np.asarray(tensors["up.weight"], f32),
        p + "mlp.down_proj.weight": np.asarray(tensors["down.weight"], f32),
        "norm.weight": np.asarray(tensors["out_norm"], f32),
        "lm_head.weight": lm_rows,
        # the trap: offsets, target id = j + d2t[j] (vLLM adds arange, llama.cpp's converter too)
        "d2t": d2t - np.arange(len(d2t), dtype=np.int64),
        "t2d": t2d,
    }
    return {name: np.ascontiguousarray(value) for name, value in out.items()}


def aux_ids(config: EagleConfig) -> list[int]:
    """`eagle_aux_hidden_state_layer_ids` of a head: an engine's id k is the residual stream
    entering layer k (vLLM's aux capture, llama.cpp's layer input), so onebit's tap t (the
    output of layer t) is k = t + 1; the third is L - 1. They must be distinct, increasing
    (vLLM gathers them in layer order, llama.cpp in the listed order) and below L (a llama
    target gives neither engine the output of its last layer): else NotRepresentableError."""
    ids = [config.taps[0] + 1, config.taps[1] + 1, config.layer_count - 1]
    if not ids[0] < ids[1] < ids[2] < config.layer_count:
        raise NotRepresentableError(
            f"the head's taps {list(config.taps)} on a base of {config.layer_count} layers give "
            f"aux layer ids {ids}: EAGLE-3 engines need three distinct, increasing ids below "
            f"{config.layer_count} (a tap on one of the last two layers has none)")
    return ids


def layout_config(config: EagleConfig, base: object, verifier: str, head_dim: int,
                  differences: Sequence[str]) -> dict[str, Any]:
    """config.json of the layout: what vLLM's speculators loader and llama.cpp's converter
    read, `norm_before_residual` written out (vLLM assumes true when it is absent, speculators
    and llama.cpp false), and the `onebit_export` block."""
    h = config.hidden_size
    model = getattr(base, "config", None)
    heads = 2 * h // head_dim
    return {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "draft_vocab_size": config.draft_vocab_size,
        "norm_before_residual": True,
        "norm_before_fc": False,
        "target_hidden_size": h,
        "eagle_aux_hidden_state_layer_ids": aux_ids(config),
        "transformer_layer_config": {
            "model_type": "llama", "architectures": ["LlamaForCausalLM"],
            "vocab_size": config.vocab_size, "hidden_size": h,
            "intermediate_size": config.intermediate_size, "num_hidden_layers": 1,
            "num_attention_heads": heads, "num_key_value_heads": heads, "head_dim": head_dim,
            "hidden_act": "silu", "rms_norm_eps": config.rms_norm_eps,
            "rope_theta": float(getattr(model, "rope_theta", 10000.0)),
            "max_position_embeddings": int(getattr(model, "max_position_embeddings", 0)
                                           or 8192),
            "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
        },
        "speculators_config": {
            "algorithm": "eagle3",
            "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy",
                                  "speculative_tokens": config.max_chain,
                                  "verifier_accept_k": 1, "accept_tolerance": 0.0}],
            "verifier": {"name_or_path": verifier, "architectures": ["LlamaForCausalLM"]},
        },
        EXPORT_KEY: {
            "version": EXPORT_VERSION, "exact": not differences,
            "differences": list(differences), "head": config.to_json(),
        },
    }


def export_eagle3(head, out_dir: str | Path, *, verifier: str, base: object | None = None,
                  base_path: str | Path | None = None, inexact: bool = False) -> Export:
    """Write `head` (an `EagleHead`, a head directory, or a (config, tensors) pair; a directory
    needs `base`) to `out_dir` in the speculators EAGLE-3 layout, `verifier` as the target's
    `name_or_path`. onebit's head is not exactly representable (`DIFFERENCES`): without
    `inexact=True` this raises `NotRepresentableError` naming the differences and writes
    nothing; with it, the file is written with the differences in its config.json."""
    if not isinstance(verifier, str) or not verifier:
        raise ValueError(f"verifier must name the target (a path or a hub id), got {verifier!r}")
    config, tensors, base = _source(head, base)
    check_base(config, base, base_path)
    differences = DIFFERENCES
    if differences and not inexact:
        raise NotRepresentableError(
            "onebit's head is not exactly representable in the speculators EAGLE-3 layout: "
            + "; ".join(f"({n}) {d}" for n, d in enumerate(differences, 1))
            + ". Pass inexact=True (onebit export-head --inexact) to write it anyway, with "
            "these differences recorded in its config.json")
    aux_ids(config)
    dim = _head_dim(config.hidden_size, getattr(getattr(base, "config", None), "head_dim", None))
    out = layout_tensors(config, tensors, _base_rows(base, np.asarray(tensors["d2t"])))
    raw = layout_config(config, base, verifier, dim, differences)
    _write(Path(out_dir), raw, out)
    return Export(Path(out_dir), tuple(differences))


def _write(path: Path, raw: dict[str, Any], tensors: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    path.mkdir(parents=True, exist_ok=True)
    tmp = path / (WEIGHTS_FILE + ".part")
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    os.replace(tmp, path / WEIGHTS_FILE)  # a reader never sees half a file
    text = path / (CONFIG_FILE + ".part")
    text.write_text(json.dumps(raw, indent=2) + "\n")
    os.replace(text, path / CONFIG_FILE)


# ---------------------------------------------------------------------------------------------
# Load


def _int(raw: dict, name: str, low: int, high: int, source: str) -> int:
    value = raw.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DraftFileError(f"{source}: '{name}' is {value!r}; expected an integer in "
                             f"[{low}, {high}]")
    return value


def read_layout_config(raw: object, source: str) -> tuple[dict[str, int], EagleConfig]:
    """The sizes of an EAGLE-3 config.json that onebit wrote, and the onebit head config it
    carries; `DraftFileError` naming the field, `NotRepresentableError` for a file onebit's
    head cannot run."""
    if not isinstance(raw, dict):
        raise DraftFileError(f"{source}: expected a JSON object, got {type(raw).__name__}")
    if raw.get("speculators_model_type") != "eagle3":
        raise DraftFileError(f"{source}: 'speculators_model_type' is "
                             f"{raw.get('speculators_model_type')!r}; expected 'eagle3'")
    if raw.get("norm_before_residual") is not True or raw.get("norm_before_fc", False):
        raise NotRepresentableError(
            f"{source}: 'norm_before_residual' is {raw.get('norm_before_residual')!r} and "
            f"'norm_before_fc' {raw.get('norm_before_fc', False)!r}; onebit's head is written "
            "with true and false")
    block = raw.get(EXPORT_KEY)
    if not isinstance(block, dict) or block.get("version") != EXPORT_VERSION:
        raise NotRepresentableError(
            f"{source}: no '{EXPORT_KEY}' block of version {EXPORT_VERSION}: not a head onebit "
            "exported, and onebit's head (no attention, normalised taps) cannot run an EAGLE-3 "
            "head trained elsewhere")
    from onebit.heads.eagle import config_from_json

    head = config_from_json(block.get("head"), f"{source} ({EXPORT_KEY}.head)")
    layer = raw.get("transformer_layer_config")
    if not isinstance(layer, dict):
        raise DraftFileError(f"{source}: 'transformer_layer_config' is "
                             f"{type(layer).__name__}; expected an object")
    sizes = {
        "hidden": _int(layer, "hidden_size", 1, MAX_HIDDEN, source),
        "intermediate": _int(layer, "intermediate_size", 1, MAX_INTERMEDIATE, source),
        "vocab": _int(layer, "vocab_size", 1, MAX_VOCAB, source),
        "heads": _int(layer, "num_attention_heads", 1, 4096, source),
        "head_dim": _int(layer, "head_dim", 2, 4096, source),
    }
    sizes["draft_vocab"] = _int(raw, "draft_vocab_size", 1, sizes["vocab"], source)
    _int(layer, "num_hidden_layers", 1, 1, source)
    if layer.get("num_key_value_heads") != sizes["heads"] or \
            sizes["heads"] * sizes["head_dim"] != 2 * sizes["hidden"]:
        raise DraftFileError(f"{source}: heads {sizes['heads']} x {sizes['head_dim']} (kv heads "
                             f"{layer.get('num_key_value_heads')!r}); onebit writes as many kv "
                             f"heads as heads, tiling 2 x hidden = {2 * sizes['hidden']}")
    mine = {"hidden": head.hidden_size, "intermediate": head.intermediate_size,
            "vocab": head.vocab_size, "draft_vocab": head.draft_vocab_size}
    for name, value in mine.items():
        if sizes[name] != value:
            raise DraftFileError(f"{source}: the layout's {name} size {sizes[name]} is not the "
                                 f"{EXPORT_KEY} head's {value}")
    ids = raw.get("eagle_aux_hidden_state_layer_ids")
    if ids != aux_ids(head):
        raise DraftFileError(f"{source}: 'eagle_aux_hidden_state_layer_ids' is {ids!r}; the "
                             f"head's taps {list(head.taps)} give {aux_ids(head)}")
    return sizes, head


_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "I64": (np.int64, 8),
           "BOOL": (np.bool_, 1)}


def check_header(file: Path, sizes: dict[str, int]) -> None:
    """Check the safetensors header of `file` against the layout's sizes before any tensor is
    read: its length bounded, every tensor named, typed and shaped as the config says, the
    offsets tiling the data exactly, and the file as long as they say."""
    size = file.stat().st_size
    if size > MAX_FILE_BYTES:
        raise DraftFileError(f"{file}: {size} bytes; a head file may hold at most "
                             f"{MAX_FILE_BYTES}")
    with open(file, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if not 0 < n <= min(MAX_HEADER_BYTES, size - 8):
            raise DraftFileError(f"{file}: header length {n} is not in [1, "
                                 f"{min(MAX_HEADER_BYTES, size - 8)}]")
        try:
            header = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError) as error:
            raise DraftFileError(f"{file}: header is not JSON: {error}") from None
    if not isinstance(header, dict):
        raise DraftFileError(f"{file}: header is not a JSON object")
    header.pop("__metadata__", None)
    expected = _tensor_shapes(sizes)
    for name in sorted(set(header) | set(expected)):
        if name not in expected:
            raise DraftFileError(f"{file}: tensor '{name}' is not part of an exported head")
        if name not in header:
            raise DraftFileError(f"{file}: missing tensor '{name}'")
    spans = []
    for name, (shape, dtypes) in expected.items():
        entry = header[name]
        got = entry.get("shape") if isinstance(entry, dict) else None
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        if dtype not in dtypes or got != list(shape):
            raise DraftFileError(f"{file}: tensor '{name}' is {dtype} {got}; the config says "
                                 f"{' or '.join(dtypes)} {list(shape)}")
        start, end = (entry.get("data_offsets") or [None, None])[:2]
        if not (isinstance(start, int) and isinstance(end, int)
                and end - start == _DTYPES[dtype][1] * int(np.prod(shape))):
            raise DraftFileError(f"{file}: tensor '{name}' has data_offsets "
                                 f"{entry.get('data_offsets')!r}, not {list(shape)} of {dtype}")
        spans.append((start, end))
    spans.sort()
    if spans[0][0] != 0 or any(a[1] != b[0] for a, b in zip(spans, spans[1:], strict=False)) \
            or 8 + n + spans[-1][1] != size:
        raise DraftFileError(f"{file}: {size} bytes; the header's tensors need "
                             f"{8 + n + spans[-1][1]}, laid end to end from 0")


def _read(file: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return load_file(str(file))
    except (SafetensorError, OSError, ValueError, TypeError) as error:
        raise DraftFileError(f"{file}: not a readable safetensors file: {error}") from None


def _expect(file: Path, name: str, got: np.ndarray, want: np.ndarray, what: str) -> None:
    if not np.array_equal(np.asarray(got, np.float32), want):
        raise NotRepresentableError(f"{file}: tensor '{name}' is not {what}: onebit's head "
                                    "cannot compute what this file says")


def onebit_tensors(file: Path, t: dict[str, np.ndarray], sizes: dict[str, int]
                   ) -> dict[str, np.ndarray]:
    """The layout's tensors back as onebit's, after checking the structure `layout_tensors`
    writes (anything else is a head onebit's head cannot run) and the vocabulary maps."""
    h, v = sizes["hidden"], sizes["vocab"]
    for name, value in t.items():
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise DraftFileError(f"{file}: tensor '{name}' holds non-finite values")
    p = "layers.0."
    eye, zeros, ones = np.eye(h, dtype=np.float32), np.zeros((h, h), np.float32), np.ones(h)
    for name in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
        _expect(file, p + name + ".weight", t[p + name + ".weight"], ones, "all ones")
    for name in ("q_proj", "k_proj"):
        _expect(file, f"{p}self_attn.{name}.weight", t[f"{p}self_attn.{name}.weight"],
                np.zeros((2 * h, 2 * h), np.float32), "zero (onebit's head has no attention)")
    v_proj = np.asarray(t[p + "self_attn.v_proj.weight"], np.float32)
    _expect(file, p + "self_attn.v_proj.weight", v_proj[h:], np.block([zeros, eye]),
            "[W_in; 0 | I] (its lower half is not [0 | I])")
    _expect(file, p + "self_attn.o_proj.weight", t[p + "self_attn.o_proj.weight"],
            np.concatenate([eye, -eye], axis=1), "[I | -I]")
    offsets = np.asarray(t["d2t"], np.int64)
    ids = np.arange(len(offsets), dtype=np.int64) + offsets
    if ids.min() < 0 or ids.max() >= v or (len(ids) > 1 and not (np.diff(ids) > 0).all()):
        bad = int(np.argmax((ids < 0) | (ids >= v))) if ((ids < 0) | (ids >= v)).any() else None
        where = f" (draft id {bad}: offset {int(offsets[bad])} gives {int(ids[bad])})" \
            if bad is not None else ""
        raise DraftFileError(f"{file}: tensor 'd2t' holds offsets whose target ids j + d2t[j] "
                             f"are not distinct, increasing and in [0, {v}){where}")
    mask = np.zeros(v, bool)
    mask[ids] = True
    if not np.array_equal(np.asarray(t["t2d"], bool), mask):
        raise DraftFileError(f"{file}: tensor 't2d' is not the mask of d2t's target ids")
    f32 = np.float32
    return {"fuse.weight": np.asarray(t["fc.weight"], f32),
            "into.weight": np.ascontiguousarray(np.concatenate([v_proj[:h, h:], v_proj[:h, :h]],
                                                               axis=1)),
            "gate.weight": np.asarray(t[p + "mlp.gate_proj.weight"], f32),
            "up.weight": np.asarray(t[p + "mlp.up_proj.weight"], f32),
            "down.weight": np.asarray(t[p + "mlp.down_proj.weight"], f32),
            "out_norm": np.asarray(t["norm.weight"], f32), "d2t": ids}


def load_eagle3(path: str | Path, base: object, *, base_path: str | Path | None = None,
                k: int | None = None, compiled: bool | None = None,
                quantise: bool | None = None) -> EagleHead:
    """The `EagleHead` of an EAGLE-3 directory `export_eagle3` wrote, for `base`. Every check
    names the file and the value: config fields, the header's sizes against the config before
    any tensor is read, the structure onebit writes, d2t's offsets in range, t2d, and lm_head
    equal to the base's own rows (onebit's head scores with those, so a file with others would
    draft differently here than in an engine)."""

    from onebit.heads.eagle import read_head_config

    path = Path(path)
    raw, cfg_file = read_head_config(path, "an EAGLE-3 head")
    sizes, config = read_layout_config(raw, str(cfg_file))
    file = path / WEIGHTS_FILE
    if not file.is_file():
        raise DraftFileError(f"{file}: missing (the head's weights)")
    check_header(file, sizes)
    stored = _read(file)
    tensors = onebit_tensors(file, stored, sizes)
    check_base(config, base, base_path)
    _expect(file, "lm_head.weight", stored["lm_head.weight"], _base_rows(base, tensors["d2t"]),
            "the base's own lm_head rows of d2t")
    return EagleHead(config, tensors, base, base_path=base_path, k=k, compiled=compiled,
                     quantise=quantise)
