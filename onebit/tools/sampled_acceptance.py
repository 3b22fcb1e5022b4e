"""Score a draft head under sampling: measured acceptance per draft slot, beside the expected
acceptance `sum(min(p, q))` (docs/sampling.md).

A sampled run accepts draft i with probability min(1, p_i(d_i) / q_i(d_i)); averaged over the
draft drawn from q_i, that is `sum_t min(p_i(t), q_i(t))`, the overlap of the two distributions.
For each prompt, `onebit.run` decodes `tokens` tokens with the head (seeded); every proposal is
recorded with its `q` rows (one-hot for a bare list). Then the target steps prompt + emitted
once, giving `p` at every position, and each judged slot (every slot up to and including the
first rejected one) adds its expected acceptance and whether its draft was accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from onebit.loop import run
from onebit.protocols import BaseModel, DraftHead, Drafts
from onebit.report import Document, Rendered, Table, cols
from onebit.sampling import Sampling, one_hot_rows, warp


@dataclass
class SlotTally:
    judged: int = 0
    accepted: int = 0
    expected: float = 0.0  # the sum of sum(min(p, q)) over the judged drafts

    @property
    def measured_rate(self) -> float:
        return self.accepted / self.judged if self.judged else 0.0

    @property
    def expected_rate(self) -> float:
        return self.expected / self.judged if self.judged else 0.0


class _Recorder:
    """Wraps a head; keeps every proposal as (t1's position, drafts asked, tokens, q rows)."""

    def __init__(self, head: DraftHead, vocab: int) -> None:
        self.head = head
        self.vocab = vocab
        self.proposals: list[tuple[int, list[int], np.ndarray]] = []

    def __getattr__(self, name: str):
        return getattr(self.head, name)

    def propose(self, token: int, pos: int, k: int, hidden):
        answer = self.head.propose(token, pos, k, hidden)
        if isinstance(answer, Drafts):
            tokens = [int(t) for t in answer.tokens][:k]
            q = np.asarray(answer.q, dtype=np.float64)[: len(tokens)]
        else:
            tokens = [int(t) for t in (answer or ())][:k]
            q = one_hot_rows(tokens, self.vocab)
        self.proposals.append((int(pos), tokens, q))
        return answer


def target_rows(base: BaseModel, text: Sequence[int]) -> list[np.ndarray]:
    """The target's scores for every position after the first: [j] scores position j + 1."""
    base.reset()
    return [np.asarray(base.step(int(t), pos), dtype=np.float64) for pos, t in enumerate(text)]


def tally_run(slots: list[SlotTally], proposals, text: Sequence[int], logits, sampling) -> None:
    """Add every judged slot of one run's proposals to `slots`."""
    for pos, drafts, q in proposals:
        for i, draft in enumerate(drafts):
            at = pos + 1 + i
            if at >= len(text):
                break
            p = warp(logits[at - 1], sampling)
            while len(slots) <= i:
                slots.append(SlotTally())
            slots[i].judged += 1
            slots[i].expected += float(np.minimum(p, q[i]).sum())
            if draft != text[at]:
                break
            slots[i].accepted += 1


@dataclass
class SampledAcceptanceReport(Rendered):
    head: str
    model: str
    k: int
    tokens: int
    sampling: Sampling
    seed: int
    slots: list[SlotTally] = field(default_factory=list)
    passes: int = 0
    emitted: int = 0

    def to_dict(self) -> dict:
        s = self.sampling
        return {"head": self.head, "model": self.model, "k": self.k, "tokens": self.tokens,
                "temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p,
                "seed": self.seed, "passes": self.passes, "emitted": self.emitted,
                "slots": [{"slot": i, "judged": t.judged, "accepted": t.accepted,
                           "measured": t.measured_rate, "expected": t.expected_rate}
                          for i, t in enumerate(self.slots)]}

    def document(self) -> Document:
        s = self.sampling
        setup = (f"k = {self.k}, {self.tokens} sampled tokens per prompt, temperature "
                 f"{s.temperature:g}, top-k {s.top_k}, top-p {s.top_p:g}, seed {self.seed}")
        table = Table(cols("slot", "judged", "accepted", "measured acceptance",
                           "expected sum(min(p, q))",
                           numeric=("slot", "judged", "accepted", "measured acceptance",
                                    "expected sum(min(p, q))")),
                      [(str(i), str(t.judged), str(t.accepted), f"{t.measured_rate:.3f}",
                        f"{t.expected_rate:.3f}") for i, t in enumerate(self.slots)])
        ppt = self.passes / self.emitted if self.emitted else 0.0
        closing = f"{self.emitted} tokens in {self.passes} base passes ({ppt:.3f} per token)"
        return Document(f"Sampled acceptance: {self.head} head on {self.model}",
                        [setup, table], closing, self.to_dict())


def score_sampled(base: BaseModel, head: DraftHead, prompts: Sequence[Sequence[int]], *,
                  tokens: int, k: int, sampling: Sampling, seed: int = 0, head_name: str = "",
                  model_name: str = "", progress=None) -> SampledAcceptanceReport:
    """Run `head` sampled on every prompt (seed + prompt index) and tally its slots."""
    report = SampledAcceptanceReport(head_name or type(head).__name__, model_name, k, tokens,
                                     sampling, seed)
    for i, prompt in enumerate(prompts):
        recorder = _Recorder(head, base.vocab_size)
        result = run(base, recorder, prompt, max_tokens=tokens, k=k, sampling=sampling,
                     seed=seed + i)
        report.passes += result.stats.passes
        report.emitted += result.stats.emitted
        text = [*prompt, *result.tokens]
        tally_run(report.slots, recorder.proposals, text, target_rows(base, text), sampling)
        if progress is not None:
            progress.advance(tokens, note=f"prompt {i + 1}/{len(prompts)}")
    return report
