"""`execute(make_engine, scenario)`: run one batch scenario on the toy batched base, and every
sequence of it alone, and keep what the checks read (`BatchTrace`).

`make_engine(rows, *, max_rows, chunk, queue, context)` builds the engine under test over a
`BatchRows`; it must offer `submit(BatchRequest) -> handle` (raising `QueueFull` /
`BatchRefused`), `cancel(handle)`, `step()`, `idle()`, `running()`, `queue_depth()` and
`stats` (an `EngineStats`), and its handles `result() -> BatchResult`: onebit's `BatchEngine`
is one. Each sequence's log-probabilities are recorded by wrapping its base in a `ScoredBase`,
so they are the rows its tokens were chosen from.

A sequence alone is the same request, never cancelled, on a fresh engine of one slot over a
fresh toy: what it would have produced had nobody else been served.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from onebit.batch.engine import BatchRefused, BatchRequest, BatchResult, QueueFull
from onebit.heads.ngram import NgramHead
from onebit.sampling import Sampling
from onebit.serve.scores import ScoredBase
from pytest_onebit.batch.scenarios import BatchScenario, SeqSpec
from pytest_onebit.batch.toy import ToyBatchRows

#: the sampled sequences' settings: wide enough that a wrong row changes what is drawn
SAMPLING = Sampling(temperature=0.9, top_k=12)
#: a scenario that has not ended after this many seconds is a hung engine, not a slow one
HANG_SECONDS = 60.0


class ScriptHead:
    """Drafts `truth` (a greedy answer alone, prompt included) with every draft whose
    position's hash is 0 mod 4 replaced by a wrong token: blocks accepted whole, in part, and
    not at all, at positions the scenario fixes."""

    def __init__(self, truth: list[int], vocab: int, seed: int) -> None:
        self.truth = truth
        self.vocab = vocab
        self.seed = seed

    def needs_last_hidden(self) -> bool:
        return False

    def reset(self) -> None:
        pass

    def commit_rows(self, tokens, rows, count) -> None:
        pass

    def propose(self, token, pos, k, hidden):
        out = []
        for i in range(1, k + 1):
            at = pos + i
            right = self.truth[at] if at < len(self.truth) else 0
            wrong = (at * 2654435761 + self.seed) % 4 == 0
            out.append((right + 1) % self.vocab if wrong else right)
        return out


def greedy_truth(scenario: BatchScenario, spec: SeqSpec, length: int) -> list[int]:
    """The prompt and `length` greedy tokens after it, stepped on a toy of one slot directly
    (no engine): the script head's text and where `stop_at` finds its stop token."""
    rows = ToyBatchRows(1, vocab_size=scenario.vocab, seed=scenario.seed)
    tokens = list(spec.prompt)
    n = len(tokens)
    logits, _ = rows.rows(tokens, list(range(n)), [0] * n, [True] * n)
    while len(tokens) < len(spec.prompt) + length:
        tokens.append(int(np.argmax(logits[-1])))
        logits, _ = rows.rows([tokens[-1]], [len(tokens) - 1], [0], [True])
    return tokens


@dataclass
class Outcome:
    """One sequence of the scenario: how its submission went, its result in the batch, and
    alone."""

    index: int
    spec: SeqSpec
    request: BatchRequest | None = None
    refused: BaseException | None = None
    at_submit: tuple[int, int] = (0, 0)  # (running, waiting) just before it was submitted
    result: BatchResult | None = None
    logprobs: list[float] = field(default_factory=list)
    cancelled_at: int | None = None  # the pass before which cancel() was called
    running_after_cancel: tuple[int, int] | None = None  # running() before / after cancel
    alone: BatchResult | None = None
    alone_logprobs: list[float] = field(default_factory=list)
    greedy: list[int] = field(default_factory=list)  # plain greedy decoding's answer, stepped


@dataclass
class BatchTrace:
    scenario: BatchScenario
    outcomes: list[Outcome]
    passes: int  # step() calls that ran
    stats: object  # the engine's EngineStats after the scenario
    rows: ToyBatchRows  # the toy the batch ran on: its passes, widths and misuse
    stops: dict[int, frozenset[int]]  # each sequence's stop ids
    cannot_sample: str | None = None  # the loop refused `sampling=`: sampled checks n/a


def _request(scenario: BatchScenario, spec: SeqSpec, stops: frozenset[int]) -> BatchRequest:
    truth = greedy_truth(scenario, spec, spec.max_tokens + 8)
    head = None
    if spec.head == "ngram":
        def head(clock, k=spec.k):
            return NgramHead(2, max(k, 1))
    elif spec.head == "script":
        def head(clock, t=truth):
            return ScriptHead(t, scenario.vocab, spec.seed)
    n = len(spec.prompt)
    return BatchRequest.of(prompt=spec.prompt, max_tokens=spec.max_tokens, head=head,
                        k=spec.k if head is not None else 0,
                        sampling=SAMPLING if spec.sampled else None, seed=spec.seed,
                        stop_ids=stops, wrap=lambda base: ScoredBase(base, start=n))


