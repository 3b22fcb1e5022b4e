"""Sampled assisted generation on the history toy, against plain sampling's exact
distribution.

transformers samples through torch's generator, which the enumerating rng cannot drive, so
the check is statistical (pytest_onebit.peers.stats): the exact distribution of the whole
output is enumerated from the toy's logits through transformers' own warpers (temperature,
then top-k, then top-p, the order `generate` applies them), and n outputs of the engine are
held to it with a test whose power is derived, not guessed. The control arm runs the same test
on plain sampling (one batched call), so a test that false-alarms shows there first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from pytest_onebit.peers import judge
from pytest_onebit.peers.hf_run import draft_exactly
from pytest_onebit.peers.hf_toy import toy_model
from pytest_onebit.peers.protocol import Outcome
from pytest_onebit.peers.stats import Power, assert_distribution

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]
TOKENS = 2  # the whole output is the outcome; the first round drafts min(k, 1) token
K = 2
WARP = {"temperature": 0.8, "top_k": 2, "top_p": 0.95}
#: CI-sized (each assisted call costs tens of ms): detects TV 0.25 with 99 % power at a
#: false-alarm rate of at most 1e-3; `onebit peer transformers --delta` tightens it.
DELTA = 0.25


def power(delta: float = DELTA) -> Power:
    return Power(delta=delta, alpha=1e-3, beta=0.01, outcomes=WARP["top_k"] ** TOKENS)
SEED = 0


def warped_probs(scores: torch.Tensor) -> torch.Tensor:
    """Plain sampling's next-token probabilities: transformers' own warpers, in order."""
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = [TemperatureLogitsWarper(WARP["temperature"]), TopKLogitsWarper(WARP["top_k"]),
               TopPLogitsWarper(WARP["top_p"])]
    ids = torch.zeros((1, 1), dtype=torch.long)
    for warper in warpers:
        scores = warper(ids, scores)
    return torch.softmax(scores, dim=-1)[0]


def exact_distribution(model, prompt: list[int], tokens: int) -> dict[tuple[int, ...], float]:
    """P(output) = prod p(t_i | prompt, t_<i) over every output plain sampling can give."""
    frontier = {(): 1.0}
    for _ in range(tokens):
        grown = {}
        for prefix, mass in frontier.items():
            logits = model.history_logits(prompt + list(prefix))[-1]
            probs = warped_probs(torch.from_numpy(logits).unsqueeze(0))
            for token in torch.nonzero(probs).flatten().tolist():
                grown[(*prefix, token)] = mass * float(probs[token])
        frontier = grown
    return frontier


@dataclass
class SampledArm:
    """Speculative sampling with the garbage toy assistant (`plain=False`): its top-k never
    overlaps the target's much, so drafts are mostly rejected by the ratio test and the
    tokens come from the residual norm(max(0, p - q)), the part a sampler most easily gets
    wrong. Or plain sampling (`plain=True`), the control."""

    plain: bool = False
    delta: float = DELTA
    name: str = ""
    note: str = ""
    target: object = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.name = self.name or ("toy-sampled-plain" if self.plain else "toy-sampled")
        what = "plain sampling (control)" if self.plain else f"garbage assistant, k={K}"
        self.note = self.note or (f"do_sample, {WARP}, {TOKENS} tokens, {what}; the test "
                                  f"{power(self.delta).describe()}")
        self.target = toy_model()

    def samples(self, n: int) -> list[tuple[int, ...]]:
        ids = torch.tensor([PROMPT])
        torch.manual_seed(SEED)
        kw = dict(do_sample=True, max_new_tokens=TOKENS, **WARP)
        with torch.no_grad():
            if self.plain:  # one batched call
                batch = ids.expand(n, -1)
                out = self.target.generate(batch, attention_mask=torch.ones_like(batch), **kw)
                return [tuple(row[len(PROMPT):].tolist()) for row in out]
            assistant = draft_exactly(toy_model("garbage"), K)
            out = []
            for _ in range(n):
                seq = self.target.generate(ids, attention_mask=torch.ones_like(ids),
                                           assistant_model=assistant, **kw)
                out.append(tuple(seq[0, len(PROMPT):].tolist()))
            return out

    def judge(self) -> dict[str, Outcome]:
        def distribution() -> str:
            exact = exact_distribution(self.target, PROMPT, TOKENS)
            test = power(self.delta)
            return assert_distribution(self.samples(test.samples), exact, test, where=self.name)

        return {"S1-distribution": judge.judged(distribution)}
