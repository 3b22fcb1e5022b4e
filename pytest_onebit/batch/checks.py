"""The batch contract's checks M1..M6: a batched engine serves each sequence exactly as it
would serve it alone, frees what it cancels, makes nobody wait for ever, keeps every budget and
stop, counts what it did, and refuses what it cannot hold instead of dropping it.

Each check reads one `BatchTrace` (a scenario run on the toy batched base, and each sequence
alone) and raises `AssertionError` saying what broke. docs/batching.md explains each; the
mutant catalogue `mutants/batch/` shows each failing on a believable bug.
"""

from __future__ import annotations

from pytest_onebit.batch.scenarios import BatchScenario, standard_batch_scenarios
from pytest_onebit.batch.trace import BatchTrace, Outcome, execute
from pytest_onebit.contract.core import Contract, NotApplicable

#: The batch contract: a case is one `BatchTrace`; the target is `make_engine`.
BATCH = Contract("batch", prepare=execute, scenarios=standard_batch_scenarios)
BATCH_CHECKS = BATCH.checks


def check(name: str, **options):
    """`BATCH.check`, for a check that is not applicable to a sampled scenario when the loop
    does not sample (it refused `sampling=`): it cannot break a promise it does not make."""
    def register(fn):
        def judged(t: BatchTrace) -> None:
            __tracebackhide__ = True
            if t.cannot_sample is not None:
                raise NotApplicable(f"the loop does not sample ({t.cannot_sample})")
            fn(t)

        judged.__doc__ = fn.__doc__
        BATCH.check(name, **options)(judged)
        return fn

    return register


def _ran(o: Outcome) -> bool:
    return o.result is not None


def _bits(values: list[float]) -> list[str]:
    return [float(v).hex() for v in values]


def _first_difference(a: list, b: list) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _whole(o: Outcome) -> bool:
    """It ran to its own end: not cancelled while it ran."""
    return _ran(o) and o.result.finish != "cancelled"


@check("M1-invariance")
def check_invariance(t: BatchTrace) -> None:
    """M1: every sequence that ran to its end emitted exactly the tokens it emits alone, with
    log-probabilities equal bit for bit and the same finish, whatever joined, left, was
    cancelled or was prefilled beside it (greedy and seeded-sampled, plain and speculative);
    and a greedy one emitted plain greedy decoding's answer (the base stepped one token at a
    time, no engine), so an engine wrong alone is caught too."""
    __tracebackhide__ = True
    for o in t.outcomes:
        if not _whole(o):
            continue
        r, a = o.result, o.alone
        if r.error is not None:
            raise AssertionError(f"sequence {o.index} failed in the batch: {r.error!r}")
        if not o.spec.sampled and r.tokens != o.greedy:
            i = _first_difference(r.tokens, o.greedy)
            raise AssertionError(
                f"greedy sequence {o.index} ({o.spec.head} head, k={o.spec.k}) differs from "
                f"plain greedy decoding at answer token {i}: {r.tokens[i:i + 6]} vs "
                f"{o.greedy[i:i + 6]}")
        if r.tokens != a.tokens:
            i = _first_difference(r.tokens, a.tokens)
            raise AssertionError(
                f"sequence {o.index} ({o.spec.head} head, k={o.spec.k}, "
                f"{'sampled' if o.spec.sampled else 'greedy'}) differs from its run alone at "
                f"answer token {i}: batch {r.tokens[i:i + 6]} vs alone {a.tokens[i:i + 6]}")
        if _bits(o.logprobs) != _bits(o.alone_logprobs):
            i = _first_difference(_bits(o.logprobs), _bits(o.alone_logprobs))
            raise AssertionError(
                f"sequence {o.index}: same tokens as alone, but the log-probability of answer "
                f"token {i} is {o.logprobs[i]!r} in the batch and {o.alone_logprobs[i]!r} alone: "
                "its row's bits depend on the batch")
        if r.finish != a.finish:
            raise AssertionError(f"sequence {o.index} finished {r.finish!r} in the batch, "
                                 f"{a.finish!r} alone")


