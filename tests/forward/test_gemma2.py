"""Gemma 2 on the GGUF path, on fabricated files (no download): the logits equal a reference
written here from llama.cpp's gemma2 graph (src/models/gemma2.cpp, attention soft-capping from
llama-graph.cpp's build_attn_mha), reading the file with gguf's own reader and dequantiser;
verify rows equal stepping bit for bit with the soft-capping on; the mapping reads what
llama.cpp reads and fixes what it fixes; what is not implemented is refused by name.
GT1..GT3 are the checks the gemma2 mutants (mutants/gemma2_phi3/) name."""

from __future__ import annotations

import math

import numpy as np
import pytest
from family_checks import assert_verify_equals_steps, float64_gguf

from onebit.gguf import UnsupportedGGUFError, read_gguf
from onebit.gguf.fabricate import fabricate_gguf
from onebit.models import ModelConfigError, UnsupportedModelError, load_model

TOKENS = [3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41]  # past the window of 4, twice
SIZES = dict(layers=4, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=96, vocab=80)
FIELDS = {"gemma2.final_logit_softcapping": 20.0, "gemma2.attn_logit_softcapping": 5.0,
          "gemma2.rope.freq_base": 20_000.0}


@pytest.fixture(scope="module")
def gemma2_file(tmp_path_factory):
    """A tiny Gemma 2 GGUF: sliding, global, sliding, global (llama.cpp's pattern), a window of
    4, grouped-query heads, Q8_0 matrices, attention soft-capping at 5 (it bites: the raw scores
    reach several times that), final soft-capping at 20, a RoPE base of 20000."""
    path = tmp_path_factory.mktemp("gemma2") / "tiny.gguf"
    fabricate_gguf(path, "gemma2", fields=FIELDS, **SIZES)
    return path


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def reference_logits(path, tokens, *, attn_cap: bool = True) -> np.ndarray:
    """llama.cpp's gemma2 graph in float64, every position recomputed from scratch with an
    explicit mask (no cache, no ring), from the file's values as gguf decodes them: the norms
    multiply by the stored weight (the converter stored 1 + w); even layers slide; the scores
    are soft-capped before the softmax (`attn_cap=False`: not, to show that it matters)."""
    meta, W = float64_gguf(path)
    L, H = meta("gemma2.block_count"), meta("gemma2.embedding_length")
    Hq, Hkv = meta("gemma2.attention.head_count"), meta("gemma2.attention.head_count_kv")
    D, eps = meta("gemma2.attention.key_length"), meta("gemma2.attention.layer_norm_rms_epsilon")
    window = meta("gemma2.attention.sliding_window", 4096)
    cap_a = meta("gemma2.attn_logit_softcapping", 50.0)
    cap_f = meta("gemma2.final_logit_softcapping", 30.0)
    base = meta("gemma2.rope.freq_base", 10000.0)
    T = len(tokens)
    x = W["token_embd.weight"][tokens] * math.sqrt(H)
    pos = np.arange(T, dtype=np.float64)
    inv = base ** (-np.arange(0, D, 2, dtype=np.float64) / D)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(v):  # NEOX: pairs (j, j + D/2)
        a, b = v[..., : D // 2], v[..., D // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    for i in range(L):
        b = f"blk.{i}."
        swa = i % 2 == 0
        h = _rms(x, W[b + "attn_norm.weight"], eps)
        q = rope((h @ W[b + "attn_q.weight"].T).reshape(T, Hq, D)) * D ** -0.5
        k = rope((h @ W[b + "attn_k.weight"].T).reshape(T, Hkv, D))
        v = (h @ W[b + "attn_v.weight"].T).reshape(T, Hkv, D)
        out = np.zeros((T, Hq, D))
        for p1 in range(T):
            seen = [p0 for p0 in range(p1 + 1) if not swa or p1 - p0 < window]
            for head in range(Hq):
                g = head // (Hq // Hkv)
                s = np.array([q[p1, head] @ k[p0, g] for p0 in seen])
                if attn_cap:
                    s = cap_a * np.tanh(s / cap_a)
                e = np.exp(s - s.max())
                out[p1, head] = (e / e.sum()) @ v[seen, g]
        x = x + _rms(out.reshape(T, Hq * D) @ W[b + "attn_output.weight"].T,
                     W[b + "post_attention_norm.weight"], eps)
        h = _rms(x, W[b + "ffn_norm.weight"], eps)
        g = h @ W[b + "ffn_gate.weight"].T
        gelu = 0.5 * g * (1 + np.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))
        m = (gelu * (h @ W[b + "ffn_up.weight"].T)) @ W[b + "ffn_down.weight"].T
        x = x + _rms(m, W[b + "post_ffw_norm.weight"], eps)
    logits = _rms(x, W["output_norm.weight"], eps) @ W["token_embd.weight"].T
    return cap_f * np.tanh(logits / cap_f)


