"""Small GGUF files made in code, for tests, the fuzz suite and benchmarks.

`fabricate_gguf` writes a model of one of the supported architectures with `gguf.GGUFWriter`
(llama.cpp's own writer), every matrix in the ggml type asked for, and returns the float32
weights a correct reader must produce, by HF name. Those reference values are computed
independently of onebit's reader: quantised blocks are random bytes (with finite, small
float16 scales) decoded by `gguf.quants.dequantize`, in HF row order; for `llama` the rows of
q/k are then shuffled into llama.cpp's order before writing, as its converter does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from onebit.gguf.mapping import LAYER_NAMES, LAYER_SETS, LAYER_TENSORS, hf_values
from onebit.gguf.types import BY_NAME, SUPPORTED

# byte offsets of the float16 scale / min fields in each block type
_F16_FIELDS = {"Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2),
               "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}


def permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter's row order for q/k (the inverse of `mapping.unpermute`): each
    head's two rotary halves interleaved row by row."""
    half = rows.shape[0] // heads // 2
    return np.ascontiguousarray(
        rows.reshape(heads, 2, half, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape))


def encode(values_or_none, type_name: str, shape: tuple[int, int] | tuple[int, ...],
           rng: np.random.Generator) -> np.ndarray:
    """A tensor of `shape` stored as `type_name`: floats for F32 / F16 (from `values_or_none`,
    or random), bytes for BF16 and the block types (random blocks with small finite scales)."""
    if type_name in ("F32", "F16"):
        values = values_or_none if values_or_none is not None else rng.normal(0, 0.1, shape)
        return values.astype(np.float32 if type_name == "F32" else np.float16)
    if type_name == "BF16":
        f32 = rng.normal(0, 0.1, shape).astype(np.float32)
        return (f32.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(
            *shape[:-1], shape[-1] * 2)
    _, block, size = SUPPORTED[BY_NAME[type_name]]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    blocks = rng.integers(0, 256, (rows * shape[-1] // block, size), dtype=np.uint8)
    # K types multiply the float16 scale by a 6- or 8-bit sub-scale: keep their product small
    top = 0.002 if type_name.endswith("_K") else 0.02
    for at in _F16_FIELDS[type_name]:
        scale = rng.uniform(top / 10, top, len(blocks)).astype(np.float16)
        blocks[:, at:at + 2] = scale.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(*shape[:-1], shape[-1] // block * size)


def reference(stored: np.ndarray, type_name: str, shape: tuple[int, ...]) -> np.ndarray:
    """What `stored` means as float32, by gguf's own decoder (independent of onebit's)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    qtype = GGMLQuantizationType[type_name]
    return np.asarray(dequantize(stored, qtype), dtype=np.float32).reshape(shape)


def fabricate_gguf(path: str | Path, arch: str = "llama", *, matrix_type: str = "Q8_0",
                   embed_type: str | None = None, layers: int = 2, hidden: int = 64,
                   heads: int = 4, kv_heads: int = 2, head_dim: int | None = None,
                   ffn: int = 96, vocab: int = 80, tied: bool = True, seed: int = 0,
                   fields: dict[str, Any] | None = None,
                   extra_tensors: dict[str, np.ndarray] | None = None,
                   ) -> dict[str, np.ndarray]:
    """Write a tiny `arch` model to `path`; return its weights as float32 by HF name.

    `matrix_type` is every linear's ggml type, `embed_type` the embedding's (default the
    same); norms and biases are F32, as llama.cpp writes them (Gemma 2's and 3's as 1 + w,
    returned as HF's w in float64; their sliding window is 4 unless `fields` says otherwise;
    Phi-3's q/k/v and gate/up fused, returned under HF's fused names `qkv_proj` and
    `gate_up_proj`; `tied=False` on gemma2 writes an `output.weight` the reader refuses, as
    llama.cpp never reads one). `fields`
    adds or overrides metadata (a value of None removes the key); `extra_tensors` adds F32
    tensors.
    """
    import gguf

    rng = np.random.default_rng(seed)
    D = head_dim or hidden // heads
    shapes = {"attn_norm.weight": (hidden,), "ffn_norm.weight": (hidden,),
              "attn_q.weight": (heads * D, hidden), "attn_k.weight": (kv_heads * D, hidden),
              "attn_v.weight": (kv_heads * D, hidden), "attn_output.weight": (hidden, heads * D),
              "ffn_gate.weight": (ffn, hidden), "ffn_up.weight": (ffn, hidden),
              "ffn_down.weight": (hidden, ffn), "attn_q.bias": (heads * D,),
              "attn_k.bias": (kv_heads * D,), "attn_v.bias": (kv_heads * D,),
              "attn_q_norm.weight": (D,), "attn_k_norm.weight": (D,),
              "post_attention_norm.weight": (hidden,), "post_ffw_norm.weight": (hidden,),
              "attn_qkv.weight": ((heads + 2 * kv_heads) * D, hidden)}
    if arch == "phi3":  # gate and up in one tensor, gate first
        shapes["ffn_up.weight"] = (2 * ffn, hidden)
    names = LAYER_NAMES.get(arch, LAYER_TENSORS)
    plan: list[tuple[str, str, tuple[int, ...], str]] = [
        ("token_embd.weight", "model.embed_tokens.weight", (vocab, hidden),
         embed_type or matrix_type),
        ("output_norm.weight", "model.norm.weight", (hidden,), "F32")]
    if not tied:
        plan.append(("output.weight", "lm_head.weight", (vocab, hidden), matrix_type))
    for i in range(layers):
        for t in LAYER_SETS[arch]:
            kind = matrix_type if len(shapes[t]) == 2 else "F32"
            plan.append((f"blk.{i}.{t}", f"model.layers.{i}.{names[t]}", shapes[t], kind))
    metadata: dict[str, Any] = {
        f"{arch}.block_count": layers, f"{arch}.embedding_length": hidden,
        f"{arch}.feed_forward_length": ffn, f"{arch}.attention.head_count": heads,
        f"{arch}.attention.head_count_kv": kv_heads, f"{arch}.context_length": 256,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-5, f"{arch}.rope.freq_base": 10000.0,
        "general.name": f"fabricated {arch}",
    }
    if arch in ("gemma2", "gemma3"):  # llama.cpp's converter always writes these two
        metadata[f"{arch}.attention.sliding_window"] = 4
        head_dim = D
    if head_dim is not None:
        metadata[f"{arch}.attention.key_length"] = head_dim
        metadata[f"{arch}.attention.value_length"] = head_dim
    metadata.update(fields or {})
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in metadata.items():
        if value is not None:
            _add_field(writer, key, value)
    out: dict[str, np.ndarray] = {}
    for gguf_name, hf_name, shape, kind in plan:
        values = None
        if kind == "F32" and gguf_name.endswith("norm.weight"):
            values = 1.0 + rng.normal(0, 0.1, shape)
        stored = encode(values, kind, shape, rng)
        out[hf_name] = hf_values(gguf_name, arch, reference(stored, kind, shape))
        if arch == "llama" and gguf_name.endswith(("attn_q.weight", "attn_k.weight")):
            stored = permute(stored, heads if "attn_q" in gguf_name else kv_heads)
        raw_dtype = None if kind in ("F32", "F16") else gguf.GGMLQuantizationType[kind]
        writer.add_tensor(gguf_name, stored, raw_dtype=raw_dtype)
    for name, values in (extra_tensors or {}).items():
        writer.add_tensor(name, np.asarray(values, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _add_field(writer, key: str, value: Any) -> None:
    if isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        writer.add_uint32(key, value)
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, str):
        writer.add_string(key, value)
    else:
        writer.add_array(key, list(value))
