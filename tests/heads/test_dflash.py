"""The DFlash draft forward, checked by hand and against transformers' Qwen3 pieces; the head's
context bookkeeping; its files; and the errors for a draft that does not fit its target."""

from __future__ import annotations

import json

import numpy as np
import pytest

import onebit
from onebit.heads import (
    DFlashConfig,
    DFlashDraft,
    DFlashHead,
    DraftFileError,
    DraftMismatchError,
    fabricate_dflash,
    load_dflash,
    tiny_dflash_config,
)
from onebit.heads.dflash import random_dflash_tensors

EPS = 1e-6


def rn(x):
    """RMSNorm without a weight, row by row."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS)


class HandTarget:
    """A target small enough to follow by hand: 3 tokens, hidden size 2, 2 layers. Its final
    norm doubles a row, so where it is applied shows: only to the last layer's tap (the
    reference's hidden states end with the final-normed one), never before the lm_head."""

    vocab_size, hidden_size, layer_count = 3, 2, 2
    dtype = np.float64
    embed = np.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])
    lm_head = np.array([[1.0, 0.0], [-1.0, 2.0], [0.5, 0.5]])

    def __init__(self, taps):
        self.taps = np.asarray(taps, dtype=np.float64)  # [T, layers, H]
        self.ids = []

    def embed_row(self, token):
        return self.embed[token]

    def lm_head_logits(self, rows):
        return np.asarray(rows) @ self.lm_head.T

    def final_norm(self, rows):
        return 2.0 * np.asarray(rows)

    def set_layer_taps(self, ids):
        self.ids = list(ids)

    def tapped_rows(self):
        return self.taps[:, self.ids]


HAND_CONFIG = DFlashConfig(
    hidden_size=2, num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1,
    head_dim=2, intermediate_size=2, rms_norm_eps=EPS, block_size=3,
    target_layer_ids=(1, 0), mask_token_id=2, input_embedding_scale=0.5,
)
HAND_TENSORS = {
    "fc.weight": np.array([[1.0, 2.0, 0.0, -1.0], [0.0, 1.0, 3.0, 0.0]]),
    "hidden_norm.weight": np.array([1.0, 2.0]),
    "norm.weight": np.array([0.5, 1.0]),
    "layers.0.input_layernorm.weight": np.array([1.0, 1.0]),
    # no queries: every block row attends uniformly to all 5 keys, so the attention output is
    # the plain mean of the values (and a causal mask would change it)
    "layers.0.self_attn.q_proj.weight": np.zeros((2, 2)),
    "layers.0.self_attn.k_proj.weight": np.array([[1.0, 2.0], [3.0, 4.0]]),
    "layers.0.self_attn.v_proj.weight": np.array([[1.0, 2.0], [0.0, 1.0]]),
    "layers.0.self_attn.o_proj.weight": np.array([[0.0, 1.0], [1.0, 1.0]]),
    "layers.0.self_attn.q_norm.weight": np.array([1.0, 1.0]),
    "layers.0.self_attn.k_norm.weight": np.array([1.0, 1.0]),
    "layers.0.post_attention_layernorm.weight": np.array([1.0, 1.0]),
    "layers.0.mlp.gate_proj.weight": np.array([[1.0, 0.0], [1.0, 1.0]]),
    "layers.0.mlp.up_proj.weight": np.array([[0.0, 1.0], [2.0, 0.0]]),
    "layers.0.mlp.down_proj.weight": np.array([[1.0, -1.0], [0.0, 2.0]]),
}
# taps[p] = [layer 0 output, layer 1 output] at position p
HAND_TAPS = [[[1.0, 0.0], [0.0, 2.0]], [[-1.0, 1.0], [2.0, 1.0]]]


