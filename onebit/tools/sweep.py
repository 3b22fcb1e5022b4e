"""The k sweep: what drafting k tokens per round costs and saves, for a head on a base.

For each k the loop (`onebit.run`) decodes `tokens` tokens after every prompt, `repeats`
times. A row sums the prompts:

    k | accepted | proposed | batches | steps | passes per token | tokens per pass | ms per token

The pass counts are exact (and identical in every repeat: the run is deterministic). The time
is a measurement: decode time only (from the end of the prompt's last prefill pass to the end
of the run, so the head's work on the prompt is left out with the prefill), per emitted token;
each repeat gives one value, the row shows their median and spread (min .. max). A plain
decode row (no head) is measured the same way, as the baseline.

Two ks are named:
- **break-even k**: the smallest k whose median ms per token is below plain decode's, i.e.
  from where on drafting pays for itself (None if no k does);
- **best k**: the k with the lowest median ms per token, i.e. where ms per token stops
  improving as k grows.
On a host forward a batch of k + 1 rows costs nearly k + 1 steps, so speculation rarely pays
there: the sweep shows it rather than assuming it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from onebit.fallback import Fallback
from onebit.loop import RunStats, run
from onebit.protocols import BaseModel, DraftHead
from onebit.report import Document, Rendered, Table, cols
from onebit.sampling import Sampling
from onebit.tools.inputs import ComputeError, refusing_faults

#: The RunStats counters a sweep row sums over its prompts.
COUNTED = ("accepted", "proposed", "batches", "steps", "emitted")


def add_stats(total: RunStats, stats: RunStats) -> RunStats:
    """Add `stats`' counters into `total` (the derived rates follow from them)."""
    for name in COUNTED:
        setattr(total, name, getattr(total, name) + getattr(stats, name))
    return total


@dataclass
class SweepRow:
    k: int | None  # None: plain decode
    stats: RunStats  # the loop's counters, summed over the prompts
    fell_back: int = 0  # prompts whose run switched to plain steps (with a fallback policy)
    ms_per_token: list[float] = field(default_factory=list)  # one per repeat

    @property
    def ms_median(self) -> float:
        return median(self.ms_per_token)

    @property
    def ms_spread(self) -> tuple[float, float]:
        return min(self.ms_per_token), max(self.ms_per_token)

    def counts(self) -> tuple[int, ...]:
        """What must be the same in every repeat (the run is deterministic)."""
        return (*(getattr(self.stats, n) for n in COUNTED), self.fell_back)

    def to_dict(self) -> dict:
        lo, hi = self.ms_spread
        return {"k": self.k, **{n: getattr(self.stats, n) for n in COUNTED},
                "fell_back": self.fell_back,
                "passes_per_token": self.stats.passes_per_token,
                "tokens_per_pass": self.stats.tokens_per_pass,
                "ms_per_token": self.ms_median, "ms_per_token_min": lo, "ms_per_token_max": hi,
                "ms_per_token_repeats": self.ms_per_token}


