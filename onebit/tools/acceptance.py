"""Score a draft head against its target on prompts of token ids (docs/tools.md).

For each prompt:
1. the target steps the prompt, then `tokens` greedy tokens, recording each position's hidden
   row (and whatever taps a DFlash head asked for), so every position's truth is known;
2. at a position s the head drafts up to k tokens after t1 = truth[s], exactly as the loop
   would ask it: one-pass heads have positions 0 .. s-1 committed and get no hidden; two-pass
   heads have 0 .. s committed and get the row after t1. A draft counts while it equals the
   truth at its position (the accepted prefix);
3. positions are walked as a speculative loop would (after a pass that accepted a, the next
   starts a + 1 later), or every position (`all_positions`).

A pass here is one drafting round; it yields accepted + 1 tokens (t1 and the accepted
drafts), so tokens per pass = accepted per pass + 1. Drafts are cut where the truth ends (the
last `tokens` position is never drafted from), as a budgeted loop cuts them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from onebit.protocols import BaseModel, DraftHead
from onebit.report import Document, Rendered, Table, cols
from onebit.tools.inputs import checked_logits, refusing_faults


@dataclass
class Tally:
    """Passes and what they accepted, for one prompt or all of them."""

    passes: int = 0
    accepted: int = 0
    first_tried: int = 0  # passes that proposed at least one draft
    first_hits: int = 0  # ... whose first draft was right
    histogram: list[int] = field(default_factory=list)  # [a] = passes that accepted a

    def add(self, accepted: int, proposed: int) -> None:
        self.passes += 1
        self.accepted += accepted
        if proposed:
            self.first_tried += 1
            self.first_hits += accepted > 0
        while len(self.histogram) <= accepted:
            self.histogram.append(0)
        self.histogram[accepted] += 1

    def merge(self, other: Tally) -> None:
        self.passes += other.passes
        self.accepted += other.accepted
        self.first_tried += other.first_tried
        self.first_hits += other.first_hits
        for a, count in enumerate(other.histogram):
            while len(self.histogram) <= a:
                self.histogram.append(0)
            self.histogram[a] += count

    @property
    def accepted_per_pass(self) -> float:
        return self.accepted / self.passes if self.passes else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return (self.accepted + self.passes) / self.passes if self.passes else 0.0

    @property
    def first_hit_rate(self) -> float:
        return self.first_hits / self.first_tried if self.first_tried else 0.0


@dataclass
class PromptScore:
    index: int  # 1-based, in file order
    prompt_tokens: int
    tally: Tally


@dataclass
class AcceptanceReport(Rendered):
    head: str
    model: str
    k: int
    tokens: int
    walk: str  # "speculative" or "all-positions"
    prompts: list[PromptScore]

    @property
    def total(self) -> Tally:
        total = Tally(histogram=[0] * (self.k + 1))  # every count 0 .. k shown
        for p in self.prompts:
            total.merge(p.tally)
        return total

    def mean_accepted_per_pass(self) -> float:
        """The mean of the prompts' accepted per pass (each prompt weighs the same)."""
        return float(np.mean([p.tally.accepted_per_pass for p in self.prompts]))

    def to_dict(self) -> dict:
        def tally(t: Tally) -> dict:
            return {**asdict(t), "accepted_per_pass": t.accepted_per_pass,
                    "tokens_per_pass": t.tokens_per_pass, "first_hit_rate": t.first_hit_rate}

        return {
            "head": self.head, "model": self.model, "k": self.k, "tokens": self.tokens,
            "walk": self.walk,
            "prompts": [{"prompt": p.index, "prompt_tokens": p.prompt_tokens, **tally(p.tally)}
                        for p in self.prompts],
            "total": tally(self.total),
            "mean_accepted_per_pass": self.mean_accepted_per_pass(),
        }

    def document(self) -> Document:
        t = self.total
        columns = cols("prompt", "prompt tokens", "passes", "accepted", "accepted per pass",
                       "tokens per pass", "first-draft hits",
                       numeric=("prompt", "prompt tokens", "passes", "accepted",
                                "accepted per pass", "tokens per pass", "first-draft hits"))
        rows = [_row(str(p.index), p.prompt_tokens, p.tally) for p in self.prompts]
        rows.append(_row("all", sum(p.prompt_tokens for p in self.prompts), t))
        apps = [p.tally.accepted_per_pass for p in self.prompts]
        summary = (
            f"Accepted per pass: {t.accepted_per_pass:.2f} over all passes; mean of the "
            f"prompts {self.mean_accepted_per_pass():.2f} (min {min(apps):.2f}, "
            f"max {max(apps):.2f}). Tokens per pass: {t.tokens_per_pass:.2f}. "
            f"First-draft hit rate: {100 * t.first_hit_rate:.1f}% "
            f"({t.first_hits} of {t.first_tried} passes that drafted).")
        histogram = Table(cols("accepted in a pass", "passes", "share",
                               numeric=("accepted in a pass", "passes", "share")),
                          [(str(a), str(n), f"{100 * n / t.passes if t.passes else 0.0:.1f}%")
                           for a, n in enumerate(t.histogram)])
        setup = (f"k = {self.k}, {self.tokens} greedy tokens per prompt, {self.walk} walk, "
                 f"{len(self.prompts)} prompt(s)")
        return Document(f"Acceptance: {self.head} head on {self.model}",
                        [setup, Table(columns, rows), summary, histogram], data=self.to_dict())


