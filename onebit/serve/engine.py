"""One request's decode: prompt in, a `Completion` out, through the speculative loop.

Two ways to share the model between requests:
- one at a time (`parallel=None`): `Engine.complete` takes a lock for the whole decode (a
  streamed one included), because the base keeps one KV cache and one committed position.
  Concurrent requests queue on the lock and each gets what it would alone.
- in parallel (`parallel=N`): a `BatchEngine` (onebit.batch) with N slots, stepped by a driver
  thread, advances every running request in one pass of the base; more wait in its bounded
  queue (a request past it gets a 429). Each request is still the ordinary loop, so it gets
  exactly what it would alone, tokens and log-probabilities, whoever else is served.

The text is `onebit.generate()`'s recipe (`prompt_text`, the streaming decoder, a stop at
EOS/EOT through the consumer's `on_token` returning False) with what a server adds: stop
strings (`StopText`), per-token log-probabilities (`ScoredBase`), the token ids, and a
cancel flag so a client that goes away ends the run at the next token.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from onebit.serve.errors import RequestError, context_exceeded
from onebit.serve.heads import DEFAULT_HEAD, batched_head, head_for
from onebit.serve.requests import CHAT, Request
from onebit.serve.scores import ScoredBase, TokenLogprob
from onebit.serve.stops import StopText
from onebit.serve.tools import chat_prompt
from onebit.text.errors import ChatTemplateError
from onebit.text.generate import context_length, prompt_text


@dataclass
class Completion:
    """What one request produced. `token_ids` are every token the model emitted for it, the
    one that completed a stop string or the EOS included; `text` ends before the stop string
    (and never holds the EOS's text); `logprobs` (None when not asked) list the tokens whose
    text the client gets: every token but the one that ended the answer at a stop (a stop id,
    whose text is never sent) and, where a stop string cut the text, the tokens wholly inside
    it: their tokens join to `text`, or run past it by the part of the last one that the
    stop string cut."""

    text: str
    token_ids: list[int]
    prompt_tokens: int
    finish_reason: str  # "stop" (EOS/EOT or a stop string) or "length"
    logprobs: list[TokenLogprob] | None = None
    stats: dict = field(default_factory=dict)


class Engine:
    """Serves `model` (an onebit text model: a base with `.tokenizer`) with draft head `head`.

    `run` is the loop (`onebit.run`); tests hand a copy with a planted fault. `scored`,
    `stop_text` and `processed` are the classes that record log-probabilities, cut at stop
    strings and apply the knobs."""

    scored = ScoredBase
    stop_text = StopText
    processed = None  # the knobs' base wrapper: onebit.processors.ProcessedBase when None

    def __init__(self, model, *, head: str = DEFAULT_HEAD, draft: str | None = None,
                 k: int | None = None, run: Callable | None = None,
                 name: str | None = None, parallel: int | None = None,
                 queue: int = 64, context: int | None = None) -> None:
        from onebit.loop import run as plain_run

        if getattr(model, "tokenizer", None) is None:
            raise ValueError("the model carries no tokenizer (model.tokenizer)")
        self.model = model
        self.head = head
        self.draft = draft
        self.k = k
        self.run = run if run is not None else plain_run
        self.name = name or str(getattr(model, "source", None) or "onebit")
        self.lock = threading.Lock()
        head_for(head, model, draft=draft, k=k)  # a head that cannot be built fails at start
        self.batch = None
        self.served = {"tokens": 0, "proposed": 0, "accepted": 0, "finished": 0,
                       "cancelled": 0, "failed": 0, "refused": 0}  # one-at-a-time counters
        if parallel is not None:
            from onebit.batch import BatchEngine

            batched_head(head, k=k)  # a head that cannot be batched fails at start
            if context is None:  # a slot holds what the model does, and no more
                context = context_length(model)
            self.batch = BatchEngine(model, slots=parallel, queue=queue, run=self.run,
                                     context=context)
            self._stop = threading.Event()
            self._driver = threading.Thread(target=self.batch.drive, args=(self._stop,),
                                            daemon=True, name="onebit-batch-driver")
            self._driver.start()

    def metrics(self) -> dict[str, float]:
        """What `/metrics` exports: counters since start, and the queue and slots now."""
        if self.batch is None:
            m = {f"{k}_total": float(v) for k, v in self.served.items()}
            busy = float(self.lock.locked())
            return {**m, "queue_depth": 0.0, "running": busy, "slots": 1.0}
        s = self.batch.stats
        return {"tokens_total": s.tokens, "proposed_total": s.proposed,
                "accepted_total": s.accepted, "finished_total": s.finished,
                "cancelled_total": s.cancelled, "failed_total": s.errors,
                "refused_total": s.refused + self.served["refused"],
                "passes_total": s.passes, "rows_total": s.rows,
                "pass_seconds_total": s.pass_seconds,
                "queue_depth": self.batch.queue_depth(), "running": self.batch.running(),
                "slots": self.batch.slots}

    def shutdown(self, *, cancel: bool = True) -> None:
        """Refuse new requests and end the driver: what still runs is cancelled (its client
        gets what was committed, finish_reason "cancelled"), or with `cancel=False` finished
        first."""
        if self.batch is None:
            return
        self.batch.close(cancel=cancel)
        self.batch.wait_idle()
        self._stop.set()
        self._driver.join(timeout=10)

    def kv_bound(self) -> int | None:
        """The most bytes the parallel engine's KV caches can take (every slot full)."""
        rows = getattr(self.batch, "rows", None)
        per = getattr(rows, "kv_bytes_per_position", None)
        if per is None or self.batch.context is None:
            return None
        return self.batch.slots * self.batch.context * per()

    def prompt_ids(self, request: Request) -> list[int]:
        tok = self.model.tokenizer
        where = "messages" if request.kind == CHAT else "prompt"
        try:
            prompt, tools = request.prompt, None
            if request.kind == CHAT:  # the tools, and calls in the history (serve.tools)
                prompt, tools = chat_prompt(tok, prompt, request.tools)
            text, from_template = prompt_text(tok, prompt, chat=request.kind == CHAT,
                                              system=None, tools=tools)
        except ChatTemplateError as error:
            raise RequestError(where, str(error)) from None
        ids = tok.encode(text, add_special_tokens=not from_template)
        if not ids:
            raise RequestError(where, f"the {where} encodes to no tokens")
        limit = context_length(self.model)
        if limit is not None and len(ids) >= limit:  # no room left for one token
            raise context_exceeded(where, limit, len(ids), where=where)
        return ids

    def budget(self, request: Request, prompt: int) -> int:
        """The tokens `request` may make after a `prompt` of that many: what it asked for, or
        with no max_tokens (chat) what the context leaves. A budget the client asked for past
        that room is refused naming its field, as vLLM refuses it, not cut short without a
        word; completions' default of 16 is cut to the room."""
        limit, slot = context_length(self.model), ""
        if self.batch is not None and self.batch.context is not None:
            # a slot's positions: the prompt, the answer and the widest verify past its end
            room = self.batch.context - self.batch.chunk
            if limit is None or room < limit:
                limit, slot = room, (f" here (a slot's {self.batch.context} positions less "
                                     f"{self.batch.chunk} for the drafts past the answer)")
        where = "messages" if request.kind == CHAT else "prompt"
        room = limit - prompt if limit is not None else None
        if room is not None and room < 1:
            raise context_exceeded(where, limit, prompt, where=where, slot=slot)
        if request.max_tokens is None:
            if room is None:
                raise RequestError("max_tokens", "the model states no context length: give "
                                   "max_tokens")
            return room
        if room is None:
            return request.max_tokens
        if request.max_tokens > room and request.max_tokens_param is not None:
            raise context_exceeded(request.max_tokens_param, limit, prompt,
                                   request.max_tokens, where=where, slot=slot)
        return min(request.max_tokens, room)

    def check(self, request: Request) -> tuple[list[int], int]:
        """The prompt's ids and the token budget; a `RequestError` for a prompt the model
        cannot take, or a knob naming a token outside its vocabulary. A streamed request is
        checked before its stream opens, so a bad prompt is still a 400."""
        vocab = self.model.vocab_size
        for i, token in enumerate(request.stop_token_ids):
            if token >= vocab:
                raise RequestError(f"stop_token_ids[{i}]", f"stop_token_ids[{i}] = {token} is "
                                   f"outside the vocabulary [0, {vocab})")
        if request.processors is not None:
            for token in request.processors.logit_bias:
                if token >= vocab:
                    raise RequestError(f"logit_bias[{token}]", f"logit_bias names token "
                                       f"{token}, outside the vocabulary [0, {vocab})")
        ids = self.prompt_ids(request)
        budget = self.budget(request, len(ids))
        if request.prediction is not None:  # a guess longer than the room is no guess
            predicted = len(self.predicted(request))
            limit = context_length(self.model)
            if limit is not None and predicted > limit - len(ids):
                raise RequestError("prediction", f"the prediction is {predicted} tokens; the "
                                   f"context leaves {limit - len(ids)} after the prompt's "
                                   f"{len(ids)}", code="context_length_exceeded")
        if self.batch is not None and self.batch.full():
            self.served["refused"] += 1
            raise _at_capacity(f"all {self.batch.slots} slots are taken and the queue is full")
        return ids, budget

    def complete(self, request: Request, *, on_text: Callable[[str], None] | None = None,
                 cancelled: Callable[[], bool] | None = None,
                 on_logprobs: Callable[[list[TokenLogprob]], None] | None = None,
                 ) -> Completion:
        """Decode `request`; `on_text(piece)` gets the answer's text as it becomes final
        (never a character in half, never a part of a stop string). With logprobs asked,
        `on_logprobs(entries)` gets, just before each piece, the entries of the tokens whose
        text begins in it (a stream sends each chunk's logprobs with its content; together
        they are the answer's `logprobs`). Raises `RequestError` for a prompt the model
        cannot take (a 429 when the parallel queue is full)."""
        ids, max_tokens = self.check(request)
        watch = (on_text, on_logprobs if request.logprobs is not None else None, cancelled)
        if self.batch is not None:
            return self._decode(request, ids, max_tokens, *watch)
        with self.lock:
            return self._decode(request, ids, max_tokens, *watch)

    def complete_n(self, request: Request) -> list[Completion]:
        """`request.n` independent answers (not streamed). Answer i of a seeded request draws
        from seed + i, so each is reproducible and none shares another's draws; in parallel
        they decode side by side."""
        if request.n == 1:
            return [self.complete(request)]
        from concurrent.futures import ThreadPoolExecutor
        from dataclasses import replace

        from onebit.sampling import answer_seeds

        self.check(request)
        answers = [replace(request, n=1, seed=seed)
                   for seed in answer_seeds(request.seed, request.n)]
        if self.batch is None:
            return [self.complete(a) for a in answers]
        with ThreadPoolExecutor(max_workers=request.n) as pool:
            return list(pool.map(self.complete, answers))

    def _decode(self, request, ids, max_tokens, on_text, on_logprobs, cancelled) -> Completion:
        tok = self.model.tokenizer
        stops = frozenset(tok.stop_ids) | frozenset(request.stop_token_ids)
        stream = tok.stream(skip_special_tokens=True)
        cut = self.stop_text(request.stop)
        # one at a time the loop asks here whether the client has gone; batched, the engine
        # asks (BatchRequest.cancelled) and counts the cancel as its own, not as a stop
        gone = cancelled if self.batch is None else None
        emitted: list[int] = []
        starts: list[int] = []  # where each token's text begins (a stop id has none)
        finish = ["length"]

        scored: list[ScoredBase] = []  # the base recording logprobs, once the loop has it
        entries: list[TokenLogprob] = []  # streamed logprobs: one per token with text
        sent = [0, 0]  # characters of text sent, entries sent

        def send(piece: str) -> None:
            if not piece or on_text is None:
                return
            sent[0] += len(piece)
            if on_logprobs is not None:  # the tokens whose text begins in what is now sent
                upto = sent[1]
                while upto < len(entries) and starts[upto] < sent[0]:
                    upto += 1
                on_logprobs(entries[sent[1]:upto])
                sent[1] = upto
            on_text(piece)

        def on_token(token: int):
            if not self.takes_more(finish[0]):
                return False
            emitted.append(token)
            if token in stops:
                finish[0] = "stop"
                return False
            starts.append(len(stream.text))
            if on_logprobs is not None:
                entries.append(scored[0].entry(len(ids) + len(emitted) - 1, token))
            send(cut.push(stream.push(token)))
            if cut.hit is not None:
                finish[0] = "stop"
                return False
            if gone is not None and gone():
                finish[0] = "cancelled"
                return False
            return None

        knobs = request.processors
        if knobs is not None:  # min_tokens holds back every token that would end the answer
            from dataclasses import replace

            knobs = replace(knobs, held=frozenset(knobs.held) | stops)

        def wrapped(base):
            """The base the loop runs: raw scores recorded for logprobs (as vLLM reports
            them), then the knobs, each row with its own prefix's state."""
            from onebit.processors import ProcessedBase

            if request.logprobs is not None:
                base = self.scored(base, start=len(ids), top=request.logprobs)
                scored.append(base)
            if knobs is not None:  # a grammar reads the model's tokenizer (a slot has none)
                base = (self.processed or ProcessedBase)(base, knobs, len(ids),
                                                         tokenizer=self.model.tokenizer)
            return base

        if self.batch is None:
            if self.drafts_prediction(request):
                factory, k = self.from_prediction(request, ids)
                head = factory(None)
            else:
                head, k = head_for(self.head, self.model, speculative=request.speculative,
                                   draft=self.draft, k=self.k, seeded=_seeded(request))
            base = wrapped(self.model)
            try:
                result = self.run(base, head, ids, max_tokens=max_tokens, k=k,
                                  on_token=on_token, sampling=request.sampling,
                                  seed=request.seed)
            except Exception:
                self.served["failed"] += 1
                raise
            s, used = result.stats, head is not None
            self.served["tokens"] += len(emitted)
            self.served["proposed"] += s.proposed
            self.served["accepted"] += s.accepted
            self.served["cancelled" if finish[0] == "cancelled" else "finished"] += 1
        else:
            base, s, used = self._batched(request, ids, max_tokens, on_token, cancelled,
                                          wrapped, finish)
        if cut.hit is None:
            send(cut.push(stream.flush()))
            send(cut.finish())
        drafter = "prediction" if self.drafts_prediction(request) else self.head
        stats = {"head": drafter if used else "none", "rounds": getattr(s, "rounds", 0),
                 "proposed": getattr(s, "proposed", 0), "accepted": getattr(s, "accepted", 0)}
        # a stop id is counted in the ids and the usage, but it has no text, and the tokens
        # of a stop string are not the client's: neither is listed
        listed = len(starts) if cut.hit is None else sum(at < len(cut.text) for at in starts)
        logprobs = list(base.logprobs)[:listed] if request.logprobs is not None else None
        return Completion(cut.text, emitted, len(ids), finish[0], logprobs, stats)

    def _batched(self, request, ids, max_tokens, on_token, cancelled, wrap, finish):
        """The request as one sequence of the batch engine: (its base, its stats, whether it
        drafted). Waits for its result, cancelling it when the client goes away (a waiting
        request leaves the queue at once)."""
        from onebit.batch import BatchRefused, BatchRequest, QueueFull

        if self.drafts_prediction(request):
            factory, k = self.from_prediction(request, ids)
        else:
            factory, k = batched_head(self.head, speculative=request.speculative, k=self.k,
                                      seeded=_seeded(request))
        try:
            handle = self.batch.submit(BatchRequest(
                prompt=ids, max_tokens=max_tokens, head=factory, k=k,
                sampling=request.sampling, seed=request.seed, on_token=on_token, wrap=wrap,
                cancelled=cancelled))
        except QueueFull as error:
            raise _at_capacity(str(error)) from None
        except BatchRefused as error:
            raise RequestError("max_tokens", str(error), code="context_length_exceeded") \
                from None
        while not handle.done():
            if cancelled is not None and cancelled():
                handle.cancel()
            handle._seq.done.wait(0.05)
        result = handle.result()
        if result.finish == "cancelled":
            finish[0] = "cancelled"
        if result.finish == "error":
            raise result.error
        return result.base, result.stats, factory is not None

    def predicted(self, request: Request) -> list[int]:
        """The prediction's tokens, as the tokenizer spells the text on its own."""
        return self.model.tokenizer.encode(request.prediction, add_special_tokens=False)

    @staticmethod
    def drafts_prediction(request: Request) -> bool:
        """Whether the request's own prediction drafts (in place of the server's head)."""
        return request.prediction is not None and request.speculative

    def from_prediction(self, request: Request, ids: list[int]):
        """(factory, k): the drafts are the prediction's (OpenAI's predicted outputs), in
        place of the server's head, as many a round as the model's own verify takes (a
        batched slot's is wider; a seeded answer's draws follow the draft lengths, and must
        not depend on how it was served)."""
        from onebit.heads.prediction import PREDICTION_K, PredictionHead

        predicted = self.predicted(request)
        k = min(self.k or PREDICTION_K, max(1, self.model.max_batch_rows() - 1))
        return (lambda clock: PredictionHead(predicted, len(ids), k=k)), k

    def takes_more(self, finish: str) -> bool:
        """Whether the consumer takes another token: not once the answer has ended (the loop
        stops at the consumer's False; this holds even if a loop did not)."""
        return finish == "length"


def _seeded(request: Request) -> bool:
    """A sampled request with a seed: it promises the same answer again (the head registry's
    rule for `auto` reads it)."""
    return request.sampling is not None and request.seed is not None


def _at_capacity(why: str) -> RequestError:
    """A 429 (OpenAI's clients retry it with backoff): every slot busy and the queue full."""
    return RequestError(None, f"the server is at capacity: {why}; retry later", status=429,
                        kind="rate_limit_exceeded", code="queue_full")