def hand_block(s):
    """The draft forward for token s after the two hand positions, written out step by step
    with every matrix as it is written above (rows are column vectors: W @ x)."""
    W = HAND_TENSORS
    # context: layers in target_layer_ids order (1 then 0; layer 1, the last, final-normed,
    # i.e. doubled), then fc, then hidden_norm
    ctx = []
    for taps in HAND_TAPS:
        feats = np.concatenate([2.0 * np.asarray(taps[1]), taps[0]])
        ctx.append(rn(W["fc.weight"] @ feats) * np.array([1.0, 2.0]))
    # block [s, mask, mask] embedded and scaled by 1/2, at positions 2, 3, 4
    x = [0.5 * HandTarget.embed[t] for t in (s, 2, 2)]
    h = [rn(xi) for xi in x]
    v = W["layers.0.self_attn.v_proj.weight"]
    mean_value = sum(v @ r for r in ctx + h) / 5  # uniform over 2 context + 3 block keys
    x = [xi + W["layers.0.self_attn.o_proj.weight"] @ mean_value for xi in x]
    out = []
    for xi in x:
        h2 = rn(xi)
        gate = W["layers.0.mlp.gate_proj.weight"] @ h2
        up = W["layers.0.mlp.up_proj.weight"] @ h2
        xi = xi + W["layers.0.mlp.down_proj.weight"] @ (gate / (1 + np.exp(-gate)) * up)
        out.append(rn(xi) * np.array([0.5, 1.0]))
    return np.stack(out)


def hand_head():
    target = HandTarget(HAND_TAPS)
    draft = DFlashDraft(HAND_CONFIG, HAND_TENSORS, np.float64)
    head = DFlashHead(draft, target)
    head.commit_rows([0, 1], np.zeros((2, 2)), 2)
    return head, target


@pytest.mark.parametrize("s", [0, 1])
def test_hand_computed_block_and_drafts(s):
    """The block rows equal the hand computation (fc over the taps in target_layer_ids order,
    hidden_norm, the scaled target embedding, uniform non-causal attention over context then
    block values, SwiGLU, final norm) and the drafts are argmax of the target's lm_head on
    those rows, for rows 1 .. B-1. No weight is symmetric: a transposed one fails."""
    head, target = hand_head()
    assert target.ids == [1, 0]
    x = 0.5 * np.stack([HandTarget.embed[t] for t in (s, 2, 2)])
    kv = [(k.view(), v.view()) for k, v in head._kv]
    rows = head.draft.block(x, 2, kv)
    expected = hand_block(s)
    np.testing.assert_allclose(rows, expected, rtol=1e-12, atol=1e-12)
    drafts = head.propose(s, 2, 5, None)
    want = [int(np.argmax(HandTarget.lm_head @ expected[i])) for i in (1, 2)]
    assert drafts == want
    assert head.propose(s, 2, 1, None) == want[:1]


def test_hand_rows_go_straight_to_the_lm_head():
    """As the reference computes `lm_head(norm(h))`, the rows the target's lm_head is handed
    are the draft's final-normed block rows 1 .. k themselves (no target norm in between)."""
    target = HandTarget(HAND_TAPS)
    head = DFlashHead(DFlashDraft(HAND_CONFIG, HAND_TENSORS, np.float64), target)
    head.commit_rows([0, 1], np.zeros((2, 2)), 2)
    seen = []
    target.lm_head_logits = lambda rows: seen.append(np.array(rows)) or rows @ HandTarget.lm_head.T
    head.propose(1, 2, 2, None)
    np.testing.assert_allclose(seen[0], hand_block(1)[1:], rtol=1e-12)


def test_attention_is_not_causal_inside_the_block():
    """Row 1 of a block reads the rows after it: changing row 2's input changes row 1's
    output (a causal mask would not let it), while the context's rows do not change."""
    head, _ = hand_head()
    draft = head.draft
    kv = [(k.view(), v.view()) for k, v in head._kv]
    x = 0.5 * np.stack([HandTarget.embed[t] for t in (0, 2, 2)])
    y = x.copy()
    y[2] = [5.0, -3.0]
    a, b = draft.block(x, 2, kv), draft.block(y, 2, kv)
    assert not np.allclose(a[1], b[1])


