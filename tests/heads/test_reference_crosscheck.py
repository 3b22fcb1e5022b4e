"""The draft heads against torch references assembled from transformers' modules, in float64.

- DFlash: z-lab's `DFlashDraftModel` forward written out with transformers' Qwen3 pieces
  (`Qwen3Config` resolving layer types and windows, `Qwen3RotaryEmbedding` for default and YaRN
  RoPE, `Qwen3RMSNorm`, `Qwen3MLP`), the reference's attention mask, and its output path
  `compute_logits(lm_head(norm(h)))`: recomputed from scratch at every round.
- Qwen3.5 MTP: transformers' `Qwen3_5DecoderLayer`, `Qwen3_5RMSNorm` and rotary embedding,
  wired as vLLM's `Qwen3_5MultiTokenPredictor` wires them (norm the embedding and the hidden,
  concatenate, fc, layer `step % n`, norm), each layer re-run over everything it has seen.

Each compares the logits of every draft of several rounds (the head's context or cache grown
round by round, the reference's rebuilt) within 1e-4; transformers runs its RMSNorms in
float32 even in a float64 model, hence not float64 precision. Skipped without the peer extra.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from peer_modules import lazy

import onebit.heads.dflash as dflash_module
import onebit.heads.mtp as mtp_module
from onebit.heads import add_own_mtp, load_dflash, load_mtp
from onebit.heads.checkpoint import read_tensors, write_draft
from onebit.heads.dflash import random_dflash_tensors
from onebit.heads.dflash_config import DFlashConfig
from onebit.heads.qwen3_5_mtp import read_mtp_tensors
from onebit.models import fabricate_model, load_model
from onebit.tools.acceptance import truth_run

torch = lazy("torch")
transformers = lazy("transformers")
q3 = lazy("transformers.models.qwen3.modeling_qwen3")

TOLERANCE = 1e-4
PROMPT = [5, 17, 99, 3, 64, 120, 7]


def record_picks(monkeypatch, module) -> list[np.ndarray]:
    """Every logit row a head turns into a draft token, in order (the one seam where logits
    become tokens)."""
    seen: list[np.ndarray] = []
    pick = module.pick_tokens

    def recording(logits):
        seen.append(np.array(logits, dtype=np.float64))
        return pick(logits)

    monkeypatch.setattr(module, "pick_tokens", recording)
    return seen


# ---------------------------------------------------------------------------------------------
# DFlash


def tiny(raw: dict, **sizes) -> dict:
    """A published config's keys with the sizes of the tiny targets (hidden 256, vocab 256)."""
    out = json.loads(json.dumps(raw))
    out.update(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
               intermediate_size=128, vocab_size=256, **sizes)
    return out


# The keys of z-lab/Qwen3-4B-DFlash-b16's config.json (older layout: block_size at the top),
# values shrunk to the tiny Qwen3.5 target.
QWEN3_4B_KEYS = tiny({
    "architectures": ["DFlashDraftModel"], "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoModel": "dflash.DFlashDraftModel"}, "block_size": 5,
    "bos_token_id": 1, "dflash_config": {"mask_token_id": 250, "target_layer_ids": [0, 2]},
    "dtype": "bfloat16", "eos_token_id": 2, "hidden_act": "silu", "initializer_range": 0.02,
    "layer_types": ["full_attention", "full_attention"], "max_position_embeddings": 40960,
    "max_window_layers": 5, "model_type": "qwen3", "num_hidden_layers": 2,
    "num_target_layers": 3, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
    "sliding_window": None, "tie_word_embeddings": True, "transformers_version": "4.57.3",
    "use_cache": True, "use_sliding_window": False,
})
# The keys of z-lab/Qwen3.5-122B-A10B-DFlash's config.json (DFlash fields all under
# dflash_config, rope_parameters, a window that no layer uses: no layer_types, and
# max_window_layers' default 28 is past the draft's layers).
QWEN3_5_122B_KEYS = tiny({
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "dtype": "bfloat16",
    "num_hidden_layers": 2, "rms_norm_eps": 1e-6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000},
    "max_position_embeddings": 262144, "use_sliding_window": True, "sliding_window": 4096,
    "tie_word_embeddings": False,
    "dflash_config": {"block_size": 6, "mask_token_id": 248, "target_layer_ids": [1, 2]},
})
# Everything the reference reads that changes the arithmetic: YaRN, attention biases, a
# causal sliding layer (window 3, so it cuts) then a full one, the default target_layer_ids
# from num_target_layers, input_embedding_scale, output_multiplier, soft-capping.
EVERY_KNOB = tiny({
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 2,
    "attention_bias": True, "max_position_embeddings": 256,
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                        "original_max_position_embeddings": 64},
    "use_sliding_window": True, "sliding_window": 3,
    "layer_types": ["sliding_attention", "full_attention"], "num_target_layers": 3,
    "dflash_config": {"block_size": 4, "mask_token_id": 251, "input_embedding_scale": 1.3,
                      "output_multiplier": 0.5, "final_logit_softcapping": 4.0},
})
# DFlash2's fixture says is_causal false on sliding layers: a window both ways.
NON_CAUSAL_WINDOW = {**EVERY_KNOB, "is_causal": False,
                     "layer_types": ["sliding_attention", "sliding_attention"]}
