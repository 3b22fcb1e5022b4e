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
import os
import time
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from pathlib import Path

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
    """Every position a head drafts from: the base's rows there (`features[rows[n]]`: the rows
    of every sequence are kept once, not copied per sample, so millions of positions fit in
    memory), the chain's input tokens, and per step the target (the base's greedy token as a
    draft-vocabulary index; IGNORE past the answer's end or outside the vocabulary; `real`
    False past the end) and the base's likeliest tokens (draft indices, -1 outside) with their
    logits: the soft target."""

    features: np.ndarray  # [T, 3, H] float16: every position of every sequence
    rows: np.ndarray  # [N] int64: the position sample n drafts from
    inputs: np.ndarray  # [N, CHAIN] int64 base token ids (t1, then the true next tokens)
    targets: np.ndarray  # [N, CHAIN] int64 draft indices or IGNORE
    real: np.ndarray  # [N, CHAIN] bool: the target is an answer token (in the vocabulary or not)
    soft_ids: np.ndarray  # [N, CHAIN, TOP] int32 draft indices, -1 outside the vocabulary
    soft_logits: np.ndarray  # [N, CHAIN, TOP] float16

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def feats(self, index) -> np.ndarray:
        """The base's rows of the samples at `index`, `[n, 3, H]` float16."""
        return self.features[self.rows[index]]