def test_nothing_of_a_block_persists():
    """Proposing does not change the head's context: the same call gives the same drafts and
    the context still holds exactly the committed positions."""
    head, _ = hand_head()
    before = [(k.view().copy(), v.view().copy()) for k, v in head._kv]
    first = head.propose(1, 2, 2, None)
    assert head.propose(0, 2, 2, None) is not None
    assert head.propose(1, 2, 2, None) == first
    assert head.length == 2
    for (k, v), (k0, v0) in zip(head._kv, before, strict=True):
        assert np.array_equal(k.view(), k0) and np.array_equal(v.view(), v0)


def reference_taps(target):
    """The target's taps as the reference reads them: the last layer's after the final norm
    (the tiny configs tap the first and the last layer)."""
    taps = target.tapped_rows().astype(np.float64)
    taps[:, -1] = target.final_norm(taps[:, -1].astype(target.dtype))
    return taps


def torch_block(config, tensors, taps, x, start):
    """The same draft forward from transformers' Qwen3 pieces (RMSNorm, rotary embedding,
    apply_rotary_pos_emb, MLP) and torch's scaled_dot_product_attention, in float64."""
    torch = pytest.importorskip("torch")
    qwen3 = pytest.importorskip("transformers.models.qwen3.modeling_qwen3")
    from transformers import Qwen3Config

    c = config
    hf = Qwen3Config(hidden_size=c.hidden_size, num_attention_heads=c.num_attention_heads,
                     num_key_value_heads=c.num_key_value_heads, head_dim=c.head_dim,
                     intermediate_size=c.intermediate_size, rms_norm_eps=c.rms_norm_eps,
                     rope_theta=c.rope_theta, num_hidden_layers=c.num_hidden_layers)
    T = {k: torch.tensor(np.asarray(v, np.float64)) for k, v in tensors.items()}

    def norm(name, size):
        module = qwen3.Qwen3RMSNorm(size, eps=c.rms_norm_eps).double()
        module.weight.data = T[name]
        return module

    def lin(name, h):
        return h @ T[name].T

    L, B = taps.shape[0], x.shape[0]
    Hq, Hkv, D = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    ctx = norm("hidden_norm.weight", c.hidden_size)(
        lin("fc.weight", torch.tensor(taps.reshape(L, -1), dtype=torch.float64)))
    h = torch.tensor(x, dtype=torch.float64)
    rotary = qwen3.Qwen3RotaryEmbedding(hf)
    positions = torch.arange(start - L, start + B)[None]
    cos, sin = rotary(h[None], positions)
    for i in range(c.num_hidden_layers):
        p = f"layers.{i}."
        a = p + "self_attn."
        hn = norm(p + "input_layernorm.weight", c.hidden_size)(h)
        q = norm(a + "q_norm.weight", D)(lin(a + "q_proj.weight", hn).view(B, Hq, D))
        both = torch.cat([ctx, hn])
        k = norm(a + "k_norm.weight", D)(lin(a + "k_proj.weight", both).view(L + B, Hkv, D))
        v = lin(a + "v_proj.weight", both).view(L + B, Hkv, D)
        q, _ = qwen3.apply_rotary_pos_emb(q.transpose(0, 1)[None], q.transpose(0, 1)[None],
                                          cos[:, L:], sin[:, L:])
        k, _ = qwen3.apply_rotary_pos_emb(k.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                          cos, sin)
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v.transpose(0, 1)[None], is_causal=False, enable_gqa=True)
        h = h + lin(a + "o_proj.weight", out[0].transpose(0, 1).reshape(B, Hq * D))
        mlp = qwen3.Qwen3MLP(hf).double()
        for part in ("gate_proj", "up_proj", "down_proj"):
            getattr(mlp, part).weight.data = T[f"{p}mlp.{part}.weight"]
        h = h + mlp(norm(p + "post_attention_layernorm.weight", c.hidden_size)(h))
    return norm("norm.weight", c.hidden_size)(h).detach().numpy()


