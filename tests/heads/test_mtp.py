"""The MTP head: its chained drafts checked by hand, its cache against committing row by row,
its first draft against the base's own choice, its files and its misfits."""

from __future__ import annotations

import json

import numpy as np
import pytest

import onebit
from onebit.heads import (
    DraftError,
    DraftFileError,
    DraftMismatchError,
    MTPConfig,
    MTPDraft,
    MTPHead,
    fabricate_mtp,
    load_mtp,
    tiny_mtp_config,
)
from onebit.heads.mtp import random_mtp_tensors

EPS = 1e-6


def rn(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS)


class HandTarget:
    """Three tokens, hidden size 2; records what its lm_head is handed."""

    vocab_size, hidden_size = 3, 2
    dtype = np.float64
    embed = np.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])
    lm_head = np.array([[1.0, 0.0], [-1.0, 2.0], [0.5, 0.5]])

    def __init__(self):
        self.seen = []

    def embed_row(self, token):
        return self.embed[token]

    def lm_head_logits(self, rows):
        self.seen.append(np.array(rows))
        return np.asarray(rows) @ self.lm_head.T


CONFIG = MTPConfig(hidden_size=2, num_hidden_layers=1, num_attention_heads=1,
                   num_key_value_heads=1, head_dim=2, intermediate_size=2, rms_norm_eps=EPS)
