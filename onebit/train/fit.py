"""Training the EAGLE-style draft head in torch (CPU): the model, the samples, the loop.

The head's math is `onebit.heads.eagle` (its docstring); this module writes the same math in
torch so it can be fitted, and nothing here runs at draft time. Torch is an optional extra
(`pip install onebit[train]`); the engine never imports this module.

Training-time test (EAGLE-3): each sample unrolls the chain `CHAIN` steps, feeding step j the
head's own state from step j - 1 (as drafting does) and the answer's true token, so the head
learns to draft from its own guesses and not only from the base's rows. The base's lm_head
rows of the draft vocabulary are frozen: the head only learns to produce a hidden row that the
base's own lm_head reads as the right token.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import numpy as np

from onebit.train.data import Sequence

#: steps of the chain each sample unrolls (and the most drafts acceptance is reported for)
CHAIN = 4
#: how much each unrolled step's loss counts: the first draft matters most (every later one
#: is only accepted after it)
STEP_WEIGHTS = (1.0, 0.8, 0.6, 0.5)
IGNORE = -100


@dataclass
class Samples:
    """Every position a head drafts from: the base's rows there, the chain's input tokens,
    and per step the target (the base's greedy token as a draft-vocabulary index; IGNORE past
    the answer's end or outside the vocabulary; `real` False past the end) and the base's
    likeliest tokens (draft indices, -1 outside) with their logits: the soft target."""

    features: np.ndarray  # [N, 3, H] float16
    inputs: np.ndarray  # [N, CHAIN] int64 base token ids (t1, then the true next tokens)
    targets: np.ndarray  # [N, CHAIN] int64 draft indices or IGNORE
    real: np.ndarray  # [N, CHAIN] bool: the target is an answer token (in the vocabulary or not)
    soft_ids: np.ndarray  # [N, CHAIN, TOP] int32 draft indices, -1 outside the vocabulary
    soft_logits: np.ndarray  # [N, CHAIN, TOP] float16

    def __len__(self) -> int:
        return int(self.features.shape[0])


def samples_of(sequences: Seq[Sequence], d2t: np.ndarray, vocab_size: int) -> Samples:
    """The samples of `sequences`: one per position t from the last prompt token to the third
    from the end (t1 = the token after t must be the base's, as when drafting, and the first
    draft's target, the token after t1, must exist).
    Step j reads token t + 1 + j and predicts token t + 2 + j, which the base chose from its
    scores at position t + 1 + j."""
    t2d = np.full(vocab_size, IGNORE, np.int64)
    t2d[d2t] = np.arange(len(d2t))
    feats, inputs, targets, real, soft_ids, soft_logits = [], [], [], [], [], []
    for s in sequences:
        n = len(s)
        start = s.answer_start - 1
        if n - start < 3:
            continue
        t = np.arange(start, n - 2)
        feats.append(s.features[t])
        idx = t[:, None] + 1 + np.arange(CHAIN)[None, :]  # input token index per step
        ok = idx + 1 < n
        safe = np.minimum(idx, n - 1)
        inputs.append(s.tokens[safe])
        targets.append(np.where(ok, t2d[s.tokens[np.minimum(idx + 1, n - 1)]], IGNORE))
        real.append(ok)
        ids = t2d[s.top_ids[safe]]  # [n_t, CHAIN, TOP]
        soft_ids.append(np.where(ok[:, :, None] & (ids != IGNORE), ids, -1).astype(np.int32))
        soft_logits.append(s.top_logits[safe].astype(np.float16))
    return Samples(np.concatenate(feats), np.concatenate(inputs), np.concatenate(targets),
                   np.concatenate(real), np.concatenate(soft_ids), np.concatenate(soft_logits))


def soft_loss(logits, ids, values):
    """Cross-entropy of the head's logits against the base's distribution over its TOP
    likeliest tokens that the draft vocabulary holds (renormalised); rows with none are
    skipped. `ids` [B, TOP] draft indices (-1: outside), `values` their base logits."""
    import torch

    valid = ids >= 0
    keep = valid.any(-1)
    if not bool(keep.any()):
        return None
    logq = torch.log_softmax(logits[keep], -1)
    v = torch.where(valid[keep], values[keep], torch.full_like(values[keep], -1e9))
    p = torch.softmax(v, -1)
    picked = torch.gather(logq, 1, ids[keep].clamp(min=0))
    return -(p * picked * valid[keep]).sum(-1).mean()


def torch_head(hidden: int, intermediate: int, lm_rows: np.ndarray, out_norm: np.ndarray,
               embedding: Callable[[np.ndarray], np.ndarray] | None = None, eps: float = 1e-5,
               seed: int = 0):
    """The head as a torch module, its lm_head rows (`[V_d, H]`, the base's) frozen and its
    output norm started at the base's final norm."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    def norm(x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fuse = nn.Linear(3 * hidden, hidden, bias=False)
            self.into = nn.Linear(2 * hidden, hidden, bias=False)
            self.gate = nn.Linear(hidden, intermediate, bias=False)
            self.up = nn.Linear(hidden, intermediate, bias=False)
            self.down = nn.Linear(intermediate, hidden, bias=False)
            self.out_norm = nn.Parameter(torch.tensor(out_norm, dtype=torch.float32))
            self.register_buffer("lm", torch.tensor(lm_rows, dtype=torch.float32))
            nn.init.normal_(self.down.weight, std=0.02 / math.sqrt(2))

        def fused(self, feats):  # feats [B, 3, H]: low, mid (raw), final-normed hidden
            low, mid, high = feats[:, 0], feats[:, 1], feats[:, 2]
            return self.fuse(torch.cat([norm(low), norm(mid), high], -1))

        def advance(self, u, e):  # one chain step: state u, the input token's embedding e
            z = self.into(torch.cat([norm(u), norm(e)], -1))
            h = norm(z)
            return z + self.down(nn.functional.silu(self.gate(h)) * self.up(h))

        def logits(self, g):
            return (norm(g) * self.out_norm) @ self.lm.T

    return Head()


@dataclass
class FitReport:
    """What `fit` measured: per epoch the mean training loss; at the end, on the held-out
    samples, how often the chain's step j is right given that steps 0 .. j-1 were
    (`conditional`), and how often steps 0 .. j are all right (`cumulative`)."""

    epochs: list[float]
    conditional: list[float]
    cumulative: list[float]
    held_out: int
    trained: int


def chain_hits(head, feats, inputs, targets, real, embed, batch: int = 1024) -> np.ndarray:
    """`[N, CHAIN]` bool: whether the head's greedy chain, fed its own drafts (as drafting
    does, not the true tokens), gets step j right; False from the first miss on."""
    import torch

    hits = []
    with torch.no_grad():
        for lo in range(0, len(feats), batch):
            f = torch.tensor(feats[lo:lo + batch].astype(np.float32))
            tok = inputs[lo:lo + batch, 0]
            tgt, ok = targets[lo:lo + batch], real[lo:lo + batch]
            u = head.fused(f)
            alive = np.ones(len(tok), bool)
            row = []
            for j in range(CHAIN):
                g = head.advance(u, torch.tensor(embed(tok)))
                pick = head.logits(g).argmax(-1).numpy()
                alive &= ok[:, j] & (pick == tgt[:, j])
                row.append(alive.copy())
                u, tok = g, head.d2t[pick]
            hits.append(np.stack(row, 1))
    return np.concatenate(hits)


def fit(head, train: Samples, held: Samples, embed: Callable[[np.ndarray], np.ndarray], *,
        epochs: int, batch: int = 256, lr: float = 2e-3, weight_decay: float = 0.01,
        seed: int = 0,
        on_batch: Callable[[int, int, float], None] | None = None) -> FitReport:
    """Fit `head` to `train` by AdamW with a cosine schedule; `embed(ids) -> [n, H]` float32
    gives the base's embedding rows. `on_batch(done, total, loss)` after each batch."""
    import torch

    rng = np.random.default_rng(seed)
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))
    steps = epochs * math.ceil(len(train) / batch)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 50) * 0.5 * (1 + math.cos(math.pi * s / steps)))
    losses, done = [], 0
    for _ in range(epochs):
        order = rng.permutation(len(train))
        total = 0.0
        for lo in range(0, len(order), batch):
            i = order[lo:lo + batch]
            f = torch.tensor(train.features[i].astype(np.float32))
            tgt = torch.tensor(train.targets[i])
            sid = torch.tensor(train.soft_ids[i].astype(np.int64))
            sval = torch.tensor(train.soft_logits[i].astype(np.float32))
            u = head.fused(f)
            loss = torch.zeros(())
            for j in range(CHAIN):
                g = head.advance(u, torch.tensor(embed(train.inputs[i, j])))
                logits = head.logits(g)
                hard = torch.nn.functional.cross_entropy(logits, tgt[:, j], ignore_index=IGNORE)
                if torch.isfinite(hard):  # a batch may hold no target for a late step
                    loss = loss + STEP_WEIGHTS[j] * hard
                soft = soft_loss(logits, sid[:, j], sval[:, j])
                if soft is not None:
                    loss = loss + STEP_WEIGHTS[j] * soft
                u = g
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(i)
            done += 1
            if on_batch is not None:
                on_batch(done, steps, float(loss.detach()))
        losses.append(total / max(len(train), 1))
    hits = chain_hits(head, held.features, held.inputs, held.targets, held.real, embed)
    cumulative = [float(hits[:, j].mean()) if len(hits) else 0.0 for j in range(CHAIN)]
    conditional = []
    for j in range(CHAIN):
        before = hits[:, j - 1] if j else np.ones(len(hits), bool)
        asked = before & held.real[:, j]
        conditional.append(float(hits[asked, j].mean()) if asked.any() else 0.0)
    return FitReport(losses, conditional, cumulative, len(held), len(train))