def test_block_matches_transformers_qwen3_pieces(qwen3):
    """A random two-layer draft with GQA (4 query heads on 2 kv heads), real queries and RoPE
    at absolute positions (context 0..L-1, block L..L+B-1) gives the same block rows as the
    torch reference built from transformers' Qwen3 modules (their RMSNorm runs in float32,
    hence the tolerance)."""
    config = tiny_dflash_config(qwen3, num_hidden_layers=2, block_size=5, rope_theta=100.0)
    tensors = random_dflash_tensors(config, seed=3)
    draft = DFlashDraft(config, tensors, np.float64)
    rng = np.random.default_rng(1)
    taps = rng.standard_normal((7, 2, config.hidden_size))
    x = rng.standard_normal((5, config.hidden_size))
    context = draft.context(taps)
    ours = draft.block(x, 7, draft.context_kv(context, 0))
    np.testing.assert_allclose(ours, torch_block(config, tensors, taps, x, 7), atol=2e-5)


def test_propose_runs_the_block_after_the_context(qwen3, tmp_path):
    """propose(s, p) runs [s, mask, ...] (scaled target embedding) at positions p .. p+B-1
    after the context of positions 0 .. p-1, and hands rows 1 .. k to the target's lm_head:
    the rows it hands over equal the torch reference's, so the block's positions and its
    input are the reference's."""
    config = tiny_dflash_config(qwen3, block_size=4, rope_theta=100.0,
                                input_embedding_scale=1.5)
    tensors = random_dflash_tensors(config, seed=4)
    head = DFlashHead(DFlashDraft(config, tensors, np.float32), qwen3)
    text = [11, 12, 13, 14, 15]
    for pos, t in enumerate(text):
        qwen3.step(t, pos)
    head.commit_rows(text, np.zeros((5, 256)), 5)
    seen = []
    lm_head = qwen3.lm_head_logits
    qwen3.lm_head_logits = lambda rows: seen.append(np.array(rows)) or lm_head(rows)
    drafts = head.propose(42, 5, 2, None)
    assert len(drafts) == 2
    x = 1.5 * np.stack([qwen3.embed_row(t) for t in [42] + [config.mask_token_id] * 3])
    rows = torch_block(config, tensors, reference_taps(qwen3), x, 5)
    np.testing.assert_allclose(seen[0], rows[1:3], atol=1e-4)


