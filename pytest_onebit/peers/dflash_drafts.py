"""DFlash and DSpark draft GGUFs for llama-server's `--spec-type draft-dflash` and
`draft-dspark`, fabricated here as Hugging Face checkpoints and converted by llama.cpp's own
converter (docs/peers.md, "The MTP, DFlash and DSpark arms").

A DFlash draft is a separate GGUF of arch `dflash`: an encoder `fc` from the target's hidden
rows (the inputs of the target layers named by `<arch>.target_layers`) to the draft's width, a
`hidden_norm`, a few Qwen3-style decoder blocks (q/k norms) that denoise a block of
`[last token, <mask> x (block_size - 1)]` in one pass, and no embeddings or head of its own:
it reads the target's (`ctx_other`), so its width must be the target's. DSpark is the same
file with a Markov head (`markov_w1`, `markov_w2`) that llama.cpp detects by `markov_w1.weight`.
The target can be any architecture whose graph exposes its layers' inputs, SmolLM2's `llama`
among them.

`dflash_drafts(target, source)` returns {"dflash": GGUF, "dspark": GGUF}:

1. the target in HF form (`eagle3_drafts.hf_target`: config.json and tokenizer.json, which the
   converter reads for the vocabulary, `--target-model-dir`);
2. a checkpoint folder written here: config.json (`DFlashDraftModel` or `DSparkDraftModel`,
   the target's width, heads and vocabulary, one decoder block, `dflash_config` with the
   mask token, the target layers and the block size) and model.safetensors, every weight
   seeded random (numpy's PCG64);
3. llama.cpp's `convert_hf_to_gguf.py CHECKPOINT --target-model-dir HF` (`eagle3_drafts.convert`,
   which refuses a file that is not arch `dflash`).

Cached like the EAGLE-3 drafts, `$ONEBIT_HOME/drafts/<target>-<sha256>/<kind><seed>-<key>.gguf`,
the key the sha256 of the recipe (the target's sha256, the kind, the seed, the checkpoint's
config, this module's source, the converter's sources, the transformers version).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np

from pytest_onebit.peers.eagle3_drafts import (
    DraftMakeError,
    _sha256_files,
    convert,
    hf_target,
    require_source,
    with_architectures,
)

KINDS = ("dflash", "dspark")
DEFAULT_SEED = 5
#: the converter's sources whose content keys the cache (the DFlash / DSpark classes are in
#: conversion/qwen.py)
CONVERTER_FILES = ("convert_hf_to_gguf.py", "conversion/base.py", "conversion/qwen.py")
LAYERS = 1
FF = 256
BLOCK_SIZE = 8       # tokens a block denoises: up to 7 drafts (DFlash), 8 (DSpark)
MARKOV_RANK = 16
#: the target layers the draft reads (their inputs), as HF ids: llama.cpp extracts id + 1
TARGET_LAYERS_FROM_END = (28, 15, 2)
ARCHITECTURE = {"dflash": "DFlashDraftModel", "dspark": "DSparkDraftModel"}


class DFlashDraftError(DraftMakeError):
    """A DFlash or DSpark draft could not be made (a target whose HF config lacks a field the
    draft copies, or a conversion that failed)."""


def draft_config(target: dict, kind: str, mask_token_id: int) -> dict:
    """config.json of the fabricated draft, from the target's HF config: its width, heads,
    head size and vocabulary (the draft reads the target's embeddings and head)."""
    try:
        hidden, heads = int(target["hidden_size"]), int(target["num_attention_heads"])
        kv = int(target.get("num_key_value_heads", heads))
        layers, vocab = int(target["num_hidden_layers"]), int(target["vocab_size"])
    except (KeyError, TypeError, ValueError) as error:
        raise DFlashDraftError(f"the target's config.json lacks {error}: the draft copies "
                               f"its width, heads, layers and vocabulary") from error
    picked = sorted({max(0, layers - 1 - k) for k in TARGET_LAYERS_FROM_END if k < layers})
    return {"architectures": [ARCHITECTURE[kind]], "model_type": "qwen3",
            "hidden_size": hidden, "num_hidden_layers": LAYERS, "intermediate_size": FF,
            "num_attention_heads": heads, "num_key_value_heads": kv,
            "head_dim": int(target.get("head_dim") or hidden // heads),
            "rms_norm_eps": float(target.get("rms_norm_eps", 1e-5)),
            "rope_theta": float(target.get("rope_theta")
                                or (target.get("rope_parameters") or {}).get("rope_theta")
                                or 10000.0),
            "max_position_embeddings": int(target.get("max_position_embeddings", 8192)),
            "vocab_size": vocab, "hidden_act": "silu", "tie_word_embeddings": False,
            "torch_dtype": "float32", "block_size": BLOCK_SIZE,
            "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": picked,
                              "block_size": BLOCK_SIZE}}


def draft_weights(config: dict, kind: str, seed: int) -> dict[str, np.ndarray]:
    """Every tensor of the fabricated draft under its HF name, seeded random, f32."""
    rng = np.random.default_rng(seed)
    d, hd = config["hidden_size"], config["head_dim"]
    q, kv = config["num_attention_heads"] * hd, config["num_key_value_heads"] * hd
    n_inp = len(config["dflash_config"]["target_layer_ids"]) * d

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, np.float32)

    w = {"fc.weight": mat(d, n_inp), "hidden_norm.weight": ones(d), "norm.weight": ones(d)}
    for i in range(LAYERS):
        b = f"layers.{i}."
        w.update({b + "input_layernorm.weight": ones(d),
                  b + "self_attn.q_proj.weight": mat(q, d),
                  b + "self_attn.k_proj.weight": mat(kv, d),
                  b + "self_attn.v_proj.weight": mat(kv, d),
                  b + "self_attn.o_proj.weight": mat(d, q),
                  b + "self_attn.q_norm.weight": ones(hd), b + "self_attn.k_norm.weight": ones(hd),
                  b + "post_attention_layernorm.weight": ones(d),
                  b + "mlp.gate_proj.weight": mat(FF, d), b + "mlp.up_proj.weight": mat(FF, d),
                  b + "mlp.down_proj.weight": mat(d, FF)})
    if kind == "dspark":
        vocab = config["vocab_size"]
        w.update({"markov_head.markov_w1.weight": mat(vocab, MARKOV_RANK),
                  "markov_head.markov_w2.weight": mat(vocab, MARKOV_RANK)})
    return w