def samples_of(sequences: Seq[Sequence], d2t: np.ndarray, vocab_size: int) -> Samples:
    """The samples of `sequences`: one per position t from the last prompt token to the third
    from the end (t1 = the token after t must be the base's, as when drafting, and the first
    draft's target, the token after t1, must exist).
    Step j reads token t + 1 + j and predicts token t + 2 + j, which the base chose from its
    scores at position t + 1 + j."""
    t2d = np.full(vocab_size, IGNORE, np.int64)
    t2d[d2t] = np.arange(len(d2t))
    rows, inputs, targets, real, soft_ids, soft_logits = [], [], [], [], [], []
    offset = 0
    for s in sequences:
        n = len(s)
        start = s.answer_start - 1
        if n - start >= 3:
            t = np.arange(start, n - 2)
            rows.append(offset + t)
            idx = t[:, None] + 1 + np.arange(CHAIN)[None, :]  # input token index per step
            ok = idx + 1 < n
            safe = np.minimum(idx, n - 1)
            inputs.append(s.tokens[safe])
            targets.append(np.where(ok, t2d[s.tokens[np.minimum(idx + 1, n - 1)]], IGNORE))
            real.append(ok)
            ids = t2d[s.top_ids[safe]]  # [n_t, CHAIN, TOP]
            soft_ids.append(np.where(ok[:, :, None] & (ids != IGNORE), ids, -1).astype(np.int32))
            soft_logits.append(s.top_logits[safe].astype(np.float16))
        offset += n
    features = np.concatenate([s.features for s in sequences]).astype(np.float16, copy=False)
    return Samples(features, np.concatenate(rows), np.concatenate(inputs),
                   np.concatenate(targets), np.concatenate(real), np.concatenate(soft_ids),
                   np.concatenate(soft_logits))


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
    seconds: float = 0.0  # the fit's time, over every run that resumed it


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
        seed: int = 0, on_batch: Callable[[int, int, float], None] | None = None,
        checkpoint: str | os.PathLike | None = None, checkpoint_every: float = 300.0,
        deadline: float | None = None, bf16: bool = False) -> FitReport:
    """Fit `head` to `train` by AdamW with a cosine schedule; `embed(ids) -> [n, H]` float32
    gives the base's embedding rows. `on_batch(done, total, loss)` after each batch.

    `checkpoint`: a file the head, the optimiser and where the fit stands are saved to every
    `checkpoint_every` seconds and at the end; a fit given an existing one resumes from it
    (each epoch's order is drawn from (seed, epoch), so a resumed fit sees the batches an
    uninterrupted one would). `deadline` (a `time.monotonic()` value): after the first batches
    are timed, the fit is shortened to end by then, and the cosine schedule with it. `bf16`:
    the products in bfloat16 under torch's CPU autocast (the weights, the optimiser and the
    losses stay float32)."""
    import torch

    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95))
    per_epoch = math.ceil(len(train) / batch)
    plan = {"total": epochs * per_epoch, "done": 0, "losses": [], "running": 0.0,
            "seconds": 0.0}

    def rate(step: int) -> float:
        return min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * min(
            step / plan["total"], 1.0)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, rate)
    if checkpoint is not None and Path(checkpoint).exists():
        state = torch.load(checkpoint, weights_only=True)
        head.load_state_dict(state["head"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        plan.update({k: state[k] for k in plan})
        plan["losses"] = [float(x) for x in plan["losses"]]
        if deadline is not None:  # the time earlier runs of this fit took is spent already
            deadline -= plan["seconds"]
    earlier = plan["seconds"]

    def save() -> None:
        plan["seconds"] = earlier + time.monotonic() - started
        if checkpoint is None:
            return
        tmp = Path(str(checkpoint) + ".part")
        torch.save({"head": head.state_dict(), "opt": opt.state_dict(),
                    "sched": sched.state_dict(), **plan}, tmp)
        os.replace(tmp, checkpoint)

    started = time.monotonic()
    saved = started
    timed_from = plan["done"]
    while plan["done"] < plan["total"]:
        epoch, at = divmod(plan["done"], per_epoch)
        order = np.random.default_rng([seed, epoch]).permutation(len(train))
        for lo in range(at * batch, len(order), batch):
            if plan["done"] >= plan["total"]:
                break
            i = np.sort(order[lo:lo + batch])
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = _chain_loss(head, train, i, embed)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            plan["running"] += float(loss.detach()) * len(i)
            plan["done"] += 1
            if deadline is not None and plan["done"] - timed_from == 20:
                each = (time.monotonic() - started) / 20
                fits = plan["done"] + int(max(deadline - time.monotonic(), 0) / each)
                plan["total"] = max(plan["done"] + 1, min(plan["total"], fits))
            if on_batch is not None:
                on_batch(plan["done"], plan["total"], float(loss.detach()))
            if time.monotonic() - saved > checkpoint_every:
                save()
                saved = time.monotonic()
        if plan["done"] % per_epoch == 0 or plan["done"] >= plan["total"]:
            seen = (plan["done"] - 1) % per_epoch + 1
            plan["losses"].append(plan["running"] / max(min(seen * batch, len(train)), 1))
            plan["running"] = 0.0
    save()
    report = measure(head, held, embed, losses=plan["losses"], trained=len(train))
    report.seconds = plan["seconds"]
    return report


def _chain_loss(head, train: Samples, i: np.ndarray, embed):
    """The training-time-test loss of the samples at `i`: the chain unrolled CHAIN steps on
    its own state, each step's hard and soft cross-entropy weighted by STEP_WEIGHTS."""
    import torch

    f = torch.tensor(train.feats(i).astype(np.float32))
    tgt = torch.tensor(train.targets[i])
    sid = torch.tensor(train.soft_ids[i].astype(np.int64))
    sval = torch.tensor(train.soft_logits[i].astype(np.float32))
    u = head.fused(f)
    loss = torch.zeros(())
    for j in range(CHAIN):
        g = head.advance(u, torch.tensor(embed(train.inputs[i, j])))
        logits = head.logits(g).float()
        hard = torch.nn.functional.cross_entropy(logits, tgt[:, j], ignore_index=IGNORE)
        if torch.isfinite(hard):  # a batch may hold no target for a late step
            loss = loss + STEP_WEIGHTS[j] * hard
        soft = soft_loss(logits, sid[:, j], sval[:, j])
        if soft is not None:
            loss = loss + STEP_WEIGHTS[j] * soft
        u = g
    return loss


def measure(head, held: Samples, embed, *, losses: list[float] | None = None,
            trained: int = 0) -> FitReport:
    """The head's held-out acceptance per chain position (chain_hits), as a FitReport."""
    hits = chain_hits(head, held.feats(np.arange(len(held))), held.inputs, held.targets,
                      held.real, embed)
    cumulative = [float(hits[:, j].mean()) if len(hits) else 0.0 for j in range(CHAIN)]
    conditional = []
    for j in range(CHAIN):
        before = hits[:, j - 1] if j else np.ones(len(hits), bool)
        asked = before & held.real[:, j]
        conditional.append(float(hits[asked, j].mean()) if asked.any() else 0.0)
    return FitReport(list(losses or []), conditional, cumulative, len(held), trained)