def test_context_is_every_committed_position_in_any_chunks(qwen3, tmp_path):
    """After a run (prefill in one chunk, then rows of 1 .. k+1), the head's context keys are
    exactly those of the target's taps for every committed position computed at once, and
    proposing after committing row by row gives the same drafts as after one chunk."""
    head = load_dflash(fabricate_dflash(tmp_path, qwen3), qwen3)
    prompt = [189, 190] * 4
    result = onebit.run(qwen3, head, prompt, max_tokens=30, k=3)
    assert result.stats.accepted > 0  # some rounds committed several rows at once
    taps = reference_taps(qwen3)
    assert head.length == taps.shape[0] == len(prompt) + 30
    whole = head.draft.context_kv(head.draft.context(taps), 0)
    for (k, v), (k0, v0) in zip(head._kv, whole, strict=True):
        np.testing.assert_allclose(k.view(), k0, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(v.view(), v0, rtol=1e-4, atol=1e-5)
    text = prompt + result.tokens
    one_by_one = DFlashHead(head.draft, qwen3)
    qwen3.reset()
    for pos, t in enumerate(text):
        qwen3.step(t, pos)
        one_by_one.commit_rows([t], qwen3.last_hidden()[None], 1)
    chunk = DFlashHead(head.draft, qwen3)
    qwen3.reset()
    for pos, t in enumerate(text):
        qwen3.step(t, pos)
    chunk.commit_rows(text, np.zeros((len(text), 256)), len(text))
    assert one_by_one.propose(7, len(text), 3, None) == chunk.propose(7, len(text), 3, None)


def test_commit_rows_reads_only_count_positions(qwen3, tmp_path):
    """commit_rows with count below len(tokens) extends the context by count positions only."""
    head = load_dflash(fabricate_dflash(tmp_path, qwen3), qwen3)
    for pos, t in enumerate([1, 2, 3]):
        qwen3.step(t, pos)
    head.commit_rows([1, 2, 3], np.zeros((3, 256)), 2)
    assert head.length == 2


# ---------------------------------------------------------------------------------------------
# Pairing and files


def test_a_draft_that_does_not_fit_its_target_fails_at_construction(qwen3):
    """Another hidden size, a target layer the target lacks, a mask token past the target's
    vocabulary, a draft made for another vocabulary or another number of target layers: a
    DraftMismatchError naming the misfit, before anything runs."""
    cases = [
        (dict(hidden_size=128), "hidden size 128, its target 256"),
        (dict(target_layer_ids=(0, 5)), "no layer 5"),
        (dict(mask_token_id=256), "mask_token_id 256 is outside"),
        (dict(vocab_size=1000), "vocab_size 1000, its target has 256"),
        (dict(num_target_layers=36), "target of 36 layers"),
    ]
    for overrides, message in cases:
        config = tiny_dflash_config(qwen3, **overrides)
        draft = DFlashDraft(config, random_dflash_tensors(config))
        with pytest.raises(DraftMismatchError, match=message):
            DFlashHead(draft, qwen3)


def test_files_round_trip_and_older_z_lab_layout(qwen3, tmp_path):
    """fabricate_dflash writes config.json + BF16 model.safetensors that load_dflash reads
    back to the same drafts; the older z-lab layout (block_size and the DFlash fields flat at
    the top level, names under 'model.') loads to the same config and drafts."""
    path = fabricate_dflash(tmp_path / "a", qwen3, seed=5)
    head = load_dflash(path, qwen3)
    raw = json.loads((path / "config.json").read_text())
    assert DFlashConfig.from_dict(raw) == head.draft.config
    nested = {k: v for k, v in raw.items() if k != "dflash_config"}
    nested.update(raw["dflash_config"])
    from safetensors.numpy import save_file

    from onebit.heads.checkpoint import read_tensors

    other = tmp_path / "b"
    other.mkdir()
    (other / "config.json").write_text(json.dumps(nested))
    tensors = read_tensors(path)
    save_file({"model." + k: v for k, v in tensors.items()}, str(other / "model.safetensors"))
    again = load_dflash(other, qwen3)
    assert again.draft.config == head.draft.config
    for pos, t in enumerate([5, 6, 7]):
        qwen3.step(t, pos)
    head.commit_rows([5, 6, 7], np.zeros((3, 256)), 3)
    again.commit_rows([5, 6, 7], np.zeros((3, 256)), 3)
    assert head.propose(9, 3, 3, None) == again.propose(9, 3, 3, None)


def test_fabricated_drafts_are_bf16_rounded_as_torch_rounds(qwen3, tmp_path):
    """fabricate_dflash stores BF16 as released drafts are; what loads back equals torch's
    bfloat16 rounding of the float32 weights (round to nearest even), tensor for tensor."""
    torch = pytest.importorskip("torch")
    path = fabricate_dflash(tmp_path, qwen3, seed=2)
    head = load_dflash(path, qwen3)
    config = head.draft.config
    for name, value in random_dflash_tensors(config, seed=2).items():
        want = torch.tensor(value).bfloat16().float().numpy()
        if name == "fc.weight":
            assert np.array_equal(head.draft.fc, want)
        elif name == "layers.0.self_attn.q_proj.weight":
            assert np.array_equal(head.draft.layers[0].q, want)


def _edit_config(raw, change):
    """A copy of a published config with `change` applied: {key: value}, a key under
    'dflash_config.' for the DFlash fields, None to delete."""
    raw = json.loads(json.dumps(raw))
    for key, value in change.items():
        where, name = (raw["dflash_config"], key.split(".", 1)[1]) if key.startswith(
            "dflash_config.") else (raw, key)
        if value is None:
            where.pop(name, None)
        else:
            where[name] = value
    return raw


CONFIG_DAMAGE = {
    "no-mask-token": ({"dflash_config.mask_token_id": None}, "missing field 'mask_token_id'"),
    "block-size-1": ({"dflash_config.block_size": 1}, "'block_size' must be >= 2"),
    "bad-layer-ids": ({"dflash_config.target_layer_ids": []},
                      "'target_layer_ids' must be a non-empty list"),
    "no-layer-ids": ({"dflash_config.target_layer_ids": None, "num_target_layers": None},
                     "missing field 'target_layer_ids' .and no 'num_target_layers'"),
    "dflash2": ({"architectures": ["DFlash2DraftModel"]}, "DFlash2DraftModel"),
    "dflash2-keys": ({"dflash_config.conv_kernel_size": 2}, "conv_kernel_size' is refused"),
    "other-model": ({"model_type": "llama"}, "'model_type' is 'llama'"),
    "target-norm": ({"target_norm": True}, "'target_norm' is refused"),
    "old-scale": ({"embedding_scale": 2.0}, "'embedding_scale' is refused.*input_embedding"),
    "unknown-key": ({"attention_sink_bias": True}, "'attention_sink_bias' is not one"),
    "unknown-dflash-key": ({"dflash_config.use_swa": True}, "'dflash_config.use_swa' is not"),
    "rope-type": ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e6}},
                  "'rope_type' is 'llama3'"),
    "layer-type": ({"layer_types": ["chunked_attention"]}, "layer_types.0. is"),
    "act": ({"hidden_act": "gelu"}, "'hidden_act' is 'gelu'"),
}