@check("M2-cancel-isolation", applies=lambda s: s.cancels)
def check_cancel(t: BatchTrace) -> None:
    """M2: a cancelled sequence ends with a prefix of its answer alone and its slot is free at
    once (running() drops when it is cancelled), and every other sequence still equals its run
    alone: a cancel leaks nothing into a neighbour."""
    __tracebackhide__ = True
    for o in t.outcomes:
        if o.cancelled_at is None or not _ran(o):
            continue
        r, a = o.result, o.alone
        if r.finish == "cancelled":
            if r.tokens != a.tokens[:len(r.tokens)]:
                raise AssertionError(f"cancelled sequence {o.index} emitted {r.tokens}, not a "
                                     f"prefix of its answer alone {a.tokens}")
            if _bits(o.logprobs) != _bits(o.alone_logprobs[:len(o.logprobs)]):
                raise AssertionError(f"cancelled sequence {o.index}: log-probabilities are not "
                                     "those of its answer alone")
        before, after = o.running_after_cancel
        ran_then = r.admitted is not None and r.admitted <= o.cancelled_at
        if ran_then and r.finish == "cancelled" and after != before - 1:
            raise AssertionError(f"sequence {o.index} was running when cancelled, but "
                                 f"running() went {before} -> {after}: its slot was not freed "
                                 "at once")
    check_invariance(t)


@check("M3-bounded-wait")
def check_wait(t: BatchTrace) -> None:
    """M3: nobody waits without cause or for ever: sequences are admitted in the order they were
    submitted, one submitted while a slot was free and nobody waited is admitted at the next
    pass, and every admitted sequence ends (the scenario drains within its pass bound)."""
    __tracebackhide__ = True
    ran = [o for o in t.outcomes if _ran(o) and o.result.admitted is not None]
    order = sorted(ran, key=lambda o: (o.spec.arrive, o.index))
    for earlier, later in zip(order, order[1:], strict=False):
        if later.result.admitted < earlier.result.admitted:
            raise AssertionError(f"sequence {later.index} was admitted at pass "
                                 f"{later.result.admitted}, before sequence {earlier.index} "
                                 f"(submitted earlier) at {earlier.result.admitted}")
    for o in ran:
        running, waiting = o.at_submit
        if running < t.scenario.slots and waiting == 0 and o.result.waited != 0:
            raise AssertionError(f"sequence {o.index} found a free slot and an empty queue, "
                                 f"yet waited {o.result.waited} passes")
    for o in t.outcomes:
        if o.request is not None and o.refused is None and not _ran(o):
            raise AssertionError(f"sequence {o.index} was accepted but never got a result")


@check("M4-budget-stop")
def check_budget(t: BatchTrace) -> None:
    """M4: inside a batch each sequence keeps its own budget and stops: never more than its
    max_tokens, nothing after its stop token (even when later drafts of the same block were
    right), "length" only at the budget and "stop" only on a stop token."""
    __tracebackhide__ = True
    for o in t.outcomes:
        if not _ran(o):
            continue
        r, stops = o.result, t.stops[o.index]
        if len(r.tokens) > o.spec.max_tokens:
            raise AssertionError(f"sequence {o.index} emitted {len(r.tokens)} tokens; its "
                                 f"budget is {o.spec.max_tokens}")
        hits = [i for i, tok in enumerate(r.tokens) if tok in stops]
        if hits and hits[0] != len(r.tokens) - 1:
            raise AssertionError(f"sequence {o.index} went on past its stop token at answer "
                                 f"index {hits[0]} (it emitted {len(r.tokens)})")
        if r.finish == "stop" and not hits:
            raise AssertionError(f"sequence {o.index} finished 'stop' without a stop token")
        if r.finish == "length" and len(r.tokens) != o.spec.max_tokens:
            raise AssertionError(f"sequence {o.index} finished 'length' after "
                                 f"{len(r.tokens)} of {o.spec.max_tokens} tokens")
        if r.finish not in ("stop", "length", "cancelled"):
            raise AssertionError(f"sequence {o.index} finished {r.finish!r}: {r.error!r}")


