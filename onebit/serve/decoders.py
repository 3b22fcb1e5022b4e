"""The two ways a server shares its model between requests, behind one interface.

- `OneAtATime`: a lock for the whole decode (a streamed one included), because the base keeps
  one KV cache and one committed position. Concurrent requests queue on the lock and each gets
  what it would alone.
- `Batched`: a `BatchEngine` (onebit.batch) with N slots, stepped by a driver thread, advances
  every running request in one pass of the base; more wait in its bounded queue. Each request
  is still the ordinary loop, so it gets exactly what it would alone, whoever else is served.

Both take a prepared request (`onebit.params.DecodeParams`), the text layer's `on_token` and
`wrap` (the base the loop runs: logprobs recorded, knobs applied), and the client's
`cancelled`; both give back a `Decoded`. Each builds its own draft heads: a fresh head per
request one at a time, a factory per slot batched (onebit.heads.registry), and in place of
either the request's own prediction (OpenAI's predicted outputs). Everything else a server
does (the prompt, the budget, stop strings, logprobs, the text) is `Engine`'s, the same for
both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from onebit.params import DecodeParams
from onebit.serve.errors import RequestError
from onebit.serve.heads import batched_head, head_for


@dataclass
class Decoded:
    """What a decoder hands back: the base the loop ran on (as `wrap` made it), the loop's
    stats (None where it never ran), the drafter used ("none", the server's head name or
    "prediction") and whether the client's going away ended it."""

    base: object
    stats: object | None
    drafter: str
    cancelled: bool


class _Drafting:
    """The server's head configuration, shared by both decoders."""

    def __init__(self, model, head: str, draft, k: int | None) -> None:
        self.model, self.head, self.draft, self.k = model, head, draft, k

    def prediction(self, params: DecodeParams):
        """(factory, k): the prediction's drafts, as many a round as the model's own verify
        takes (a batched slot's is wider; a seeded answer's draws follow the draft lengths,
        and must not depend on how it was served)."""
        from onebit.heads.prediction import PREDICTION_K, PredictionHead

        predicted = list(params.prediction)
        k = min(self.k or PREDICTION_K, max(1, self.model.max_batch_rows() - 1))
        return (lambda clock: PredictionHead(predicted, len(params.prompt), k=k)), k


class OneAtATime:
    """The whole model to one request at a time, under a lock."""

    parallel = False

    def __init__(self, model, *, head: str, draft, k: int | None, run: Callable) -> None:
        self.drafting = _Drafting(model, head, draft, k)
        self.model = model
        self.run = run
        self.lock = threading.Lock()
        self.served = {"tokens": 0, "proposed": 0, "accepted": 0, "finished": 0,
                       "cancelled": 0, "failed": 0, "refused": 0}

    def room(self) -> tuple[int | None, str]:
        """The most positions one answer's sequence may take here beyond the model's own
        context (None: the model's), and how to say why."""
        return None, ""

    def full(self) -> bool:
        return False

    def threads(self) -> int | None:
        """How many requests may decode at once (None: one, in a thread of its own)."""
        return None

    def refuse(self) -> None:
        self.served["refused"] += 1

    def decode(self, params: DecodeParams, on_token, wrap, cancelled) -> Decoded:
        d = self.drafting
        if params.drafts_prediction:
            factory, k = d.prediction(params)
            head, drafter = factory(None), "prediction"
        else:
            head, k = head_for(d.head, self.model, speculative=params.speculative,
                               draft=d.draft, k=d.k, seeded=params.seeded)
            drafter = d.head if head is not None else "none"
        gone, taken = [False], [0]

        def take(token: int):
            # the client is asked before each token is taken, as a batched slot asks
            # (BatchRequest.cancelled): a token after it has gone is not the answer's
            if cancelled is not None and cancelled():
                gone[0] = True
                return False
            taken[0] += 1
            return on_token(token)

        with self.lock:
            base = wrap(self.model)
            try:
                result = params.run(self.run, base, head, k=k, on_token=take)
            except Exception:
                self.served["failed"] += 1
                raise
        s = result.stats
        self.served["tokens"] += taken[0]
        self.served["proposed"] += s.proposed
        self.served["accepted"] += s.accepted
        self.served["cancelled" if gone[0] else "finished"] += 1
        return Decoded(base, s, drafter, gone[0])

    def metrics(self) -> dict[str, float]:
        m = {f"{k}_total": float(v) for k, v in self.served.items()}
        return {**m, "queue_depth": 0.0, "running": float(self.lock.locked()), "slots": 1.0}

    def kv_bound(self) -> int | None:
        return None

    def shutdown(self, *, cancel: bool = True) -> None:
        pass