@pytest.mark.parametrize("damage", list(CONFIG_DAMAGE))
def test_bad_configs_are_refused_by_name(qwen3, tmp_path, damage):
    """Each config a DFlashDraftModel head cannot compute as its reference does (another
    model kind, DFlash2's keys, onebit's old target_norm / embedding_scale, a key nobody
    reads, an unsupported rope or layer type) raises a DraftFileError naming the key."""
    path = fabricate_dflash(tmp_path, qwen3)
    raw = json.loads((path / "config.json").read_text())
    change, message = CONFIG_DAMAGE[damage]
    (path / "config.json").write_text(json.dumps(_edit_config(raw, change)))
    with pytest.raises(DraftFileError, match=message):
        load_dflash(path, qwen3)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("no-config", "config.json: no such file"),
        ("bad-json", "not valid JSON"),
        ("no-weights", "no \\*.safetensors file"),
        ("missing-tensor", "missing tensor 'layers.0.mlp.up_proj.weight'"),
        ("wrong-shape", "tensor 'fc.weight' has shape"),
        ("unknown-tensor", "tensor 'layers.0.attention_conv.base_kernel' is not part"),
        ("corrupt", "not a valid safetensors file"),
    ],
)
def test_bad_draft_files_fail_by_name(qwen3, tmp_path, damage, message):
    """Each broken draft directory raises a DraftFileError naming the file or tensor; a
    tensor the head would not compute with (DFlash2's convolution) is refused, not dropped."""
    from safetensors.numpy import save_file

    from onebit.heads.checkpoint import read_tensors

    path = fabricate_dflash(tmp_path, qwen3)
    config = path / "config.json"
    weights = path / "model.safetensors"
    tensors = read_tensors(path)
    if damage == "no-config":
        config.unlink()
    elif damage == "bad-json":
        config.write_text("{")
    elif damage == "no-weights":
        weights.unlink()
    elif damage == "missing-tensor":
        del tensors["layers.0.mlp.up_proj.weight"]
        save_file(tensors, str(weights))
    elif damage == "wrong-shape":
        tensors["fc.weight"] = tensors["fc.weight"][:, :10].copy()
        save_file(tensors, str(weights))
    elif damage == "unknown-tensor":
        tensors["layers.0.attention_conv.base_kernel"] = np.zeros((2, 2, 256), np.float32)
        save_file(tensors, str(weights))
    elif damage == "corrupt":
        weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(DraftFileError, match=message):
        load_dflash(path, qwen3)