@check("M5-statistics")
def check_statistics(t: BatchTrace) -> None:
    """M5: the engine's counters say what happened: one base pass per step that ran rows, the
    rows the base ran, no pass wider than max_rows, every token emitted, every request
    accounted for (finished + cancelled + errors + refused), accepted <= proposed and equal to
    the sequences' own counts; and the base saw no misuse (a row whose earlier positions its
    slot did not hold)."""
    __tracebackhide__ = True
    s, rows, sc = t.stats, t.rows, t.scenario
    if rows.misuse:
        raise AssertionError(f"the base was misused: {rows.misuse[0]}")
    if s.passes != rows.passes:
        raise AssertionError(f"stats.passes is {s.passes}; the base ran {rows.passes} passes")
    if s.rows != rows.rows_run:
        raise AssertionError(f"stats.rows is {s.rows}; the base ran {rows.rows_run} rows")
    if rows.pass_widths and max(rows.pass_widths) > sc.max_rows:
        raise AssertionError(f"a pass ran {max(rows.pass_widths)} rows; max_rows is "
                             f"{sc.max_rows}")
    ran = [o for o in t.outcomes if _ran(o)]
    emitted = sum(len(o.result.tokens) for o in ran)
    if s.tokens != emitted:
        raise AssertionError(f"stats.tokens is {s.tokens}; the results hold {emitted}")
    refused = sum(o.refused is not None for o in t.outcomes)
    if (s.submitted, s.refused) != (len(ran), refused):
        raise AssertionError(f"stats say {s.submitted} submitted and {s.refused} refused; "
                             f"{len(ran)} were taken and {refused} refused")
    if s.finished + s.cancelled + s.errors != s.submitted:
        raise AssertionError(f"{s.finished} finished + {s.cancelled} cancelled + {s.errors} "
                             f"errors != {s.submitted} submitted: a request was dropped")
    cancelled = sum(o.result.finish == "cancelled" for o in ran)
    if s.cancelled != cancelled:
        raise AssertionError(f"stats.cancelled is {s.cancelled}; {cancelled} results say so")
    proposed = sum(int(getattr(o.result.stats, "proposed", 0)) for o in ran if o.result.stats)
    accepted = sum(int(getattr(o.result.stats, "accepted", 0)) for o in ran if o.result.stats)
    if (s.proposed, s.accepted) != (proposed, accepted) or s.accepted > s.proposed:
        raise AssertionError(f"stats say {s.accepted} of {s.proposed} drafts accepted; the "
                             f"sequences' own counts say {accepted} of {proposed}")


@check("M6-admission")
def check_admission(t: BatchTrace) -> None:
    """M6: a request is refused at submit, with a typed error, exactly when it cannot be held:
    more positions than a slot holds or more drafts than a call verifies (BatchRefused), or
    every slot taken and the queue at its limit (QueueFull); every request taken gets a
    result, none an error."""
    __tracebackhide__ = True
    from onebit.batch.engine import QueueFull

    sc: BatchScenario = t.scenario
    for o in t.outcomes:
        need = len(o.spec.prompt) + o.spec.max_tokens + (o.spec.k if o.spec.head != "none"
                                                          else 0)
        too_long = sc.context is not None and need > sc.context
        too_wide = o.spec.head != "none" and o.spec.k > sc.chunk - 1
        running, waiting = o.at_submit
        full = waiting >= (sc.slots - running) + sc.queue
        if too_long or too_wide:
            if o.refused is None or isinstance(o.refused, QueueFull):
                why = (f"needs {need} positions, more than a slot's {sc.context}" if too_long
                       else f"drafts k={o.spec.k}, more than a call of {sc.chunk} rows verifies")
                raise AssertionError(f"sequence {o.index} {why}, and was not refused for it "
                                     f"({o.refused!r})")
        elif full:
            if not isinstance(o.refused, QueueFull):
                raise AssertionError(f"sequence {o.index} came with {running} running and "
                                     f"{waiting} waiting (queue {sc.queue}) and was not "
                                     f"refused with QueueFull ({o.refused!r})")
        elif o.refused is not None:
            raise AssertionError(f"sequence {o.index} fits and the queue had room, yet it was "
                                 f"refused: {o.refused!r}")
        if o.refused is None and (not _ran(o) or o.result.finish == "error"):
            raise AssertionError(f"sequence {o.index} was taken but "
                                 f"{'got no result' if not _ran(o) else repr(o.result.error)}")

