"""`BatchEngine`: many sequences advanced together, one pass of the base for all of them.

The scheduler, after vLLM's: sequences are submitted, wait in a bounded queue for a slot, run,
and leave; between passes any of that may happen (continuous batching). Each running sequence
is the ordinary loop (`onebit.run`, plain or speculative, greedy or seeded-sampled, with a
head of its own) in a thread of its own, on a `SlotBase`; its base calls become rows of the
next pass. `step()` is one pass:

1. admit waiting sequences into free slots, oldest first;
2. wait until every running sequence has posted its next rows (or ended);
3. take the posted calls oldest first while they fit `max_rows` (a call that does not fit
   waits for the next pass, and is then among the oldest, so nothing starves); a long prompt
   arrives as chunks of `chunk` rows (the slots' `max_batch_rows`), interleaved with the
   others' decode rows;
4. run them in one `BatchRows.rows` call and hand each sequence its own rows back;
5. free the slots of sequences that ended or were cancelled.

What each sequence emits depends only on its own rows, so it equals its run alone bit for bit,
tokens and log-probabilities, whoever else is served: the batch contract
(`pytest_onebit.batch`, checks M1..M6) holds an engine to that from outside.

Memory is bounded up front: a slot holds at most `context` positions (the prompt, the budget and
the widest verify), so the KV cache never exceeds `slots * context` positions; a request that
could not fit in a slot is refused at `submit` (`BatchRefused`), and one that finds the queue
full too (`QueueFull`). Nothing admitted is dropped: every handle gets a result.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from onebit.batch.rows import BatchRows, StackRows
from onebit.batch.slot import SequenceCancelled, SlotBase
from onebit.errors import DecodeError
from onebit.loop import check_request
from onebit.loop import run as loop_run
from onebit.params import DecodeParams


class BatchRefused(ValueError):
    """A request the engine cannot take: named with what does not fit."""


class QueueFull(BatchRefused):
    """Every slot is busy and the waiting queue is at its limit."""


@dataclass(frozen=True)
class BatchRequest:
    """One sequence to decode: `params` (onebit.params.DecodeParams: the prompt, the budget,
    greedy or seeded-sampled, the ids that end it) as the caller prepared them, and what the
    engine adds for a slot. `head(clock)` makes its draft head (a fresh one: heads keep
    state per run), given the sequence's own clock (`BatchEngine` charges each sequence its
    share of every pass it took part in, so a cost policy sees what its rows cost in this
    batch); None decodes plain. `on_token(token)` sees each token as it is committed, a stop
    id included (which then ends the answer, emitted as `onebit.generate` emits it); it must
    not block (every sequence waits for the slowest to post its rows), and returning False
    ends the answer there. `wrap(base)` may wrap the sequence's base (a `ScoredBase` records
    log-probabilities, `params.process` applies the knobs): the result keeps the wrapped
    base. `cancelled()`, read before each token is taken, says the sequence's client has
    gone: the sequence then ends there as cancelled (counted so), as `Handle.cancel` ends it
    between tokens."""

    params: DecodeParams
    head: Callable[[Callable[[], float]], object] | None = None
    k: int = 0
    on_token: Callable[[int], bool | None] | None = None
    wrap: Callable[[object], object] | None = None
    cancelled: Callable[[], bool] | None = None

    @classmethod
    def of(cls, prompt: Sequence[int], max_tokens: int, *, sampling=None,
           seed: int | None = None, stop_ids=frozenset(), **slot) -> BatchRequest:
        """A request from its parts, for callers with no `DecodeParams` at hand."""
        return cls(DecodeParams(prompt, max_tokens, sampling=sampling, seed=seed,
                                stop_ids=stop_ids), **slot)


@dataclass
class BatchResult:
    """What a sequence produced. `finish`: "stop" (a stop id, or `on_token` said False),
    "length" (its budget), "cancelled" or "error" (`error` says what). `tokens` are exactly
    what its loop committed after the prompt. Pass numbers say when it was submitted, admitted
    and ended (`waited` = admitted - submitted)."""

    tokens: list[int]
    finish: str
    error: BaseException | None
    stats: object | None  # the loop's RunStats (None when it never ran)
    base: object | None  # the base its loop ran on (wrapped by `wrap`)
    submitted: int
    admitted: int | None
    finished: int

    @property
    def waited(self) -> int | None:
        return None if self.admitted is None else self.admitted - self.submitted


@dataclass
class EngineStats:
    """Counters since the engine was made (what `/metrics` exports)."""

    passes: int = 0
    rows: int = 0
    max_pass_rows: int = 0
    submitted: int = 0
    refused: int = 0
    finished: int = 0
    cancelled: int = 0
    errors: int = 0
    tokens: int = 0
    proposed: int = 0
    accepted: int = 0
    pass_seconds: float = 0.0


class _Call:
    """Rows one sequence posted, waiting for a pass."""

    __slots__ = ("tokens", "positions", "last_only", "order", "logits", "hidden", "error",
                 "done", "ready")

    def __init__(self, tokens: list[int], pos: int, last_only: bool, order: int) -> None:
        self.tokens = tokens
        self.positions = list(range(pos, pos + len(tokens)))
        self.last_only = last_only
        self.order = order
        self.logits: np.ndarray | None = None
        self.hidden: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False  # set under the engine's lock; `ready` wakes the one thread waiting
        self.ready = threading.Event()


@dataclass(eq=False)
class _Seq:
    id: int
    request: BatchRequest
    submitted: int
    slot: int | None = None
    admitted: int | None = None
    call: _Call | None = None
    cancelled: bool = False
    ended: bool = False  # its thread is done
    charged: float = 0.0  # its share of the passes it took part in (its clock)
    emitted: list[int] = field(default_factory=list)
    finish: str = "length"
    error: BaseException | None = None
    stats: object | None = None
    base: object | None = None
    result: BatchResult | None = None
    done: threading.Event = field(default_factory=threading.Event)


class Handle:
    """A submitted sequence: `result()` waits for its `BatchResult`; `cancel()` ends it."""

    def __init__(self, engine: BatchEngine, seq: _Seq) -> None:
        self._engine = engine
        self._seq = seq
        self.id = seq.id

    def done(self) -> bool:
        return self._seq.done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the sequence has its result; False on timeout."""
        return self._seq.done.wait(timeout)

    def result(self, timeout: float | None = None) -> BatchResult:
        if not self._seq.done.wait(timeout):
            raise TimeoutError(f"sequence {self.id} has not finished")
        assert self._seq.result is not None
        return self._seq.result

    def cancel(self) -> None:
        self._engine.cancel(self)


