"""Gemma 3 on the GGUF path, on fabricated files (no download): the logits equal a reference
written here from llama.cpp's gemma3 graph (src/models/gemma3.cpp), reading the file with
gguf's own reader and dequantiser; verify rows equal stepping bit for bit; the mapping reads
what llama.cpp reads and fixes what it fixes; what is not implemented is refused by name.
G1..G3 are the checks the Gemma 3 mutants (mutants/gemma3/) name."""

from __future__ import annotations

import math

import numpy as np
import pytest
from family_checks import assert_verify_equals_steps, float64_gguf

from onebit.gguf import UnsupportedGGUFError, read_gguf
from onebit.gguf.fabricate import fabricate_gguf
from onebit.models import ModelConfigError, UnsupportedModelError, load_model

TOKENS = [3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47]  # past the window of 4, twice
SIZES = dict(layers=6, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=96, vocab=80)
FIELDS = {"gemma3.final_logit_softcapping": 20.0, "gemma3.rope.freq_base": 1_000_000.0,
          "gemma3.rope.scaling.type": "linear", "gemma3.rope.scaling.factor": 2.0}


@pytest.fixture(scope="module")
def gemma3_file(tmp_path_factory):
    """A tiny Gemma 3 GGUF: five sliding layers and a global one (llama.cpp's pattern), a
    window of 4, grouped-query heads, Q8_0 matrices, final soft-capping at 20, linear RoPE
    scaling on the global layer."""
    path = tmp_path_factory.mktemp("gemma3") / "tiny.gguf"
    fabricate_gguf(path, "gemma3", fields=FIELDS, **SIZES)
    return path


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def reference_logits(path, tokens) -> np.ndarray:
    """llama.cpp's gemma3 graph in float64, every position recomputed from scratch with an
    explicit mask (no cache, no ring), from the file's values as gguf decodes them: the norms
    multiply by the stored weight (llama.cpp's converter stored 1 + w)."""
    meta, W = float64_gguf(path)
    L, H = meta("gemma3.block_count"), meta("gemma3.embedding_length")
    Hq, Hkv = meta("gemma3.attention.head_count"), meta("gemma3.attention.head_count_kv")
    D, eps = meta("gemma3.attention.key_length"), meta("gemma3.attention.layer_norm_rms_epsilon")
    window, cap = meta("gemma3.attention.sliding_window", 0), meta("gemma3.final_logit_softcapping")
    freq_base = meta("gemma3.rope.freq_base", 10000.0)
    scale = 1.0 / meta("gemma3.rope.scaling.factor", 1.0)
    T = len(tokens)
    x = W["token_embd.weight"][tokens] * math.sqrt(H)
    pos = np.arange(T, dtype=np.float64)

    def rope(v, base, freq_scale):  # NEOX: pairs (j, j + D/2)
        inv = base ** (-np.arange(0, D, 2, dtype=np.float64) / D)
        ang = (pos * freq_scale)[:, None] * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = v[..., : D // 2], v[..., D // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    for i in range(L):
        b = f"blk.{i}."
        swa = bool(window) and i % 6 < 5
        h = _rms(x, W[b + "attn_norm.weight"], eps)
        q = (h @ W[b + "attn_q.weight"].T).reshape(T, Hq, D)
        k = (h @ W[b + "attn_k.weight"].T).reshape(T, Hkv, D)
        v = (h @ W[b + "attn_v.weight"].T).reshape(T, Hkv, D)
        q = _rms(q, W[b + "attn_q_norm.weight"], eps)
        k = _rms(k, W[b + "attn_k_norm.weight"], eps)
        base, freq_scale = (10000.0, 1.0) if swa else (freq_base, scale)
        q, k = rope(q, base, freq_scale) * D ** -0.5, rope(k, base, freq_scale)
        out = np.zeros((T, Hq, D))
        for p1 in range(T):
            seen = [p0 for p0 in range(p1 + 1) if not swa or p1 - p0 < window]
            for head in range(Hq):
                g = head // (Hq // Hkv)
                s = np.array([q[p1, head] @ k[p0, g] for p0 in seen])
                e = np.exp(s - s.max())
                out[p1, head] = (e / e.sum()) @ v[seen, g]
        x = x + _rms(out.reshape(T, Hq * D) @ W[b + "attn_output.weight"].T,
                     W[b + "post_attention_norm.weight"], eps)
        h = _rms(x, W[b + "ffn_norm.weight"], eps)
        g = h @ W[b + "ffn_gate.weight"].T
        gelu = 0.5 * g * (1 + np.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))
        m = (gelu * (h @ W[b + "ffn_up.weight"].T)) @ W[b + "ffn_down.weight"].T
        x = x + _rms(m, W[b + "post_ffw_norm.weight"], eps)
    logits = _rms(x, W["output_norm.weight"], eps) @ W.get("output.weight",
                                                          W["token_embd.weight"]).T
    return cap * np.tanh(logits / cap) if cap else logits