def _row(name: str, prompt_tokens: int, t: Tally) -> tuple[str, ...]:
    hits = f"{100 * t.first_hit_rate:.1f}%" if t.first_tried else "-"
    return (name, str(prompt_tokens), str(t.passes), str(t.accepted),
            f"{t.accepted_per_pass:.2f}", f"{t.tokens_per_pass:.2f}", hits)


# ---------------------------------------------------------------------------------------------
# The scoring


def truth_run(base: BaseModel, prompt: Sequence[int], tokens: int) -> tuple[list[int], np.ndarray]:
    """Step `prompt` and `tokens` greedy tokens through `base` (the last one too, as
    `onebit.greedy` does); returns prompt + greedy tokens and every position's hidden row."""
    base.reset()
    seq = [int(t) for t in prompt]
    rows = []
    for pos, token in enumerate(seq):
        logits = base.step(token, pos)
        rows.append(np.asarray(base.last_hidden()))
    for _ in range(tokens):
        seq.append(int(np.argmax(checked_logits(logits, base.vocab_size, len(seq)))))
        logits = base.step(seq[-1], len(seq) - 1)
        rows.append(np.asarray(base.last_hidden()))
    checked_logits(logits, base.vocab_size, len(seq))  # the last step too, as greedy reads it
    return seq, np.stack(rows)


def accepted_prefix(drafts: Sequence[int], truth: Sequence[int]) -> int:
    a = 0
    while a < len(drafts) and a < len(truth) and int(drafts[a]) == truth[a]:
        a += 1
    return a


def score_prompt(base: BaseModel, head: DraftHead, prompt: Sequence[int], *, tokens: int, k: int,
                 all_positions: bool = False,
                 on_position: Callable[[int], None] | None = None) -> Tally:
    """Score `head` on one prompt (see the module docstring); `on_position(n)` is told how
    many of the `tokens` positions are behind after each pass (for a progress bar)."""
    seq, rows = truth_run(base, prompt, tokens)
    head.reset()
    two_pass = bool(head.needs_last_hidden())
    end = len(seq)  # truth is known for positions < end
    committed = 0
    tally = Tally()

    def commit_to(upto: int) -> None:
        nonlocal committed
        if upto > committed:
            head.commit_rows(seq[committed:upto], rows[committed:upto], upto - committed)
            committed = upto

    s = len(prompt)
    while s < end - 1:
        room = min(k, end - 1 - s)
        if two_pass:
            commit_to(s + 1)
            drafts = list(head.propose(seq[s], s, room, rows[s]) or ())[:room]
        else:
            commit_to(s)
            drafts = list(head.propose(seq[s], s, room, None) or ())[:room]
        a = accepted_prefix(drafts, seq[s + 1 : s + 1 + room])
        tally.add(a, len(drafts))
        s += 1 if all_positions else a + 1
        if on_position is not None:
            on_position(min(s, end) - len(prompt))
    return tally


def score(base: BaseModel, head: DraftHead, prompts: Sequence[Sequence[int]], *, tokens: int,
          k: int, all_positions: bool = False, head_name: str = "", model_name: str = "",
          progress=None) -> AcceptanceReport:
    """Score `head` on every prompt; `progress` (a `Progress` or None) is advanced per
    position scored."""
    scores = []
    for i, prompt in enumerate(prompts, start=1):
        done = 0

        def on_position(n: int, i: int = i) -> None:
            nonlocal done
            if progress is not None:
                progress.advance(n - done, note=f"prompt {i}/{len(prompts)}")
            done = n

        with refusing_faults(f"prompt {i}"):
            tally = score_prompt(base, head, prompt, tokens=tokens, k=k,
                                 all_positions=all_positions, on_position=on_position)
        if progress is not None:
            progress.advance(tokens - done)
        scores.append(PromptScore(i, len(prompt), tally))
    walk = "all-positions" if all_positions else "speculative"
    return AcceptanceReport(head_name or type(head).__name__, model_name, k, tokens, walk,
                            scores)