W = {
    "pre_fc_norm_embedding.weight": np.array([1.0, 0.5]),
    "pre_fc_norm_hidden.weight": np.array([2.0, 1.0]),
    "fc.weight": np.array([[1.0, 0.0, 2.0, -1.0], [0.0, 1.0, 1.0, 3.0]]),
    "norm.weight": np.array([1.0, 2.0]),
    "layers.0.input_layernorm.weight": np.array([1.0, 1.5]),
    # no queries: each row attends uniformly to every key it may see (earlier ones and its own)
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
TOKENS = [0, 2, 1]
ROWS = np.array([[1.0, -1.0], [0.5, 2.0], [-2.0, 1.0]])  # the target's hidden at 0, 1, 2


def hand_input(token, hidden):
    e = rn(HandTarget.embed[token]) * W["pre_fc_norm_embedding.weight"]
    h = rn(hidden) * W["pre_fc_norm_hidden.weight"]
    return W["fc.weight"] @ np.concatenate([e, h])


def hand_value(x):
    return W["layers.0.self_attn.v_proj.weight"] @ (rn(x) * W["layers.0.input_layernorm.weight"])


def hand_layer(x, values):
    """One row through the layer, attending uniformly to `values` (earlier rows' and its own)."""
    x = x + W["layers.0.self_attn.o_proj.weight"] @ (sum(values) / len(values))
    h = rn(x)
    gate, up = W["layers.0.mlp.gate_proj.weight"] @ h, W["layers.0.mlp.up_proj.weight"] @ h
    x = x + W["layers.0.mlp.down_proj.weight"] @ (gate / (1 + np.exp(-gate)) * up)
    return rn(x) * W["norm.weight"]


def test_hand_computed_chain():
    """After committing tokens 0 2 1 with their rows, propose(1, 2, k = 3, row 2): the first
    draft is the target's own choice from row 2; the second comes from (its embedding, row 2)
    at position 3, attending to the committed pairs (row 0, token 2) and (row 1, token 1) and
    itself; the third from (the second draft, the layer's output) at position 4, attending to
    those and the chain's first row. Every matrix is asymmetric, so a transposed one fails."""
    target = HandTarget()
    head = MTPHead(MTPDraft(CONFIG, W, np.float64), target)
    head.commit_rows(TOKENS, ROWS, 3)
    drafts = head.propose(1, 2, 3, ROWS[2])
    values = [hand_value(hand_input(2, ROWS[0])), hand_value(hand_input(1, ROWS[1]))]
    d0 = int(np.argmax(HandTarget.lm_head @ ROWS[2]))
    x1 = hand_input(d0, ROWS[2])
    out1 = hand_layer(x1, values + [hand_value(x1)])
    d1 = int(np.argmax(HandTarget.lm_head @ out1))
    x2 = hand_input(d1, out1)
    out2 = hand_layer(x2, values + [hand_value(x1), hand_value(x2)])
    d2 = int(np.argmax(HandTarget.lm_head @ out2))
    assert drafts == [d0, d1, d2]
    np.testing.assert_allclose(np.concatenate(target.seen), np.stack([ROWS[2], out1, out2]),
                               rtol=1e-12, atol=1e-12)
    assert head.length == 3  # the chain left nothing behind
    assert head.propose(1, 2, 3, ROWS[2]) == drafts


def test_cache_is_the_same_committed_in_chunks_or_one_by_one(qwen3):
    """Committing a run's rows in the loop's chunks (the prompt at once, then accepted drafts
    several at a time) leaves the same cache as committing them one by one: each position's
    entry pairs the row before it with its token, causally."""
    config = tiny_mtp_config(qwen3, num_hidden_layers=2)
    draft = MTPDraft(config, random_mtp_tensors(config, seed=2))
    rng = np.random.default_rng(0)
    tokens = [int(t) for t in rng.integers(0, 256, 12)]
    rows = rng.standard_normal((12, 256)).astype(np.float32)
    chunked, single = MTPHead(draft, qwen3), MTPHead(draft, qwen3)
    for lo, hi in [(0, 5), (5, 6), (6, 9), (9, 12)]:
        chunked.commit_rows(tokens[lo:] + [7], np.concatenate([rows[lo:], rows[:1]]), hi - lo)
    for i in range(12):
        single.commit_rows(tokens[i : i + 1], rows[i : i + 1], 1)
    for (k, v), (k1, v1) in zip(chunked._kv, single._kv, strict=True):
        assert len(k) == 11
        np.testing.assert_allclose(k.view(), k1.view(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(v.view(), v1.view(), rtol=1e-4, atol=1e-5)
    assert chunked.propose(tokens[-1], 11, 4, rows[-1]) == single.propose(tokens[-1], 11, 4,
                                                                          rows[-1])


def test_first_draft_is_the_targets_own_choice(target, counting, tmp_path):
    """The first draft is argmax of the target's lm_head on the hidden after t1, i.e. what the
    base's step chose: every round with room runs a batch and accepts at least one draft."""
    head = load_mtp(fabricate_mtp(tmp_path, target), target)
    base = counting(target)
    result = onebit.run(base, head, [3, 1, 4, 1, 5], max_tokens=30, k=3)
    s = result.stats
    assert s.batches >= s.rounds - 1  # only a last round with no budget left has no batch
    assert s.accepted >= s.batches


def test_misfits_and_misuse(qwen3):
    """A draft of another hidden size fails at construction; propose without the hidden, or
    when t1 is not the last committed position, is a DraftError."""
    config = tiny_mtp_config(qwen3, hidden_size=128)
    with pytest.raises(DraftMismatchError, match="hidden size 128, its target 256"):
        MTPHead(MTPDraft(config, random_mtp_tensors(config)), qwen3)
    config = tiny_mtp_config(qwen3)
    head = MTPHead(MTPDraft(config, random_mtp_tensors(config)), qwen3)
    head.commit_rows([1, 2], np.zeros((2, 256), np.float32), 2)
    with pytest.raises(DraftError, match="needs the target's hidden"):
        head.propose(2, 1, 3, None)
    with pytest.raises(DraftError, match="2 positions are committed"):
        head.propose(2, 4, 3, np.zeros(256))


def test_files_round_trip_with_prefixes(qwen3, tmp_path):
    """fabricate_mtp writes a draft load_mtp reads back; names under 'mtp.' (as in Qwen3-Next
    style checkpoints) load the same; a missing tensor fails by name."""
    from safetensors.numpy import save_file

    from onebit.heads.checkpoint import read_tensors

    path = fabricate_mtp(tmp_path / "a", qwen3, seed=1)
    head = load_mtp(path, qwen3)
    tensors = read_tensors(path)
    save_file({"mtp." + k: v for k, v in tensors.items()}, str(path / "model.safetensors"))
    again = load_mtp(path, qwen3)
    assert again.draft.config == head.draft.config
    assert np.array_equal(again.draft.fc, head.draft.fc)
    del tensors["norm.weight"]
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(DraftFileError, match="missing tensor 'norm.weight'"):
        load_mtp(path, qwen3)


def test_a_qwen3_style_draft_cannot_switch_on_qwen3_5_arithmetic(qwen3, tmp_path):
    """A Qwen3-style MTP draft's config that sets Qwen3.5-only arithmetic (gated attention,
    zero-centred norms, one layer per step) is refused by name, not silently run as Qwen3."""
    path = fabricate_mtp(tmp_path, qwen3)
    raw = json.loads((path / "config.json").read_text())
    assert "gated_attention" not in raw
    for key in ("gated_attention", "zero_centred_norms", "layer_per_step"):
        (path / "config.json").write_text(json.dumps({**raw, key: True}))
        with pytest.raises(DraftFileError, match=f"'{key}' is set"):
            load_mtp(path, qwen3)