def test_G1_logits_equal_llama_cpp_graph(gemma3_file):
    """Every position's float64 logits equal the reference graph's within 1e-9 of the logit
    range: sliding window, both RoPE bases (and the global scaling), q/k norms, the four
    norms, the query scale, tied lm_head and soft-capping are each what llama.cpp computes
    (each off by a little moves them by far more; mutants/gemma3/)."""
    model = load_model(gemma3_file, dtype="float64", kernel="numpy")
    ours = np.stack([model.step(t, p) for p, t in enumerate(TOKENS)])
    want = reference_logits(gemma3_file, TOKENS)
    span = float(want.max() - want.min())
    assert np.abs(ours - want).max() <= 1e-9 * span, np.abs(ours - want).max(axis=1) / span
    assert 15.0 < np.abs(ours).max() < 20.0  # the cap bites (it is 20; uncapped: 80)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_G2_verify_rows_equal_steps(gemma3_file, dtype):
    """A verify of every width 1..8, at positions before, across and past the window (the
    sliding ring wraps), gives stepping's logits bit for bit, and a partial commit leaves
    stepping's state: the next step is the stepped one."""
    model = load_model(gemma3_file, dtype=dtype, kernel="numpy", max_batch_rows=8)
    assert_verify_equals_steps(model, TOKENS, (0, 2, 5))


def test_G3_mapping_reads_what_llama_cpp_reads(tmp_path):
    """The config the file maps to: layer i global when (i + 1) % 6 == 0; the local base 10000
    unless `rope.freq_base_swa` says otherwise, unscaled; the global base and its linear factor;
    the window; the query scale head_dim^-0.5; soft-capping only when the file has it; every
    layer global without a window; and the stored 1 + w norm weight back bit for bit as the
    factor in float32."""
    path = tmp_path / "a.gguf"
    fabricate_gguf(path, "gemma3", fields=FIELDS, **{**SIZES, "layers": 12})
    config = load_model(path, dtype="float32", kernel="numpy").config
    assert [i for i, t in enumerate(config.layer_types) if t == "full_attention"] == [5, 11]
    assert config.rope["sliding_attention"] == {"rope_type": "default", "rope_theta": 10000.0}
    assert config.rope["full_attention"] == {"rope_type": "linear", "rope_theta": 1e6,
                                             "factor": 2.0}
    assert config.sliding_window == 4 and config.attention_scale == 16 ** -0.5
    assert config.final_logit_softcapping == 20.0
    fabricate_gguf(path, "gemma3", fields={"gemma3.attention.sliding_window": None,
                                           "gemma3.rope.freq_base_swa": 500.0}, **SIZES)
    model = load_model(path, dtype="float32", kernel="numpy")
    assert set(model.config.layer_types) == {"full_attention"}
    assert model.config.final_logit_softcapping is None
    assert model.config.rope["sliding_attention"]["rope_theta"] == 500.0
    import gguf

    stored = {t.name: t.data for t in gguf.GGUFReader(str(path)).tensors}
    factor = model._norms["model.layers.0.pre_feedforward_layernorm.weight"]
    assert factor.dtype == np.float32
    assert np.array_equal(factor, stored["blk.0.ffn_norm.weight"])


def test_unread_fields_and_tensors_are_refused_by_name(tmp_path):
    """A gemma3 field llama.cpp's gemma3 does not read (attention soft-capping, a layer
    pattern) and a tensor the text model does not use (a vision tower's) are refused naming
    them; so is a Gemma 3 config.json with a vision tower or attention soft-capping."""
    path = tmp_path / "x.gguf"
    for key, value in (("gemma3.attn_logit_softcapping", 50.0),
                       ("gemma3.attention.sliding_window_pattern", 6)):
        fabricate_gguf(path, "gemma3", fields={key: value}, **SIZES)
        with pytest.raises(UnsupportedGGUFError, match=f"'{key}'"):
            read_gguf(path)
    fabricate_gguf(path, "gemma3", extra_tensors={"v.blk.0.attn_q.weight": np.zeros((4, 4))},
                   **SIZES)
    with pytest.raises(UnsupportedGGUFError, match=r"'v\.blk\.0\.attn_q\.weight'"):
        read_gguf(path)
    from onebit.models.gemma3 import tiny_gemma3_config

    raw = tiny_gemma3_config().to_dict()
    with pytest.raises(UnsupportedModelError, match="'vision_config'"):
        from onebit.models.gemma3_config import Gemma3Config

        Gemma3Config.from_dict({"model_type": "gemma3", "text_config": raw,
                                "vision_config": {"hidden_size": 8}})
    with pytest.raises(UnsupportedModelError, match="'attn_logit_softcapping'"):
        Gemma3Config.from_dict({**raw, "attn_logit_softcapping": 50.0})
    with pytest.raises(UnsupportedModelError, match="'rope_parameters.full_attention.rope_type'"):
        Gemma3Config.from_dict({**raw, "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {"rope_type": "yarn", "rope_theta": 1e6}}})
    with pytest.raises(ModelConfigError, match="'sliding_window'"):
        Gemma3Config.from_dict({**raw, "sliding_window": 0})