def _stops(scenario: BatchScenario, spec: SeqSpec) -> frozenset[int]:
    if spec.stop_at is None:
        return frozenset()
    truth = greedy_truth(scenario, spec, spec.stop_at + 1)
    return frozenset([truth[len(spec.prompt) + spec.stop_at]])


def _logprobs(result: BatchResult) -> list[float]:
    return [lp.logprob for lp in getattr(result.base, "logprobs", [])]


def _engine(make_engine, scenario: BatchScenario, slots: int):
    rows = ToyBatchRows(slots, vocab_size=scenario.vocab, seed=scenario.seed,
                        context=scenario.context, max_rows=scenario.max_rows)
    engine = make_engine(rows, max_rows=scenario.max_rows, chunk=scenario.chunk,
                         queue=scenario.queue, context=scenario.context)
    return rows, engine


def _bounded(work, what: str):
    """Run `work()` in a thread; an engine that hangs fails the case instead of the run."""
    out: dict = {}

    def target() -> None:
        try:
            out["value"] = work()
        except BaseException as error:  # noqa: BLE001 - handed back below
            out["error"] = error

    thread = threading.Thread(target=target, daemon=True, name=f"onebit-batch-{what}")
    thread.start()
    thread.join(HANG_SECONDS)
    if thread.is_alive():
        raise AssertionError(f"{what} did not end in {HANG_SECONDS:.0f} s: the engine hung")
    if "error" in out:
        raise out["error"]
    return out["value"]


def _play(make_engine, scenario: BatchScenario, requests, outcomes) -> tuple:
    rows, engine = _engine(make_engine, scenario, scenario.slots)
    handles: dict[int, object] = {}
    last = max(max(s.arrive for s in scenario.seqs),
               max((s.cancel for s in scenario.seqs if s.cancel is not None), default=0))
    bound = 10 * sum(len(s.prompt) + s.max_tokens + 2 for s in scenario.seqs) + last + 10
    passes = 0
    while True:
        for o in outcomes:
            if o.spec.arrive == passes:
                o.at_submit = (engine.running(), engine.queue_depth())
                try:
                    handles[o.index] = engine.submit(requests[o.index])
                except (QueueFull, BatchRefused) as error:
                    o.refused = error
            if o.spec.cancel == passes and o.index in handles:
                before = engine.running()
                engine.cancel(handles[o.index])
                o.cancelled_at = passes
                o.running_after_cancel = (before, engine.running())
        if passes >= last and engine.idle():
            break
        if passes > bound:
            raise AssertionError(f"the scenario has not ended after {passes} passes (at most "
                                 f"{bound} are needed): a sequence starves")
        engine.step()
        passes += 1
    for i, handle in handles.items():
        outcomes[i].result = handle.result(timeout=1.0)
        outcomes[i].logprobs = _logprobs(outcomes[i].result)
    return passes, engine.stats, rows


def execute(make_engine, scenario: BatchScenario) -> BatchTrace:
    stops = {i: _stops(scenario, s) for i, s in enumerate(scenario.seqs)}
    requests = [_request(scenario, s, stops[i]) for i, s in enumerate(scenario.seqs)]
    outcomes = [Outcome(i, s, requests[i]) for i, s in enumerate(scenario.seqs)]
    for o in outcomes:
        answer = greedy_truth(scenario, o.spec, o.spec.max_tokens)[len(o.spec.prompt):]
        hits = [i for i, t in enumerate(answer) if t in stops[o.index]]
        o.greedy = answer[:hits[0] + 1] if hits else answer
    passes, stats, rows = _bounded(lambda: _play(make_engine, scenario, requests, outcomes),
                                   f"scenario {scenario.id}")
    for o in outcomes:
        error = o.result.error if o.result is not None else None
        cause = getattr(error, "__cause__", None) or error
        if o.spec.sampled and isinstance(cause, TypeError) and "sampling" in str(cause):
            return BatchTrace(scenario, outcomes, passes, stats, rows, stops,
                              cannot_sample=f"{type(cause).__name__}: {cause}")
    for o in outcomes:
        if o.refused is not None:
            continue

        def alone(o=o):
            _, engine = _engine(make_engine, scenario, 1)
            handle = engine.submit(requests[o.index])
            while not engine.idle():
                engine.step()
            return handle.result(timeout=1.0)

        o.alone = _bounded(alone, f"sequence {o.index} alone")
        o.alone_logprobs = _logprobs(o.alone)
    return BatchTrace(scenario, outcomes, passes, stats, rows, stops)