class Batched:
    """N slots of a `BatchEngine`, stepped by a driver thread of its own."""

    parallel = True

    def __init__(self, model, *, head: str, draft, k: int | None, run: Callable,
                 slots: int, queue: int, context: int | None) -> None:
        from onebit.batch import BatchEngine
        from onebit.text.generate import context_length

        self.drafting = _Drafting(model, head, draft, k)
        batched_head(head, k=k)  # a head that cannot be batched fails at start
        if context is None:  # a slot holds what the model does, and no more
            context = context_length(model)
        self.batch = BatchEngine(model, slots=slots, queue=queue, run=run, context=context)
        self.refused = 0  # refused before submit (the queue full at the check)
        self._stop = threading.Event()
        self._driver = threading.Thread(target=self.batch.drive, args=(self._stop,),
                                        daemon=True, name="onebit-batch-driver")
        self._driver.start()

    def room(self) -> tuple[int | None, str]:
        # a slot's positions: the prompt, the answer and the widest verify past its end
        b = self.batch
        if b.context is None:
            return None, ""
        return b.context - b.chunk, (f" here (a slot's {b.context} positions less {b.chunk} "
                                     f"for the drafts past the answer)")

    def full(self) -> bool:
        return self.batch.full()

    def threads(self) -> int | None:
        return self.batch.slots + self.batch.queue_limit

    def refuse(self) -> None:
        self.refused += 1

    def decode(self, params: DecodeParams, on_token, wrap, cancelled) -> Decoded:
        """The request as one sequence of the batch engine. Waits for its result, cancelling
        it when the client goes away (a waiting request leaves the queue at once)."""
        from onebit.batch import BatchRefused, BatchRequest, QueueFull

        d = self.drafting
        if params.drafts_prediction:
            factory, k = d.prediction(params)
            drafter = "prediction"
        else:
            factory, k = batched_head(d.head, speculative=params.speculative, k=d.k,
                                      seeded=params.seeded)
            drafter = d.head if factory is not None else "none"
        if factory is not None:  # a slot verifies at most its chunk: the head's own k may not
            k = min(k, self.batch.chunk - 1)
        try:
            handle = self.batch.submit(BatchRequest(params, head=factory, k=k,
                                                    on_token=on_token, wrap=wrap,
                                                    cancelled=cancelled))
        except QueueFull as error:
            raise at_capacity(str(error)) from None
        except BatchRefused as error:
            raise RequestError("max_tokens", str(error), code="context_length_exceeded") \
                from None
        while not handle.done():
            if cancelled is not None and cancelled():
                handle.cancel()
            handle.wait(0.05)
        result = handle.result()
        if result.finish == "error":
            raise result.error
        return Decoded(result.base, result.stats, drafter, result.finish == "cancelled")

    def metrics(self) -> dict[str, float]:
        s, b = self.batch.stats, self.batch
        return {"tokens_total": s.tokens, "proposed_total": s.proposed,
                "accepted_total": s.accepted, "finished_total": s.finished,
                "cancelled_total": s.cancelled, "failed_total": s.errors,
                "refused_total": s.refused + self.refused,
                "passes_total": s.passes, "rows_total": s.rows,
                "pass_seconds_total": s.pass_seconds,
                "queue_depth": b.queue_depth(), "running": b.running(), "slots": b.slots}

    def kv_bound(self) -> int | None:
        """The most bytes the KV caches can take (every slot full)."""
        per = getattr(self.batch.rows, "kv_bytes_per_position", None)
        if per is None or self.batch.context is None:
            return None
        return self.batch.slots * self.batch.context * per()

    def shutdown(self, *, cancel: bool = True) -> None:
        """Refuse new requests and end the driver: what still runs is cancelled (its client
        gets what was committed, finish_reason "cancelled"), or with `cancel=False` finished
        first."""
        self.batch.close(cancel=cancel)
        self.batch.wait_idle()
        self._stop.set()
        self._driver.join(timeout=10)


def at_capacity(why: str) -> RequestError:
    """A 429 (OpenAI's clients retry it with backoff): every slot busy and the queue full."""
    return RequestError(None, f"the server is at capacity: {why}; retry later", status=429,
                        kind="rate_limit_exceeded", code="queue_full")
