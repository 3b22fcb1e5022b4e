"""Speculation that never loses: a head wrapper that chooses how many drafts to send each round.

A round of the one-pass loop verifies t1 and j drafts as one batch of j + 1 rows and emits
1 + (accepted drafts) tokens; a plain step emits one. On a CPU a verify of n rows is not free:
its cost grows with n (on SmolLM2 here, 2 rows cost about 1.5 steps, 4 rows about 1.9), so a
draft pays only if it is accepted often enough. `PolicyHead` measures both sides as it runs:

- **cost**: the wall time of each round, from one `propose` to the next, keyed by the rows the
  round sent (1 for a plain step): `cost[n]` is the median of the last `COST_WINDOW` rounds of
  that width (a median, so one stall of the machine does not price a width for long). Widths
  it has not yet measured are priced by a prior, `cost[1] * (1 + row_cost * (n - 1))`;
- **acceptance**: for each draft slot i, how often draft i matched the committed text given that
  drafts 1 .. i - 1 did, each older outcome weighing `DECAY` times the next one's, so the
  estimate follows the text at hand (a run of copied text, then free prose). Every proposal is
  scored against the tokens committed after it, the drafts it withheld too ("shadow" scoring),
  so a head that stops being sent still learns.

A head that says how sure it is of each draft (an attribute `confidence`, one number in [0, 1]
per draft of its last proposal: the trained head's softmax probability) is judged draft by
draft instead: its confidences fall into `CONFIDENCE_BINS`, each bin learns how often its drafts
are accepted (given the earlier ones were, decayed as above, prior: the bin's middle), and
draft i's acceptance is its bin's. A head right half the time overall can then send the drafts
it is sure of and withhold the rest. Whether to ask such a head at all weighs its own time per
proposal (measured) against what its first drafts have been worth: how often each bin came
up, and whether that bin pays for a row (`worth_asking_sure`). If it has a `stop_below`
attribute the policy sets it, each round, to the confidence a draft needs to pay for one more
row, so the head stops chaining where the drafts stop being worth their time.

Each round it sends the j drafts (0 .. what the head gave) that maximise the expected tokens
per unit of time, `E_j / cost[j + 1]`, with `E_j = 1 + sum_{i <= j} prod_{l <= i} a_l`; j = 0
is a plain step (the loop steps t1 when a head proposes nothing). When no j beats plain even
before the head is asked, the head is not asked at all (it may cost time itself) but for one
probe every `probe_every` rounds, so a change in the text is noticed.

The text is exactly the loop's: the policy only shortens a proposal, and the loop checks every
draft it is sent (greedy: the argmax; sampled: the rejection rule, which stays exact for a
draft length chosen from what was drafted so far, since each position's accept / residual draw
keeps its token distributed as the target's). `clock=` and `costs=` make the choices
deterministic for tests and proofs: with fixed `costs` nothing is timed.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from onebit.protocols import Drafts

#: the prior price of each verify row past the first, in steps, before a width is measured
ROW_COST = 0.45
#: how many of a width's latest rounds its cost is the median of
COST_WINDOW = 9
#: how much each older outcome of a slot weighs against the next one (memory of about 1 / (1 -
#: DECAY) outcomes)
DECAY = 0.9
#: the prior on each slot's acceptance: `PRIOR_HITS` hits in `PRIOR_TRIALS` trials
PRIOR_HITS = 1.0
PRIOR_TRIALS = 2.0
#: how many plain rounds are timed before a head that always drafts is sent drafts again
PLAIN_SAMPLES = 3
#: a confidence bin's decay: slower than a slot's, since each bin sees a share of the drafts
#: (memory of about 50 outcomes a bin)
BIN_DECAY = 0.98
#: the edges of the confidence bins of a head that reports its confidence per draft
CONFIDENCE_BINS = (0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)


class PolicyHead:
    """A `DraftHead` that wraps a one-pass head and sends it only the drafts that pay.

    `max_k` caps the drafts asked of the head; `costs` fixes `cost[n]` for n rows (steps, any
    unit) instead of measuring; `clock` is the timer (seconds); `probe_every` rounds a head
    judged not to pay is asked anyway. Cost and acceptance are kept across runs (they belong
    to this head on this model) and `reset()` forgets only the run's text; `persist=False`
    forgets them too, so each run's choices depend on that run alone (what an enumeration of
    a sampled run's outcomes, which replays the run, needs)."""

    def __init__(self, inner, *, max_k: int = 7, costs: Mapping[int, float] | None = None,
                 clock: Callable[[], float] = time.perf_counter, row_cost: float = ROW_COST,
                 probe_every: int = 16, persist: bool = True) -> None:
        if inner.needs_last_hidden():
            raise ValueError(f"PolicyHead wraps one-pass heads; {inner!r} is two-pass")
        for name, value in (("max_k", max_k), ("probe_every", probe_every)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"PolicyHead: {name} must be an integer >= 1, got {value!r}")
        if isinstance(row_cost, bool) or not isinstance(row_cost, int | float) or row_cost < 0:
            raise ValueError(f"PolicyHead: row_cost must be a number >= 0, got {row_cost!r}")
        self.inner = inner
        self.max_k = max_k
        self.row_cost = float(row_cost)
        self.probe_every = probe_every
        self.clock = clock
        self.fixed = costs is not None
        self.persist = persist
        self.cost: dict[int, float] = {}
        if costs is not None:
            for rows, value in costs.items():
                if not isinstance(rows, int) or rows < 1 or not value > 0:
                    raise ValueError(f"PolicyHead: costs[{rows!r}] = {value!r}; a cost is a "
                                     "positive number for a row count >= 1")
                self.cost[rows] = float(value)
            if 1 not in self.cost:
                raise ValueError("PolicyHead: costs must price a plain step (costs[1])")
        self.fixed_cost = dict(self.cost)
        self._forget()
        self.reset()

    def _forget(self) -> None:
        self.cost = dict(self.fixed_cost)
        self.seconds: dict[int, deque] = {}  # width -> its latest round times
        self.hits = np.zeros(self.max_k + 1)  # slot i (1-based): draft i matched, given 1 .. i-1
        self.trials = np.zeros(self.max_k + 1)
        edges = np.asarray(CONFIDENCE_BINS)
        self.bin_hits = (edges[:-1] + edges[1:]) / 2 * PRIOR_TRIALS  # prior: the bin's middle
        self.bin_trials = np.full(len(edges) - 1, PRIOR_TRIALS)
        self.sent: list[int] = []  # drafts sent per round (for the stats and tests)
        self.head_seconds: deque = deque(maxlen=COST_WINDOW)  # the head's time per proposal
        # how often a sure head's first draft falls in each confidence bin (prior: evenly)
        self.first_bins = np.full(len(CONFIDENCE_BINS) - 1, 1.0 / (len(CONFIDENCE_BINS) - 1))

    def __repr__(self) -> str:
        return f"PolicyHead({self.inner!r}, max_k={self.max_k})"

    # -- DraftHead -------------------------------------------------------------------------

    def needs_last_hidden(self) -> bool:
        return False

    def reset(self) -> None:
        self.inner.reset()
        if not self.persist:
            self._forget()
        self.text: list[int] = []           # committed tokens, in order
        # (position, drafts, slots scored, confidence bin per draft or None)
        self.pending: list[tuple[int, list[int], int, list[int] | None]] = []
        self.round_start: float | None = None
        self.round_rows = 1
        self.idle = 0                       # rounds since the head was last asked

    def use_sampling(self, sampling, rng) -> None:
        if callable(getattr(self.inner, "use_sampling", None)):
            self.inner.use_sampling(sampling, rng)

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        self.inner.commit_rows(tokens, rows, count)
        self.text.extend(int(t) for t in tokens[:count])
        self._score()

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None):
        self._time_round()
        k = min(k, self.max_k)
        sure = hasattr(self.inner, "confidence")  # judged draft by draft
        if not (self.worth_asking_sure() if sure else self.worth_asking(k)):
            self.idle += 1
            if self.idle < self.probe_every:
                return self._send([], 1)
        self.idle = 0
        if sure and hasattr(self.inner, "stop_below"):
            self.inner.stop_below = self.needed_confidence()
        asked = self.clock()
        answer = self.inner.propose(token, pos, k, hidden)
        if not self.fixed:  # the head's own time, apart from the round's (which starts after)
            self.head_seconds.append(self.clock() - asked)
        tokens, q = (answer.tokens, answer.q) if isinstance(answer, Drafts) else (answer, None)
        tokens = [int(t) for t in (tokens if tokens is not None else [])][:k]
        bins = self._bins(len(tokens)) if sure else None
        if bins:
            self.first_bins *= BIN_DECAY
            self.first_bins[bins[0]] += 1.0
        # t1 sits at pos; draft i is for pos + i. Scored once the text reaches those positions.
        self.pending.append((pos + 1, tokens, 0, bins))
        j = self.best_length(len(tokens), bins)
        if self._plain_due():
            j = 0  # a plain step's cost is what every width is weighed against: measure it
        if q is not None:
            return self._send(Drafts(tokens[:j], np.asarray(q)[:j]), j + 1)
        return self._send(tokens[:j], j + 1)

    # -- the choice ------------------------------------------------------------------------

    def acceptance(self) -> np.ndarray:
        """`a[i]` for slots 1 .. max_k (a[0] unused): the chance draft i is accepted given that
        drafts 1 .. i - 1 were, from the scored proposals and the prior."""
        return (self.hits + PRIOR_HITS) / (self.trials + PRIOR_TRIALS)

    def price(self, rows: int) -> float:
        """`cost[rows]`: measured, or the prior from the plain step's cost (itself inferred,
        by the same prior, from the narrowest width measured when no plain step has been)."""
        if rows in self.cost:
            return self.cost[rows]
        if 1 in self.cost:
            step = self.cost[1]
        elif self.cost:
            n = min(self.cost)
            step = self.cost[n] / (1.0 + self.row_cost * (n - 1))
        else:
            step = 1.0
        return step * (1.0 + self.row_cost * (rows - 1))

    def bin_acceptance(self) -> np.ndarray:
        """Per confidence bin, the chance a draft of that confidence is accepted (given the
        earlier drafts were), from the scored proposals and the prior."""
        return self.bin_hits / self.bin_trials

    def rates(self, most: int, bins: Sequence[int] | None = None) -> list[float]:
        """Expected tokens per unit of cost when j = 0 .. `most` drafts are sent; with `bins`
        (the confidence bin of each draft) each draft's acceptance is its bin's."""
        a = self.acceptance()
        by_bin = self.bin_acceptance() if bins is not None else None
        expected, chain, out = 1.0, 1.0, [1.0 / self.price(1)]
        for j in range(1, most + 1):
            chain *= a[j] if by_bin is None else by_bin[bins[j - 1]]
            expected += chain
            out.append(expected / self.price(j + 1))
        return out

    def best_length(self, drafted: int, bins: Sequence[int] | None = None) -> int:
        """How many of `drafted` drafts to send: the j whose rate is highest (fewest on a tie)."""
        rates = self.rates(min(drafted, self.max_k), bins)
        return int(np.argmax(rates))

    def needed_confidence(self) -> float:
        """The confidence below which a first draft cannot pay for its row: the lowest bin
        edge whose learned acceptance a satisfies (1 + a) / cost[2] > 1 / cost[1]."""
        need = self.price(2) / self.price(1) - 1.0
        by_bin = self.bin_acceptance()
        for edge, accepted in zip(CONFIDENCE_BINS, by_bin, strict=False):
            if accepted > need:
                return float(edge)
        return float(CONFIDENCE_BINS[-2])

    def _plain_due(self) -> bool:
        """Whether this round must be a plain step so that cost[1] stays measured: until it
        has PLAIN_SAMPLES times, then once every `probe_every` rounds without one (a head
        that always drafts would otherwise leave it to one early, and maybe slow, round)."""
        if self.fixed or len(self.sent) < 2:
            return False
        plain = self.seconds.get(1, ())
        if len(plain) < PLAIN_SAMPLES:
            return True
        since = next((i for i, n in enumerate(reversed(self.sent)) if n == 0), len(self.sent))
        return since >= self.probe_every

    def head_cost(self) -> float:
        """The head's own time per proposal (median of the latest), 0 with fixed costs."""
        return statistics.median(self.head_seconds) if self.head_seconds else 0.0

    def worth_asking_sure(self) -> bool:
        """Whether asking a head that reports its confidence is expected to beat a plain
        step, its own time included: its first draft falls in bin b with the frequency seen so
        far, is sent when that bin's acceptance pays for the row, and then yields 1 + a_b
        tokens for cost[2] (else 1 for cost[1]). Later drafts only add to this, so a head that
        fails it cannot pay."""
        c1, c2, h = self.price(1), self.price(2), self.head_cost()
        a = self.bin_acceptance()
        freq = self.first_bins / self.first_bins.sum()
        sent = (1.0 + a) / c2 > 1.0 / c1
        tokens = float(np.sum(freq * (1.0 + a * sent)))
        seconds = h + float(np.sum(freq * np.where(sent, c2, c1)))
        return tokens / seconds > 1.0 / c1

    def _bins(self, n: int) -> list[int]:
        """The confidence bin of each of the head's last `n` drafts (a missing or bad value
        counts as no confidence: the lowest bin)."""
        raw = list(getattr(self.inner, "confidence", None) or [])[:n]
        raw += [0.0] * (n - len(raw))
        edges = np.asarray(CONFIDENCE_BINS[1:-1])
        out = []
        for c in raw:
            c = float(c) if isinstance(c, int | float | np.floating) and np.isfinite(c) else 0.0
            out.append(int(np.searchsorted(edges, min(max(c, 0.0), 1.0), side="right")))
        return out

    def worth_asking(self, k: int) -> bool:
        """Whether some j >= 1 of at most `k` drafts is expected to beat a plain step."""
        rates = self.rates(min(k, self.max_k))
        return len(rates) > 1 and max(rates[1:]) > rates[0]

    # -- measuring -------------------------------------------------------------------------

    def _send(self, drafts, rows: int):
        self.sent.append(rows - 1)
        self.round_rows = rows
        self.round_start = self.clock()
        return drafts

    def _time_round(self) -> None:
        """Charge the round that just ended (from the last `propose` to this one) to its width."""
        if self.round_start is None or self.fixed:
            return
        seconds = self.clock() - self.round_start
        recent = self.seconds.setdefault(self.round_rows, deque(maxlen=COST_WINDOW))
        recent.append(seconds)
        # statistics' median of a few floats: numpy's cost 45 us a round, 2 % of a step
        self.cost[self.round_rows] = statistics.median(recent)

    def _score(self) -> None:
        """Score every proposal whose positions the committed text now reaches: slot by slot,
        until the first draft that differs (the slots after it are never reached)."""
        waiting = []
        for first, drafts, done, bins in self.pending:
            while done < len(drafts) and first + done < len(self.text):
                slot = done + 1
                hit = self.text[first + done] == drafts[done]
                self.trials[slot] = self.trials[slot] * DECAY + 1.0
                self.hits[slot] = self.hits[slot] * DECAY + hit
                if bins is not None:
                    b = bins[done]
                    self.bin_trials[b] = self.bin_trials[b] * BIN_DECAY + 1.0
                    self.bin_hits[b] = self.bin_hits[b] * BIN_DECAY + hit
                if not hit:
                    done = len(drafts) + 1  # missed: the later slots are never reached
                    break
                done += 1
            if done < len(drafts):
                waiting.append((first, drafts, done, bins))
        self.pending = waiting