def test_GT1_logits_equal_llama_cpp_graph(gemma2_file):
    """Every position's float64 logits equal the reference graph's within 1e-9 of the logit
    range: the alternating sliding window, the one RoPE base, the four (1 + w) norms, the
    query scale, attention and final soft-capping are each what llama.cpp computes; the same
    graph without attention soft-capping is far off (the cap bites on this file)."""
    model = load_model(gemma2_file, dtype="float64", kernel="numpy")
    ours = np.stack([model.step(t, p) for p, t in enumerate(TOKENS)])
    want = reference_logits(gemma2_file, TOKENS)
    span = float(want.max() - want.min())
    assert np.abs(ours - want).max() <= 1e-9 * span, np.abs(ours - want).max(axis=1) / span
    uncapped = reference_logits(gemma2_file, TOKENS, attn_cap=False)
    assert np.abs(uncapped - want).max() > 1e-3 * span


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_GT2_verify_rows_equal_steps(gemma2_file, dtype):
    """A verify of every width 1..8, at positions before, across and past the window (the
    sliding ring wraps), gives stepping's logits bit for bit with attention soft-capping on,
    and a partial commit leaves stepping's state: the next step is the stepped one."""
    model = load_model(gemma2_file, dtype=dtype, kernel="numpy", max_batch_rows=8)
    assert_verify_equals_steps(model, TOKENS, (0, 3))


def test_GT3_mapping_reads_what_llama_cpp_reads(tmp_path):
    """The config the file maps to: layer i sliding when i is even, global when odd; one RoPE
    base for both; the window, both caps and the query scale head_dim^-0.5 as the file says;
    without the fields, llama.cpp's defaults (window 4096, caps 50 and 30, base 10000); the
    stored 1 + w norm weight back bit for bit as the factor in float32."""
    path = tmp_path / "a.gguf"
    fabricate_gguf(path, "gemma2", fields=FIELDS, **{**SIZES, "layers": 6})
    config = load_model(path, dtype="float32", kernel="numpy").config
    assert [i for i, t in enumerate(config.layer_types) if t == "full_attention"] == [1, 3, 5]
    assert config.rope["sliding_attention"] == config.rope["full_attention"] == {
        "rope_type": "default", "rope_theta": 20000.0}
    assert config.sliding_window == 4 and config.attention_scale == 16 ** -0.5
    assert (config.attn_logit_softcapping, config.final_logit_softcapping) == (5.0, 20.0)
    fabricate_gguf(path, "gemma2", fields={"gemma2.attention.sliding_window": None}, **SIZES)
    model = load_model(path, dtype="float32", kernel="numpy")
    c = model.config
    assert (c.sliding_window, c.attn_logit_softcapping, c.final_logit_softcapping) == (
        4096, 50.0, 30.0)
    assert c.rope["full_attention"]["rope_theta"] == 10000.0
    import gguf

    stored = {t.name: t.data for t in gguf.GGUFReader(str(path)).tensors}
    factor = model._norms["model.layers.0.pre_feedforward_layernorm.weight"]
    assert factor.dtype == np.float32
    assert np.array_equal(factor, stored["blk.0.ffn_norm.weight"])


def test_unread_fields_and_tensors_are_refused_by_name(tmp_path):
    """What llama.cpp's gemma2 would read and onebit does not (a layer pattern, a sliding RoPE
    base, RoPE scaling), an lm_head tensor llama.cpp never loads and a q/k norm tensor Gemma 2
    has none of are refused naming them; so are a config.json's RoPE scaling, unknown field
    and attention biases."""
    path = tmp_path / "x.gguf"
    for key, value in (("gemma2.attention.sliding_window_pattern", 2),
                       ("gemma2.rope.freq_base_swa", 10000.0),
                       ("gemma2.rope.scaling.type", "linear")):
        fields = {key: value, "gemma2.rope.scaling.factor": 2.0} if "scaling" in key else {
            key: value}
        fabricate_gguf(path, "gemma2", fields=fields, **SIZES)
        with pytest.raises(UnsupportedGGUFError, match=f"'{key}'"):
            read_gguf(path)
    fabricate_gguf(path, "gemma2", tied=False, **SIZES)
    with pytest.raises(UnsupportedGGUFError, match=r"'output\.weight'"):
        read_gguf(path)
    fabricate_gguf(path, "gemma2", extra_tensors={"blk.0.attn_q_norm.weight": np.ones(16)},
                   **SIZES)
    with pytest.raises(UnsupportedGGUFError, match=r"'blk\.0\.attn_q_norm\.weight'"):
        read_gguf(path)
    from onebit.models.gemma2 import Gemma2Config, tiny_gemma2_config

    raw = tiny_gemma2_config().to_dict()
    for key, value in (("rope_scaling", {"rope_type": "linear", "factor": 2.0}),
                       ("attention_bias", True), ("use_laurel", True)):
        with pytest.raises(UnsupportedModelError, match=f"'{key}'"):
            Gemma2Config.from_dict({**raw, key: value})
    with pytest.raises(ModelConfigError, match="'attn_logit_softcapping'"):
        Gemma2Config.from_dict({**raw, "attn_logit_softcapping": -1.0})
    assert Gemma2Config.from_dict({**raw, "attn_logit_softcapping": None}
                                  ).attn_logit_softcapping is None