class BatchEngine:
    """Sequences over `rows` (a `BatchRows`, or a model with the compiled stack and `slots`
    given). `max_rows`: the most rows a pass runs; `chunk`: the most rows one call of a
    sequence posts (its prefill chunk, the widest verify); `queue`: the most sequences waiting
    for a slot; `context`: the most positions a slot holds (default: the base's own limit);
    `run`: the loop each sequence runs (default `onebit.run`)."""

    def __init__(self, rows, *, slots: int | None = None, max_rows: int = 64, chunk: int = 32,
                 queue: int = 64, context: int | None = None,
                 run: Callable | None = None) -> None:
        if not isinstance(rows, BatchRows):
            rows = StackRows(rows, slots if slots is not None else 8)
        elif slots is not None and slots != rows.slots:
            raise ValueError(f"slots is {slots}, but the rows hold {rows.slots}")
        for name, value, least in (("max_rows", max_rows, 1), ("chunk", chunk, 1),
                                   ("queue", queue, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        if chunk > max_rows:
            raise ValueError(f"chunk ({chunk}) must not exceed max_rows ({max_rows}): a call "
                             f"of a full chunk would never fit a pass")
        own = rows.context()
        if context is None:
            context = own
        elif (isinstance(context, bool) or not isinstance(context, int) or context < 2
              or (own is not None and context > own)):
            raise ValueError(f"context must be an integer in [2, {own or 'inf'}], got "
                             f"{context!r}")
        self.rows = rows
        self.run = run if run is not None else loop_run  # any loop with onebit.run's signature
        self.max_rows = max_rows
        self.chunk = chunk
        self.queue_limit = queue
        self.context = context
        self.stats = EngineStats()
        self._cv = threading.Condition()
        self._waiting: deque[_Seq] = deque()
        self._running: dict[int, _Seq] = {}  # slot -> sequence
        self._next_id = 0
        self._order = 0  # posting order of calls: the oldest runs first
        self._closed = False
        self._in_pass = False  # a pass runs outside the lock; a cancelled slot waits for it
        self._to_release: list[int] = []
        self._detached: list[_Seq] = []  # cancelled, slot released, thread still unwinding

    # -- the public face ----------------------------------------------------------------------

    @property
    def slots(self) -> int:
        return self.rows.slots

    def queue_depth(self) -> int:
        with self._cv:
            return len(self._waiting)

    def running(self) -> int:
        with self._cv:
            return len(self._running)

    def submit(self, request: BatchRequest) -> Handle:
        """Queue `request`; it is admitted at the next pass with a free slot. Raises
        `BatchRefused` for a request that cannot fit a slot, `QueueFull` when the queue is at
        its limit, ValueError for bad arguments; a refused request leaves no trace."""
        p = request.params
        if not isinstance(p, DecodeParams):
            raise ValueError(f"BatchRequest.params must be a DecodeParams, got {p!r}")
        prompt = check_request(self.rows, p.prompt, max_tokens=p.max_tokens, k=request.k)
        need = len(prompt) + p.max_tokens + (request.k if request.head else 0)
        with self._cv:
            if self._closed:
                raise BatchRefused("the engine is shutting down")
            if request.head is not None and request.k > self.chunk - 1:
                self.stats.refused += 1
                raise BatchRefused(f"k is {request.k}; a slot verifies at most "
                                   f"{self.chunk - 1} drafts at once (chunk {self.chunk})")
            if self.context is not None and need > self.context:
                self.stats.refused += 1
                raise BatchRefused(
                    f"the prompt ({len(prompt)} tokens) and max_tokens ({p.max_tokens})"
                    f"{f' and k ({request.k})' if request.head else ''} need {need} positions; "
                    f"a slot holds {self.context}")
            free = self.slots - len(self._running)
            if len(self._waiting) >= free + self.queue_limit:
                self.stats.refused += 1
                raise QueueFull(f"all {self.slots} slots are taken and {len(self._waiting)} "
                                f"requests wait for one (the queue's limit is "
                                f"{self.queue_limit} beyond the free slots)")
            seq = _Seq(self._next_id, request, self.stats.passes)
            self._next_id += 1
            self.stats.submitted += 1
            self._waiting.append(seq)
            self._cv.notify_all()
        return Handle(self, seq)

    def cancel(self, handle: Handle) -> None:
        """End a sequence: a waiting one leaves the queue; a running one stops before its next
        rows run and its slot is freed at once (after the pass in flight, if its rows are in
        it), free for a waiting sequence at the next pass. Its result keeps what it had
        committed."""
        seq = handle._seq
        with self._cv:
            if seq.done.is_set() or seq.cancelled or seq.ended:
                return  # an ended sequence keeps its own finish; the next pass reaps it
            seq.cancelled = True
            seq.finish = "cancelled"
            if seq in self._waiting:
                self._waiting.remove(seq)
                self._finish(seq)
            elif seq.slot is not None and self._running.get(seq.slot) is seq:
                # its loop stops at its next base call; the posted one, if any, fails now
                self._deliver_error(seq, SequenceCancelled(f"sequence {seq.id} cancelled"))
                if self._in_pass:  # the pass may be writing this slot's rows right now
                    self._to_release.append(seq.slot)
                else:
                    self._release(seq.slot)
                self._detached.append(seq)  # its result when its thread has unwound
            self._cv.notify_all()

    def full(self) -> bool:
        """Whether a request submitted now would find the queue full (`QueueFull`)."""
        with self._cv:
            return len(self._waiting) >= self.slots - len(self._running) + self.queue_limit

    def idle(self) -> bool:
        with self._cv:
            return not (self._waiting or self._running or self._detached)

    def step(self) -> bool:
        """One pass: admit, gather, run, hand back, reap. False when there was nothing to do."""
        with self._cv:
            while True:  # a sequence that ends frees a slot a waiting one may take at once
                self._admit()
                self._cv.wait_for(self._all_parked)
                if not (self._reap() and self._waiting):
                    break
            calls = self._take()
            if not calls:
                return bool(self._running or self._waiting or self._detached)
            self._in_pass = True
        started = time.perf_counter()
        tokens = [t for _, c in calls for t in c.tokens]
        positions = [p for _, c in calls for p in c.positions]
        slots = [s.slot for s, c in calls for _ in c.tokens]
        last_of = [not c.last_only or i == len(c.tokens) - 1 for _, c in calls
                   for i in range(len(c.tokens))]
        try:
            logits, hidden = self.rows.rows(tokens, positions, slots, last_of)
            failure = None
        except Exception as error:  # the base failed: each sequence in the pass gets it
            failure = error
        seconds = time.perf_counter() - started
        with self._cv:
            self._in_pass = False
            for slot in self._to_release:  # cancelled while the pass ran: freed now it is over
                self._release(slot)
            self._to_release.clear()
            self.stats.passes += 1
            self.stats.rows += len(tokens)
            self.stats.max_pass_rows = max(self.stats.max_pass_rows, len(tokens))
            self.stats.pass_seconds += seconds
            first = 0
            for seq, call in calls:
                n = len(call.tokens)
                seq.charged += seconds * n / len(tokens)
                if call.done:  # cancelled while the pass ran
                    first += n
                    continue
                if failure is not None:
                    self._deliver_error(seq, failure)
                else:
                    call.logits = logits[first:first + n]
                    call.hidden = hidden[first:first + n]
                    call.done = True
                    call.ready.set()
                    seq.call = None
                first += n
            self._cv.notify_all()
        return True

    def run_until_idle(self, max_passes: int | None = None) -> int:
        """Step until no sequence waits or runs; returns the passes run."""
        passes = 0
        while not self.idle():
            if max_passes is not None and passes >= max_passes:
                raise RuntimeError(f"not idle after {max_passes} passes")
            self.step()
            passes += 1
        return passes

    def drive(self, stop: threading.Event) -> None:
        """Step until `stop` is set, sleeping while there is nothing to do: the loop a server
        runs in a thread of its own while other threads submit."""
        while not stop.is_set():
            if not self.step():
                with self._cv:
                    self._cv.wait_for(lambda: bool(self._waiting or self._running
                                                   or self._detached) or stop.is_set(),
                                      timeout=0.05)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing waits or runs (another thread steps); False on timeout."""
        with self._cv:
            return self._cv.wait_for(
                lambda: not (self._waiting or self._running or self._detached), timeout)

    def close(self, *, cancel: bool = True) -> None:
        """Refuse new requests; cancel what waits and runs (`cancel=True`) or let it finish
        (then call `run_until_idle` or keep a driver stepping)."""
        with self._cv:
            self._closed = True
            seqs = list(self._waiting) + list(self._running.values())
        if cancel:
            for seq in seqs:
                self.cancel(Handle(self, seq))

    # -- what the slots call (SlotBase) -----------------------------------------------------------

    def _post(self, seq: _Seq, tokens: list[int], pos: int, *, last_only: bool):
        with self._cv:
            if seq.cancelled:
                raise SequenceCancelled(f"sequence {seq.id} cancelled")
            if len(tokens) > self.chunk:
                raise ValueError(f"{len(tokens)} rows in one call; a slot takes {self.chunk}")
            if self.context is not None and pos + len(tokens) > self.context:
                raise BatchRefused(f"position {pos + len(tokens) - 1} is past the slot's "
                                   f"{self.context} positions")
            call = _Call(tokens, pos, last_only, self._order)
            self._order += 1
            seq.call = call
            self._cv.notify_all()  # the driver, waiting for every sequence to post
        # each sequence waits on its own call, so a pass's hand-back wakes each thread once
        # (not every waiting thread at every post)
        call.ready.wait()
        if call.error is not None:
            raise call.error
        return call.logits, call.hidden

    def _truncate(self, seq: _Seq, length: int) -> None:
        with self._cv:
            if seq.slot is not None and not seq.cancelled:
                self.rows.truncate(seq.slot, length)

    # -- the scheduler's pieces (under the lock) ------------------------------------------------

    def _admit(self) -> None:
        free = [s for s in range(self.slots) if s not in self._running]
        while free and self._waiting:
            seq = self._waiting.popleft()
            seq.slot = free.pop(0)
            seq.admitted = self.stats.passes
            self._running[seq.slot] = seq
            threading.Thread(target=self._work, args=(seq,), name=f"onebit-seq-{seq.id}",
                             daemon=True).start()

    def _all_parked(self) -> bool:
        return all(s.ended or (s.call is not None and not s.call.done)
                   for s in self._running.values()) and all(s.ended for s in self._detached)

    def _reap(self) -> bool:
        """Release the slots of sequences that ended; True when one was released."""
        freed = False
        for slot, seq in list(self._running.items()):
            if seq.ended:
                self._release(slot)
                self._finish(seq)
                freed = True
        for seq in [s for s in self._detached if s.ended]:
            self._detached.remove(seq)
            self._finish(seq)
        return freed

    def _release(self, slot: int) -> None:
        """The slot's sequence is gone: forget its cache, so the next one starts clean."""
        del self._running[slot]
        self.rows.free(slot)

    def _take(self) -> list[tuple[_Seq, _Call]]:
        posted = sorted(((s, s.call) for s in self._running.values()
                         if s.call is not None and not s.call.done), key=lambda sc: sc[1].order)
        taken, rows = [], 0
        for seq, call in posted:
            if rows + len(call.tokens) > self.max_rows:
                break  # oldest first: a younger call never overtakes one that waits
            taken.append((seq, call))
            rows += len(call.tokens)
        return taken

    def _deliver_error(self, seq: _Seq, error: BaseException) -> None:
        call = seq.call
        if call is None:
            return
        call.error = error
        call.done = True
        call.ready.set()
        seq.call = None

    def _finish(self, seq: _Seq) -> None:
        s = self.stats
        if seq.finish == "cancelled":
            s.cancelled += 1
        elif seq.finish == "error":
            s.errors += 1
        else:
            s.finished += 1
        if seq.stats is not None:
            s.proposed += int(getattr(seq.stats, "proposed", 0))
            s.accepted += int(getattr(seq.stats, "accepted", 0))
        seq.result = BatchResult(list(seq.emitted), seq.finish, seq.error, seq.stats, seq.base,
                                 seq.submitted, seq.admitted, s.passes)
        seq.done.set()
        self._cv.notify_all()  # wait_idle

    # -- one sequence's thread -----------------------------------------------------------------

    def _work(self, seq: _Seq) -> None:
        request = seq.request
        params = request.params
        base = SlotBase(self, seq, self.chunk)
        wrapped = request.wrap(base) if request.wrap is not None else base
        seq.base = wrapped
        stops = params.stop_ids

        def on_token(token: int):
            if seq.cancelled:  # nothing after the cancel: the result is what was committed
                return False
            if request.cancelled is not None and request.cancelled():
                with self._cv:  # the client has gone: a cancel, not an answer that ended
                    seq.cancelled = True
                    seq.finish = "cancelled"
                return False
            seq.emitted.append(token)
            with self._cv:
                self.stats.tokens += 1
            said = request.on_token(token) if request.on_token is not None else None
            if said is False or token in stops:
                seq.finish = "stop"
                return False
            return None

        try:
            head = request.head(lambda: seq.charged) if request.head is not None else None
            result = params.run(self.run, wrapped, head, k=request.k, on_token=on_token)
            seq.stats = result.stats
        except DecodeError as error:
            seq.emitted[:] = list(error.emitted)
            if not (isinstance(error.__cause__, SequenceCancelled) or seq.cancelled):
                seq.finish, seq.error = "error", error
        except BaseException as error:  # noqa: BLE001 - reported in the result, never lost
            seq.finish, seq.error = "error", error
        finally:
            with self._cv:
                seq.ended = True
                self._cv.notify_all()
