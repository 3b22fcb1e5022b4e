"""Sampled assisted generation on the history toy, against plain sampling's exact
distribution.

transformers samples through torch's generator, which the enumerating rng cannot drive, so
the check is statistical (pytest_onebit.peers.event_test): the exact distribution of the whole
output is enumerated from the toy's logits through transformers' own warpers (temperature,
then top-k, then top-p, the order `generate` applies them), and n outputs of the engine are
held to it, event by event, with a test whose power is computed, not guessed. The control
arm runs the same test on plain sampling (one batched call), so a test that false-alarms
shows there first.

Two assistants, two sides of the sampler:
- garbage: its q never overlaps the target's p, so drafts are rejected by the ratio test and
  the tokens come from the residual. But there the residual max(0, p - q) is p itself: a
  sampler that draws from p instead passes. This arm is CI-sized (TV 0.25).
- swapped: the target's two likeliest tokens trade logits, so under top-k 2 q lives on the
  same two tokens as p, ranked the other way; drafts are accepted with probability
  min(1, p/q) and the residual max(0, p - q) is far from p. Its prompt is one where p is
  about 3 : 1, so a residual drawn from p moves the first token's distribution by about 0.12,
  and a draft drawn greedily while q is reported soft moves it by more. This arm detects a
  total-variation distance of 0.05 (both faults are planted in tests/peers/test_planted.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from pytest_onebit.peers import judge
from pytest_onebit.peers.event_test import OneSampleEvents
from pytest_onebit.peers.hf_run import draft_exactly
from pytest_onebit.peers.hf_toy import toy_model
from pytest_onebit.peers.protocol import Outcome

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]
#: the sharp arm's prompt: the toy's first-token p there is 0.75 / 0.25 over its top two
SHARP_PROMPT = [6, 47, 37, 27, 4, 22, 4, 42]
TOKENS = 2  # the whole output is the outcome; the first round drafts min(k, 1) token
K = 2
WARP = {"temperature": 0.8, "top_k": 2, "top_p": 0.95}
#: what each assistant's arm detects (TV, at 99 % power and false alarms <= 1e-3): the
#: garbage arm is CI-sized (n = 160), the swapped arm is the sharp one (n = 4016 assisted
#: calls: the whole `onebit peer transformers` took 25 s here); `--delta` sets both
DELTA = {"garbage": 0.25, "swapped": 0.05}
ALPHA, BETA = 1e-3, 0.01
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
    """Speculative sampling with a toy assistant (`plain=False`; `assistant` "garbage" or
    "swapped", the module's docstring says what each exercises), or plain sampling
    (`plain=True`) on that arm's prompt, its control."""

    plain: bool = False
    delta: float | None = None
    assistant: str = "garbage"
    name: str = ""
    note: str = ""
    target: object = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.assistant not in DELTA:
            raise ValueError(f"SampledArm.assistant must be one of {list(DELTA)}, "
                             f"got {self.assistant!r}")
        self.delta = self.delta or DELTA[self.assistant]
        suffix = {"garbage": "", "swapped": "-sharp"}[self.assistant]
        self.prompt = SHARP_PROMPT if self.assistant == "swapped" else PROMPT
        self.name = self.name or f"toy-sampled{suffix}{'-plain' if self.plain else ''}"
        self.target = toy_model()
        what = ("plain sampling (control)" if self.plain
                else f"{self.assistant} assistant, k={K}")
        self.note = self.note or (f"do_sample, {WARP}, {TOKENS} tokens, {what}; the test "
                                  f"{self.test().describe()}")

    def test(self) -> OneSampleEvents:
        exact = exact_distribution(self.target, self.prompt, TOKENS)
        return OneSampleEvents(exact, self.delta, ALPHA, BETA)

    def samples(self, n: int) -> list[tuple[int, ...]]:
        ids = torch.tensor([self.prompt])
        torch.manual_seed(SEED)
        kw = dict(do_sample=True, max_new_tokens=TOKENS, **WARP)
        with torch.no_grad():
            if self.plain:  # one batched call
                batch = ids.expand(n, -1)
                out = self.target.generate(batch, attention_mask=torch.ones_like(batch), **kw)
                return [tuple(row[len(self.prompt):].tolist()) for row in out]
            assistant = draft_exactly(toy_model(self.assistant), K)
            out = []
            for _ in range(n):
                seq = self.target.generate(ids, attention_mask=torch.ones_like(ids),
                                           assistant_model=assistant, **kw)
                out.append(tuple(seq[0, len(self.prompt):].tolist()))
            return out

    def judge(self) -> dict[str, Outcome]:
        def distribution() -> str:
            test = self.test()
            return test.judge(self.samples(test.samples), where=self.name)

        return {"S1-distribution": judge.judged(distribution)}