@dataclass
class SweepReport(Rendered):
    head: str
    model: str
    tokens: int
    prompts: int
    repeats: int
    plain: SweepRow
    rows: list[SweepRow]
    max_batch_rows: int | None = None
    fallback: str | None = None  # the policy the runs had, if any
    sampling: str | None = None  # how the runs sampled (None: greedy), with the seed

    @property
    def break_even_k(self) -> int | None:
        """The smallest k whose median ms per token beats plain decode's."""
        for row in self.rows:
            if row.ms_median < self.plain.ms_median:
                return row.k
        return None

    @property
    def best_k(self) -> int | None:
        """The k with the lowest median ms per token."""
        return min(self.rows, key=lambda r: r.ms_median).k if self.rows else None

    def to_dict(self) -> dict:
        return {"head": self.head, "model": self.model, "tokens": self.tokens,
                "prompts": self.prompts, "repeats": self.repeats,
                "max_batch_rows": self.max_batch_rows, "fallback": self.fallback,
                "sampling": self.sampling,
                "plain": self.plain.to_dict(), "rows": [r.to_dict() for r in self.rows],
                "break_even_k": self.break_even_k, "best_k": self.best_k}

    def document(self) -> Document:
        names = ["k", "accepted", "proposed", "batches", "steps", "passes per token",
                 "tokens per pass", "ms per token"]
        if self.fallback:
            names.append("fell back")
        rows = []
        for row in [self.plain, *self.rows]:
            lo, hi = row.ms_spread
            st = row.stats
            cells = ["plain" if row.k is None else str(row.k), str(st.accepted),
                     str(st.proposed), str(st.batches), str(st.steps),
                     f"{st.passes_per_token:.3f}", f"{st.tokens_per_pass:.2f}",
                     f"{row.ms_median:.3f} ({lo:.3f} .. {hi:.3f})"]
            if self.fallback:
                cells.append(f"{row.fell_back}/{self.prompts}")
            rows.append(cells)
        setup = (f"{self.prompts} prompt(s) x {self.tokens} tokens, time = median of "
                 f"{self.repeats} repeat(s) (min .. max)"
                 + (f"; fallback {self.fallback}" if self.fallback else "")
                 + (f"; sampled: {self.sampling}" if self.sampling else ""))
        be = self.break_even_k
        blocks: list = [setup, Table(cols(*names, numeric=names[1:]), rows),
                        f"Break-even k (smallest k faster than plain decode): "
                        f"{'none' if be is None else be}. Best k (lowest ms per token): "
                        f"{self.best_k}."]
        widest = max((r.k or 0 for r in self.rows), default=0)
        if self.max_batch_rows is not None and widest >= self.max_batch_rows:
            blocks.append(f"The base verifies at most {self.max_batch_rows} rows: a one-pass "
                          f"round drafts at most {self.max_batch_rows - 1}, a two-pass round "
                          f"{self.max_batch_rows}; a larger k is cut to that.")
        return Document(f"k sweep: {self.head} head on {self.model}", blocks,
                        data=self.to_dict())


class DecodeClock:
    """Wraps the base: notes the time the prompt's last prefill pass returns (a step at
    position P - 1, or the `commit_verify` that brings the committed length to P), so that what
    follows (decoding, whatever the loop) can be timed apart from the prefill."""

    def __init__(self, base: BaseModel, prompt_len: int) -> None:
        self._base = base
        self._prompt_len = prompt_len
        self._verified_at: int | None = None  # the position of the pending verify
        self.decode_start: float | None = None

    def __getattr__(self, name: str):
        return getattr(self._base, name)

    @property
    def vocab_size(self) -> int:
        return self._base.vocab_size

    def step(self, token: int, pos: int):
        logits = self._base.step(token, pos)
        if pos == self._prompt_len - 1:
            self.decode_start = time.perf_counter()
        return logits

    def verify(self, tokens, pos: int):
        self._verified_at = pos
        return self._base.verify(tokens, pos)

    def commit_verify(self, n: int) -> None:
        self._base.commit_verify(n)
        at, self._verified_at = self._verified_at, None
        if at is not None and at < self._prompt_len <= at + n:
            self.decode_start = time.perf_counter()


def timed_runs(base: BaseModel, head: DraftHead | None, prompts: Sequence[Sequence[int]], *,
               tokens: int, k: int | None, fallback: Fallback | None = None,
               sampling: Sampling | None = None, seed: int | None = None,
               ) -> tuple[SweepRow, float]:
    """Run every prompt once at this k (None: plain decode, without the head). Returns a row
    of the summed counts (no time yet) and the decode seconds."""
    row = SweepRow(k, RunStats())
    seconds = 0.0
    for i, prompt in enumerate(prompts, start=1):
        clock = DecodeClock(base, len(prompt))
        arm = "plain decode" if k is None else f"k = {k}"
        with refusing_faults(f"{arm}, prompt {i}"):
            result = run(clock, None if k is None else head, prompt, max_tokens=tokens,
                         k=k or 0, fallback=fallback, sampling=sampling,
                         seed=None if sampling is None else seed)
        end = time.perf_counter()
        seconds += end - (clock.decode_start or end)
        add_stats(row.stats, result.stats)
        row.fell_back += result.stats.fallback_round is not None
    return row, seconds


