"""Phi-3 on the GGUF path, on fabricated files (no download): the logits equal a reference
written here from llama.cpp's phi3 graph (src/models/phi3.cpp: the fused attn_qkv sliced by
rows, swiglu over the fused ffn_up, gate first), reading the file with gguf's own reader and
dequantiser; the fused tensors are cut by rows in every stored form (float, ggml blocks kept
for the integer kernel, Q4NX) into exactly the rows of the fused one; the window and LongRoPE
are refused by name. PH1..PH3 are the checks the phi3 mutants (mutants/gemma2_phi3/) name."""

from __future__ import annotations

import numpy as np
import pytest
from family_checks import float64_gguf

from onebit.gguf import UnsupportedGGUFError, read_gguf
from onebit.gguf.fabricate import fabricate_gguf
from onebit.models import ModelInputError, UnsupportedModelError, fabricate_model, load_model

TOKENS = [3, 5, 7, 11, 13, 17, 19, 23, 29, 31]
SIZES = dict(layers=2, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=80, tied=False)


@pytest.fixture(scope="module")
def phi3_file(tmp_path_factory):
    """A tiny Phi-3 GGUF as llama.cpp's converter writes one: fused attn_qkv and ffn_up
    (gate, up), grouped-query heads, an untied output, Q8_0 matrices, no window (0)."""
    path = tmp_path_factory.mktemp("phi3") / "tiny.gguf"
    fabricate_gguf(path, "phi3", fields={"phi3.attention.sliding_window": 0,
                                         "phi3.rope.scaling.original_context_length": 4096},
                   **SIZES)
    return path


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def reference_logits(path, tokens) -> np.ndarray:
    """llama.cpp's phi3 graph in float64, every position recomputed from scratch with an
    explicit causal mask, from the file's values as gguf decodes them."""
    meta, W = float64_gguf(path)
    L, H = meta("phi3.block_count"), meta("phi3.embedding_length")
    Hq, Hkv = meta("phi3.attention.head_count"), meta("phi3.attention.head_count_kv")
    eps, base = meta("phi3.attention.layer_norm_rms_epsilon"), meta("phi3.rope.freq_base")
    D, T = H // Hq, len(tokens)
    x = W["token_embd.weight"][tokens]
    inv = base ** (-np.arange(0, D, 2, dtype=np.float64) / D)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(v):  # NEOX: pairs (j, j + D/2)
        a, b = v[..., : D // 2], v[..., D // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    for i in range(L):
        b = f"blk.{i}."
        h = _rms(x, W[b + "attn_norm.weight"], eps)
        qkv = h @ W[b + "attn_qkv.weight"].T  # build_qkv's views: q, then k, then v
        q = rope(qkv[:, : Hq * D].reshape(T, Hq, D)) / np.sqrt(D)
        k = rope(qkv[:, Hq * D: (Hq + Hkv) * D].reshape(T, Hkv, D))
        v = qkv[:, (Hq + Hkv) * D:].reshape(T, Hkv, D)
        out = np.zeros((T, Hq, D))
        for p1 in range(T):
            for head in range(Hq):
                g = head // (Hq // Hkv)
                s = k[: p1 + 1, g] @ q[p1, head]
                e = np.exp(s - s.max())
                out[p1, head] = (e / e.sum()) @ v[: p1 + 1, g]
        x = x + out.reshape(T, Hq * D) @ W[b + "attn_output.weight"].T
        h = _rms(x, W[b + "ffn_norm.weight"], eps)
        up = h @ W[b + "ffn_up.weight"].T  # swiglu: silu(first half) * second half
        F = up.shape[1] // 2
        gate = up[:, :F]
        x = x + (gate / (1 + np.exp(-gate)) * up[:, F:]) @ W[b + "ffn_down.weight"].T
    return _rms(x, W["output_norm.weight"], eps) @ W["output.weight"].T


def test_PH1_logits_equal_llama_cpp_graph(phi3_file):
    """Every position's float64 logits equal the reference graph's within 1e-9 of the logit
    range: q/k/v cut from attn_qkv in that order, gate then up from ffn_up, NEOX RoPE over the
    whole head, the untied output are each what llama.cpp computes."""
    model = load_model(phi3_file, dtype="float64", kernel="numpy")
    ours = np.stack([model.step(t, p) for p, t in enumerate(TOKENS)])
    want = reference_logits(phi3_file, TOKENS)
    span = float(want.max() - want.min())
    assert np.abs(ours - want).max() <= 1e-9 * span, np.abs(ours - want).max(axis=1) / span


def test_PH2_fused_rows_are_cut_exactly(phi3_file, tmp_path):
    """The cut parts hold exactly the fused tensor's rows, in every stored form: float (the
    numpy kernel's), ggml blocks kept for the integer kernel (Q8_0 rows are whole blocks, cut
    as bytes and decoded after), and a Q4NX container's fused blocks (cut on 32-row block
    rows); on the Q4NX model a verify gives stepping's bits."""
    from onebit.models import blocks, q4nx
    from onebit.models.phi3 import Phi3Config, unfuse_phi3
    from onebit.models.weights import load_tensors

    p = "model.layers.1."
    fused = read_gguf(phi3_file).tensors
    qkv = fused[p + "self_attn.qkv_proj.weight"].data
    gate_up = fused[p + "mlp.gate_up_proj.weight"].data
    w = load_model(phi3_file, dtype="float32", kernel="numpy").weights
    parts = [w.get(p + f"self_attn.{n}_proj.weight") for n in "qkv"]
    assert [x.shape[0] for x in parts] == [64, 32, 32]
    assert np.array_equal(np.concatenate(parts), qkv)
    halves = [w.get(p + f"mlp.{n}_proj.weight") for n in ("gate", "up")]
    assert np.array_equal(np.concatenate(halves), gate_up)
    kept = read_gguf(phi3_file, keep_blocks=True)
    cut = unfuse_phi3(Phi3Config.from_dict(kept.config), kept.tensors, "kept")
    names = [f"self_attn.{n}_proj" for n in "qkv"] + ["mlp.gate_proj", "mlp.up_proj"]
    decoded = []
    for name in names:
        stored = cut[p + name + ".weight"]
        assert stored.kind == "q8_0"
        decoded.append(blocks.dequantize(stored.data, "q8_0", (stored.data.shape[0], 64)))
    assert np.array_equal(np.concatenate(decoded[:3]), qkv)
    assert np.array_equal(np.concatenate(decoded[3:]), gate_up)

    path = fabricate_model(tmp_path / "q", "phi3")  # Q4NX blocks, fused as HF stores them
    model = load_model(path, dtype="float32", kernel="numpy", max_batch_rows=4)
    stored = load_tensors(path, "q4nx")[p + "mlp.gate_up_proj.weight"].data
    whole = q4nx.dequantize(stored, 1024, 256, convention="unsigned", dtype=np.float32)
    assert np.array_equal(model.weights.get(p + "mlp.gate_proj.weight"), whole[:512])
    assert np.array_equal(model.weights.get(p + "mlp.up_proj.weight"), whole[512:])
    stepped = [model.step(t, i) for i, t in enumerate(TOKENS[:6])]
    model.reset()
    model.step(TOKENS[0], 0)
    assert np.array_equal(model.verify(TOKENS[1:5], 1), np.stack(stepped[1:5]))


def test_PH3_window_and_longrope_are_refused_by_name(tmp_path):
    """A window (Phi-3 mini 4k's 2047, here 6) is honoured up to where it starts to matter and
    refused from there, naming it; LongRoPE's factor tensors and attention factor, partial
    rotary, a q/k/v tensor llama.cpp's converter never writes unfused, and a config.json with
    LongRoPE are refused naming them."""
    path = tmp_path / "w.gguf"
    fabricate_gguf(path, "phi3", fields={"phi3.attention.sliding_window": 6}, **SIZES)
    model = load_model(path, dtype="float32", kernel="numpy")
    assert model.config.sliding_window == 6
    for pos, token in enumerate(TOKENS[:6]):
        model.step(token, pos)
    with pytest.raises(ModelInputError, match="sliding window"):
        model.step(TOKENS[6], 6)
    for extra, name in (({"rope_factors_long.weight": np.ones(8)}, "rope_factors_long.weight"),
                        ({"blk.0.attn_q.weight": np.ones((64, 64))}, "blk.0.attn_q.weight")):
        fabricate_gguf(path, "phi3", extra_tensors=extra, **SIZES)
        with pytest.raises(UnsupportedGGUFError, match=f"'{name}'"):
            read_gguf(path)
    for key, value in (("phi3.rope.scaling.attn_factor", 1.19),
                       ("phi3.rope.dimension_count", 8)):
        fabricate_gguf(path, "phi3", fields={key: value}, **SIZES)
        with pytest.raises(UnsupportedGGUFError, match=f"'{key}'"):
            read_gguf(path)
    from onebit.models.phi3 import Phi3Config, tiny_phi3_config

    raw = tiny_phi3_config().to_dict()
    longrope = {"rope_type": "longrope", "rope_theta": 1e4, "long_factor": [1.0] * 32,
                "short_factor": [1.0] * 32}
    for key, value in (("rope_scaling", longrope), ("rope_parameters", longrope),
                       ("partial_rotary_factor", 0.75), ("hidden_act", "gelu"),
                       ("use_laurel", True)):
        with pytest.raises(UnsupportedModelError, match=f"'{key}"):
            Phi3Config.from_dict({**raw, key: value})