# YaRN as Qwen3.6-era configs write it: the older `rope_scaling` key, rope_theta at the top.
YARN_ROPE_SCALING = {**{k: v for k, v in EVERY_KNOB.items() if k != "rope_parameters"},
                     "rope_theta": 1000000.0,
                     "rope_scaling": {"rope_type": "yarn", "factor": 8.0,
                                      "original_max_position_embeddings": 32}}
CONFIGS = {"qwen3-4b-keys": QWEN3_4B_KEYS, "qwen3.5-122b-keys": QWEN3_5_122B_KEYS,
           "every-knob": EVERY_KNOB, "non-causal-window": NON_CAUSAL_WINDOW,
           "yarn-rope-scaling": YARN_ROPE_SCALING}


def rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)


class DFlashReference:
    """z-lab's DFlashDraftModel forward and compute_logits, from transformers' Qwen3 parts,
    on a transformers target: the context is the target's `hidden_states[id + 1]`."""

    def __init__(self, raw: dict, tensors: dict, hf_target) -> None:
        self.cfg = cfg = transformers.Qwen3Config(**raw)
        self.t = {k: torch.tensor(v, dtype=torch.float64) for k, v in tensors.items()}
        self.hf_target = hf_target
        self.lm_head = hf_target.lm_head.weight.detach()
        self.embed = hf_target.get_input_embeddings().weight.detach()
        ids = self.value("target_layer_ids")
        if ids is None:  # the reference's default: spread over 1 .. num_target_layers - 3
            n, m = cfg.num_target_layers, cfg.num_hidden_layers
            ids = [n // 2] if m == 1 else [int(round(1 + i * (n - 4) / (m - 1)))
                                           for i in range(m)]
        self.ids = ids
        self.rotary = q3.Qwen3RotaryEmbedding(cfg)
        self.mlps = []
        for i in range(cfg.num_hidden_layers):
            mlp = q3.Qwen3MLP(cfg).double()
            mlp.load_state_dict({p: self.t[f"layers.{i}.mlp.{p}"] for p in mlp.state_dict()})
            self.mlps.append(mlp)

    def value(self, name, default=None):
        return self.cfg.dflash_config.get(name, getattr(self.cfg, name, default))

    def norm(self, name, x):
        module = q3.Qwen3RMSNorm(x.shape[-1], eps=self.cfg.rms_norm_eps).double()
        module.weight.data = self.t[name]
        return module(x)

    def proj(self, name, x):
        bias = self.t.get(name + ".bias")
        out = x @ self.t[name + ".weight"].T
        return out if bias is None else out + bias

    def attention(self, i, h, ctx, cos, sin):
        cfg, a = self.cfg, f"layers.{i}.self_attn."
        B, L, D = h.shape[0], ctx.shape[0], cfg.head_dim
        q = self.norm(a + "q_norm.weight", self.proj(a + "q_proj", h).view(B, -1, D))
        both = torch.cat([ctx, h])
        k = self.norm(a + "k_norm.weight", self.proj(a + "k_proj", both).view(L + B, -1, D))
        v = self.proj(a + "v_proj", both).view(L + B, -1, D)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        q = q * cos[-B:] + rotate_half(q) * sin[-B:]  # queries: the block's positions only
        k = k * cos + rotate_half(k) * sin
        group = q.shape[0] // k.shape[0]
        k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
        scores = q @ k.transpose(1, 2) * D**-0.5
        kind = cfg.layer_types[i]
        causal = getattr(cfg, "is_causal", None)
        causal = kind == "sliding_attention" if causal is None else bool(causal)
        window = cfg.sliding_window if kind == "sliding_attention" else None
        qpos = (L + torch.arange(B))[:, None]
        kpos = torch.arange(L + B)[None, :]
        visible = torch.ones(B, L + B, dtype=torch.bool)
        if causal:
            visible &= kpos <= qpos
        if window is not None:
            visible &= qpos - kpos < window
            if not causal:
                visible &= kpos - qpos < window
        scores = scores.masked_fill(~visible, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.proj(a + "o_proj", out.transpose(0, 1).reshape(B, -1))

    def logits(self, prefix: list[int], token: int) -> np.ndarray:
        """Drafts' logits for a block after `token`, the context being the target's hidden
        states over `prefix` (every committed token)."""
        cfg = self.cfg
        block = int(self.value("block_size", 16))
        L = len(prefix)
        with torch.no_grad():
            states = self.hf_target(torch.tensor([prefix]), output_hidden_states=True)
        taps = torch.cat([states.hidden_states[i + 1][0] for i in self.ids], dim=-1)
        ctx = self.norm("hidden_norm.weight", taps @ self.t["fc.weight"].T)
        ids = [token] + [self.value("mask_token_id")] * (block - 1)
        h = self.embed[ids] * float(self.value("input_embedding_scale", 1.0))
        cos, sin = self.rotary(h[None], torch.arange(L + block)[None])
        for i in range(cfg.num_hidden_layers):
            h = h + self.attention(i, self.norm(f"layers.{i}.input_layernorm.weight", h),
                                   ctx, cos[0], sin[0])
            h = h + self.mlps[i](self.norm(f"layers.{i}.post_attention_layernorm.weight", h))
        logits = self.norm("norm.weight", h)[1:] @ self.lm_head.T
        logits = logits * float(self.value("output_multiplier", 1.0))
        cap = self.value("final_logit_softcapping")
        if cap is not None and cap > 0:
            logits = torch.tanh(logits / cap) * cap
        return logits.detach().numpy()


@pytest.fixture(scope="module")
def qwen3_5_dir(tmp_path_factory):
    return fabricate_model(tmp_path_factory.mktemp("q35"), "qwen3_5", quantized=False)


@pytest.fixture(scope="module")
def hf_target(qwen3_5_dir):
    """The same checkpoint as transformers' Qwen3.5, in float64."""
    if not hasattr(transformers, "Qwen3_5ForCausalLM"):
        pytest.skip("transformers has no Qwen3.5 (needs >= 5.2)")
    model = transformers.Qwen3_5ForCausalLM.from_pretrained(qwen3_5_dir, dtype=torch.float64)
    return model.eval()


@pytest.mark.parametrize("name", list(CONFIGS))
def test_dflash_matches_the_reference_round_after_round(name, qwen3_5_dir, hf_target, tmp_path,
                                                        monkeypatch):
    """A draft with a published config's keys (or every knob the reference reads) and
    fabricated weights drafts, at five rounds of a growing context, the logits the z-lab
    reference computes from scratch over transformers' run of the same target (its hidden
    states, the last one final-normed; its embedding and lm_head), within 1e-4 (float64),
    and so the same tokens."""
    raw = CONFIGS[name]
    target = load_model(qwen3_5_dir, dtype="float64")
    config = DFlashConfig.from_dict(raw)
    path = write_draft(tmp_path / "draft", raw, random_dflash_tensors(config, seed=7))
    head = load_dflash(path, target)
    reference = DFlashReference(raw, read_tensors(path), hf_target)
    seq, _ = truth_run(target, PROMPT, 16)  # records the taps the head asked for
    seen = record_picks(monkeypatch, dflash_module)
    worst, committed = 0.0, 0
    for pos in range(len(PROMPT), len(PROMPT) + 15, 3):
        head.commit_rows(seq[committed:pos], np.zeros((pos - committed, 256)), pos - committed)
        committed = pos
        drafts = head.propose(seq[pos], pos, config.block_size - 1, None)
        want = reference.logits(seq[:pos], seq[pos])
        assert drafts == [int(t) for t in want.argmax(axis=1)]
        worst = max(worst, float(np.abs(seen[-1] - want).max()))
    print(f"DFlash {name}: max abs logit error vs reference over 5 rounds: {worst:.3g}")
    assert np.abs(want).max() > 1.0  # logits of O(1): the comparison has signal
    assert worst < TOLERANCE


def test_the_window_and_causality_matter(qwen3_5_dir, tmp_path):
    """The knobs the cross-check covers change the drafts' logits: the same weights with the
    window and causal mask off (all layers full) give other logits, so a head that ignored
    them could not pass the cross-check."""
    target = load_model(qwen3_5_dir, dtype="float64")
    full = {k: v for k, v in EVERY_KNOB.items() if k not in ("layer_types",)}
    full["use_sliding_window"] = False
    tensors = random_dflash_tensors(DFlashConfig.from_dict(EVERY_KNOB), seed=7)
    logits = []
    for raw, where in ((EVERY_KNOB, "a"), (full, "b")):
        head = load_dflash(write_draft(tmp_path / where, raw, tensors), target)
        seq, _ = truth_run(target, PROMPT, 4)
        head.commit_rows(seq[:9], np.zeros((9, 256)), 9)
        rows = head.draft.block(np.stack([target.embed_row(t) for t in [seq[9]] + [251] * 3]),
                                9, [(k.view(), v.view()) for k, v in head._kv])
        logits.append(head.draft.logits(target, rows[1:]))
    assert np.abs(logits[0] - logits[1]).max() > 1e-3


# ---------------------------------------------------------------------------------------------
# Qwen3.5 MTP


class MTPReference:
    """vLLM's Qwen3_5MultiTokenPredictor wiring over transformers' Qwen3.5 modules; each MTP
    layer keeps (as a KV cache would) every input it has been run on, re-run causally."""

    def __init__(self, path, target) -> None:
        q35 = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
        text = json.loads((path / "config.json").read_text())["text_config"]
        n = text["mtp_num_hidden_layers"]
        fields = {k: v for k, v in text.items() if not k.startswith("mtp_")}
        fields.update(num_hidden_layers=n, layer_types=["full_attention"] * n)
        cfg = transformers.Qwen3_5TextConfig(**fields)
        cfg._attn_implementation = "eager"
        t = {k: torch.tensor(v, dtype=torch.float64) for k, v in read_mtp_tensors(path).items()}
        self.layers = []
        for i in range(n):
            layer = q35.Qwen3_5DecoderLayer(cfg, i).double().eval()
            prefix = f"layers.{i}."
            layer.load_state_dict({k[len(prefix):]: v for k, v in t.items()
                                   if k.startswith(prefix)})
            self.layers.append(layer)
        self.norms = {}
        for name in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
            module = q35.Qwen3_5RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps).double()
            module.weight.data = t[name + ".weight"]
            self.norms[name] = module
        self.fc = t["fc.weight"]
        self.rotary = q35.Qwen3_5TextRotaryEmbedding(cfg)
        self.embed = torch.tensor(target.weights.get("model.embed_tokens.weight"),
                                  dtype=torch.float64)
        self.lm_head = torch.tensor(target.weights.lm_head(), dtype=torch.float64)
        self.seen = [([], []) for _ in range(n)]  # per layer: inputs and their positions

    def step(self, layer: int, token: int, hidden: torch.Tensor, position: int):
        """One MTP forward of (token, hidden) at `position` through `layer`: its output."""
        x = torch.cat([self.norms["pre_fc_norm_embedding"](self.embed[token]),
                       self.norms["pre_fc_norm_hidden"](hidden)]) @ self.fc.T
        inputs, positions = self.seen[layer]
        inputs.append(x)
        positions.append(position)
        xs = torch.stack(inputs)[None]
        cos, sin = self.rotary(xs, torch.tensor([positions]))
        T = xs.shape[1]
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)[None, None]
        out = self.layers[layer](xs, position_embeddings=(cos, sin), attention_mask=mask)
        return self.norms["norm"](out[0, -1])

    def chain(self, seq, rows, pos: int, k: int, committed: int) -> list[np.ndarray]:
        """Commit the pairs up to t1 at `pos` through layer 0, then draft k tokens: the
        target's own choice, then k - 1 chained MTP steps, step j through layer j % n.
        Returns every draft's logits. The chain's inputs are forgotten afterwards."""
        for j in range(committed, pos):  # pair (hidden_j, token_{j+1}) at position j + 1
            self.step(0, seq[j + 1], torch.tensor(rows[j]), j + 1)
        saved = [(list(a), list(b)) for a, b in self.seen]
        h = torch.tensor(rows[pos])
        logits = [(h @ self.lm_head.T).detach().numpy()]
        for step in range(k - 1):
            token = int(np.argmax(logits[-1]))
            h = self.step(step % len(self.layers), token, h, pos + 1 + step)
            logits.append((h @ self.lm_head.T).detach().numpy())
        self.seen = saved
        return logits