def sweep(base: BaseModel, head: DraftHead, prompts: Sequence[Sequence[int]], *, ks: Sequence[int],
          tokens: int, repeats: int = 3, head_name: str = "", model_name: str = "",
          progress=None, fallback: Fallback | None = None, sampling: Sampling | None = None,
          seed: int = 0) -> SweepReport:
    """The sweep over `ks` and the plain decode baseline (see the module docstring).

    Every arm (plain decode and each k) first runs the first prompt once untimed (compiled
    kernels, caches, first-use costs); then each repeat runs plain decode and every k in
    turn, so a machine that slows down or speeds up during the sweep moves every row alike
    instead of the last ones. With `sampling` every run is sampled with the same `seed`, so
    each arm emits the same text in every repeat."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"every k must be >= 1, got {list(ks)}")
    arms: list[int | None] = [None, *ks]
    for k in arms:  # warm-up, untimed
        timed_runs(base, head, prompts[:1], tokens=tokens, k=k, fallback=fallback,
                   sampling=sampling, seed=seed)
    rows: dict[int | None, SweepRow] = {}
    for _ in range(repeats):
        for k in arms:
            counted, seconds = timed_runs(base, head, prompts, tokens=tokens, k=k,
                                          fallback=fallback, sampling=sampling, seed=seed)
            row = rows.setdefault(k, counted)
            if row.counts() != counted.counts():
                raise ComputeError(f"the pass counts at k = {k} changed between repeats: the "
                                   "run is not deterministic")
            emitted = counted.stats.emitted
            row.ms_per_token.append(1000.0 * seconds / emitted if emitted else 0.0)
            if progress is not None:
                progress.advance(len(prompts))
    return SweepReport(head_name or type(head).__name__, model_name, tokens, len(prompts),
                       repeats, rows[None], [rows[k] for k in ks],
                       max_batch_rows=int(base.max_batch_rows()),
                       fallback=None if fallback is None else repr(fallback),
                       sampling=None if sampling is None else f"{sampling}, seed {seed}")


#: The largest k a range may name before any model is read: no base verifies more rows.
MOST_K = 4096


def parse_ks(text: str, most: int = MOST_K,
             why: str = "no base verifies more rows") -> list[int]:
    """`"1..8"`, `"1,2,4"`, `"3"` or a mix (`"1..3,8"`) -> sorted distinct ks in 1..`most`
    (ASCII digits only). A range is checked before it is expanded, so `1..1000000000` is
    refused at once instead of filling memory."""
    ks: set[int] = set()
    for part in text.replace(" ", "").split(","):
        bounds = part.split("..", 1)
        if not all(re.fullmatch(r"[0-9]+", b) for b in bounds) or int(bounds[0]) > int(
                bounds[-1]):
            raise ValueError(f"--k {text!r}: expected a range like 1..8 or a list like 1,2,4")
        lo, hi = int(bounds[0]), int(bounds[-1])
        if lo < 1:
            raise ValueError(f"--k {text!r}: every k must be >= 1")
        if hi > most:
            raise ValueError(f"--k {text!r}: k = {hi} is past {most}; {why}")
        ks.update(range(lo, hi + 1))
    return sorted(ks)


def check_plot_target(path: str | Path) -> Path:
    """Refuse a `--plot` file that cannot be written, before the sweep runs: its folder
    must exist and be writable, and the path must not be a folder. `ValueError` naming it."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ValueError(f"--plot {path}: is a directory; give a file name like k.png")
    if not folder.is_dir():
        raise ValueError(f"--plot {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"--plot {path}: not writable")
    return path


def plot(report: SweepReport, path: str) -> str | None:
    """Write a PNG of passes per token and ms per token against k; returns None, or why the
    plot was skipped (matplotlib is an optional dependency)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib)"
    ks = [r.k for r in report.rows]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(6, 6))
    top.plot(ks, [r.stats.passes_per_token for r in report.rows], "o-", label=report.head)
    top.axhline(report.plain.stats.passes_per_token, color="grey", ls="--", label="plain decode")
    top.set_ylabel("base passes per token")
    top.legend()
    medians = [r.ms_median for r in report.rows]
    lows = [m - r.ms_spread[0] for m, r in zip(medians, report.rows, strict=True)]
    highs = [r.ms_spread[1] - m for m, r in zip(medians, report.rows, strict=True)]
    bottom.errorbar(ks, medians, yerr=[lows, highs], fmt="o-", capsize=3, label=report.head)
    bottom.axhline(report.plain.ms_median, color="grey", ls="--", label="plain decode")
    bottom.set_ylabel("ms per token (median, min..max)")
    bottom.set_xlabel("k (drafts per round)")
    bottom.legend()
    fig.suptitle(f"k sweep: {report.head} head, {report.prompts} prompt(s) x {report.tokens}")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return None