def test_fabricate_dflash_writes_the_published_layout(target_dirs, tmp_path, capsys):
    """`onebit fabricate dflash` writes what z-lab publishes: a DFlashDraftModel / qwen3
    config with the DFlash fields under dflash_config, and one model.safetensors of BF16
    tensors named fc, hidden_norm, norm and layers.N.* (no prefix, no embedding, no lm_head),
    which loads and drafts greedy's text."""
    import argparse
    import struct

    from onebit.commands import fabricate

    parser = argparse.ArgumentParser(prog="onebit")
    fabricate.add_parser(parser.add_subparsers(dest="command")).set_defaults(
        _main=fabricate.main)
    args = parser.parse_args(["fabricate", "dflash", str(tmp_path / "d"), "--target",
                              str(target_dirs["qwen3"]), "--block-size", "6"])
    assert args._main(args) == 0
    raw = json.loads((tmp_path / "d" / "config.json").read_text())
    assert raw["architectures"] == ["DFlashDraftModel"] and raw["model_type"] == "qwen3"
    assert set(raw["dflash_config"]) == {"block_size", "mask_token_id", "target_layer_ids"}
    assert raw["dflash_config"]["block_size"] == 6 and raw["num_target_layers"] == 2
    assert "target_norm" not in raw and "embedding_scale" not in raw
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["config.json",
                                                                  "model.safetensors"]
    with open(tmp_path / "d" / "model.safetensors", "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    header.pop("__metadata__")
    config = DFlashConfig.from_dict(raw)
    assert {n: tuple(e["shape"]) for n, e in header.items()} == config.shapes()
    assert {e["dtype"] for e in header.values()} == {"BF16"}
    model = onebit.load_model(target_dirs["qwen3"])
    head = load_dflash(tmp_path / "d", model)
    prompt = [189, 190] * 3
    result = onebit.run(model, head, prompt, max_tokens=20, k=5)
    assert result.tokens == onebit.greedy(model, prompt, max_tokens=20).tokens


@pytest.mark.parametrize(
    ("targets", "layers", "published"),
    [
        (36, 5, [1, 9, 17, 25, 33]),  # a Qwen3-4B draft's ids (36 target layers)
        (48, 8, [1, 7, 14, 20, 26, 32, 39, 45]),  # z-lab/Qwen3.5-122B-A10B-DFlash's ids
        (52, 5, [1, 13, 25, 37, 49]),  # z-lab's DFlash2 test fixture's ids
        (36, 1, [18]),  # one draft layer: the middle target layer
    ],
)
def test_default_taps_reproduce_published_ids(targets, layers, published):
    """With target_layer_ids absent, the ids derived from num_target_layers as the reference
    derives them are the ones published configs spell out."""
    from onebit.heads import build_target_layer_ids

    assert build_target_layer_ids(targets, layers) == published


def test_sliding_and_causal_visibility_by_position():
    """Queries at positions 5 and 6 over keys 0 .. 7: causal sees keys up to itself; a
    window of 3 keeps the 3 positions ending at the query (causal) or within 2 either side
    (not causal); neither: no mask at all."""
    from onebit.heads.layers import visibility

    q, k = np.array([5, 6]), np.arange(8)

    def seen(mask):
        return [list(np.flatnonzero(row)) for row in mask]

    assert seen(visibility(q, k, causal=True, window=None)) == [list(range(6)), list(range(7))]
    assert seen(visibility(q, k, causal=True, window=3)) == [[3, 4, 5], [4, 5, 6]]
    assert seen(visibility(q, k, causal=False, window=3)) == [[3, 4, 5, 6, 7], [4, 5, 6, 7]]
    assert visibility(q, k, causal=False, window=None) is None