@pytest.fixture(scope="module", params=[1, 2], ids=["mtp1", "mtp2"])
def own_mtp_dir(request, tmp_path_factory):
    """A fabricated Qwen3.5 checkpoint in the published layout with 1 or 2 MTP layers."""
    path = fabricate_model(tmp_path_factory.mktemp("own"), "qwen3_5", quantized=False)
    return add_own_mtp(path, layers=request.param, seed=3)


def test_qwen3_5_mtp_matches_the_reference_chain(own_mtp_dir, monkeypatch):
    """Qwen3.5's own MTP head, loaded from the checkpoint, drafts 5-token chains (the
    target's choice, then 4 MTP steps, layer j % n) at four rounds whose logits equal the
    vLLM-wired transformers reference's within 1e-4 (float64), its cache grown by the rounds'
    committed pairs as the reference's layer 0 is."""
    if not hasattr(transformers, "Qwen3_5TextConfig"):
        pytest.skip("transformers has no Qwen3.5 (needs >= 5.2)")
    target = load_model(own_mtp_dir, dtype="float64")
    head = load_mtp(own_mtp_dir, target)
    assert head.draft.config.layer_per_step
    reference = MTPReference(own_mtp_dir, target)
    seq, rows = truth_run(target, PROMPT, 16)
    seen = record_picks(monkeypatch, mtp_module)
    worst, committed, pairs = 0.0, 0, 0
    for pos in range(len(PROMPT), len(PROMPT) + 13, 4):
        head.commit_rows(seq[committed : pos + 1], rows[committed : pos + 1],
                         pos + 1 - committed)
        before = len(seen)
        drafts = head.propose(seq[pos], pos, 5, rows[pos])
        want = reference.chain(seq, rows, pos, 5, pairs)
        committed, pairs = pos + 1, pos
        assert drafts == [int(np.argmax(w)) for w in want]
        for ours, theirs in zip(seen[before:], want, strict=True):
            worst = max(worst, float(np.abs(ours[0] - theirs).max()))
    layers = head.draft.config.num_hidden_layers
    print(f"Qwen3.5 MTP ({layers} layer(s)): max abs logit error vs reference over 4 rounds "
          f"of 5 drafts: {worst:.3g}")
    assert worst < TOLERANCE