def write_checkpoint(target_hf: str | Path, folder: str | Path, kind: str, seed: int,
                     mask_token_id: int) -> Path:
    """The fabricated draft as an HF checkpoint folder: config.json and model.safetensors."""
    from safetensors.numpy import save_file

    if kind not in KINDS:
        raise ValueError(f"unknown draft kind {kind!r}; one of {', '.join(KINDS)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = json.loads((Path(target_hf) / "config.json").read_text())
    config = draft_config(target, kind, mask_token_id)
    (folder / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True))
    save_file(draft_weights(config, kind, seed), str(folder / "model.safetensors"))
    return folder


def _mask_token(hf: Path) -> int:
    """The draft's mask token: the target's unknown token (else its end-of-text token). The
    target has no mask token of its own, and DFlash only needs a fixed id whose embedding
    fills the masked slots of a block."""
    config = json.loads((hf / "config.json").read_text())
    for key in ("unk_token_id", "eos_token_id"):
        if isinstance(config.get(key), int):
            return config[key]
    return 0


def dflash_drafts(target: str | Path, source: str | Path | None, *,
                  kinds: tuple[str, ...] = KINDS, seed: int = DEFAULT_SEED) -> dict[str, Path]:
    """{kind: the DFlash / DSpark draft GGUF for `target`}, made as the module says and
    cached by the content of what made them."""
    import transformers

    from onebit.gguf.derive import drafts_home
    from onebit.hub import sha256_of

    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown draft kind {unknown[0]!r}; one of {', '.join(KINDS)}")
    target = Path(target)
    if not target.is_file():
        raise DFlashDraftError(f"the target {str(target)!r} is not a file")
    source = require_source(source)
    missing = [n for n in CONVERTER_FILES if not (source / n).is_file()]
    if missing:
        raise DFlashDraftError(f"{source} has no {', '.join(missing)}: a llama.cpp tree "
                               f"older than its DFlash converter")
    target_sha = sha256_of(target)
    folder = drafts_home() / f"{target.stem}-{target_sha[:16]}"
    hf = with_architectures(
        hf_target(target, folder / f"hf-target-transformers{transformers.__version__}"))
    mask = _mask_token(hf)
    made = {}
    for kind in kinds:
        config = draft_config(json.loads((hf / "config.json").read_text()), kind, mask)
        plan = {"target_sha256": target_sha, "kind": kind, "seed": seed, "config": config,
                "maker_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
                "converter_sha256": _sha256_files(source, CONVERTER_FILES),
                "transformers": transformers.__version__}
        key = hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()[:16]
        name = f"{kind}{seed}-{key}"
        out = folder / f"{name}.gguf"
        if not out.is_file():
            with tempfile.TemporaryDirectory() as scratch:
                checkpoint = write_checkpoint(hf, Path(scratch) / "draft", kind, seed, mask)
                convert(source, checkpoint, hf, out, arch="dflash")
            (folder / f"{name}.json").write_text(json.dumps(plan, indent=1, sort_keys=True))
        made[kind] = out
    return made


__all__ = ["DEFAULT_SEED", "DFlashDraftError", "KINDS", "dflash_drafts", "draft_config",
           "draft_weights", "write_checkpoint"]
