"""One request's decode: prompt in, a `Completion` out, through the speculative loop.

`Engine.prepare` turns a parsed request into an `onebit.params.DecodeParams` once (the
prompt's ids, the budget, the ids that end it, the knobs, the prediction's ids), refusing what
the model cannot take; `Engine.complete` decodes it on one of two decoders
(onebit.serve.decoders): one request at a time under a lock (`parallel=None`), or as a
sequence of a batch engine with N slots (`parallel=N`; a request past its queue gets a 429).
Either way each request is the ordinary loop and gets exactly what it would alone.

The text is `onebit.generate()`'s recipe (`prompt_text`, the streaming decoder, a stop at
EOS/EOT through the consumer's `on_token` returning False) with what a server adds: stop
strings (`StopText`), per-token log-probabilities (`ScoredBase`), the token ids, and a
cancel flag so a client that goes away ends the run at the next token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from onebit.heads import registry
from onebit.params import DecodeParams, stop_ids_of
from onebit.serve.decoders import Batched, OneAtATime, at_capacity
from onebit.serve.errors import RequestError, context_exceeded
from onebit.serve.heads import DEFAULT_HEAD, head_for
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
        self.run = run if run is not None else plain_run
        self.name = name or str(getattr(model, "source", None) or "onebit")
        head_for(head, model, draft=draft, k=k)  # a head that cannot be built fails at start
        if parallel is None:
            self.decoder = OneAtATime(model, head=head, draft=draft, k=k, run=self.run)
        else:
            self.decoder = Batched(model, head=head, draft=draft, k=k, run=self.run,
                                   slots=parallel, queue=queue, context=context)

    @property
    def batch(self):
        """The batch engine when served in parallel, else None."""
        return getattr(self.decoder, "batch", None)

    def threads(self) -> int | None:
        """How many requests may decode at once (None: one at a time)."""
        return self.decoder.threads()

    def metrics(self) -> dict[str, float]:
        """What `/metrics` exports: counters since start, and the queue and slots now (and
        under the suffix head, its cache of recent answers)."""
        values = self.decoder.metrics()
        if self.head == "suffix":
            size = registry.suffix_cache().size()
            values.update({f"suffix_cache_{k}": float(v) for k, v in size.items()})
        return values

    def shutdown(self, *, cancel: bool = True) -> None:
        """Refuse new requests and end the decoder's work (onebit.serve.decoders)."""
        self.decoder.shutdown(cancel=cancel)

    def kv_bound(self) -> int | None:
        """The most bytes the parallel engine's KV caches can take (every slot full)."""
        return self.decoder.kv_bound()

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
        room, why = self.decoder.room()  # a batch slot's positions, where they are fewer
        if room is not None and (limit is None or room < limit):
            limit, slot = room, why
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

    def prepare(self, request: Request) -> DecodeParams:
        """The request as the loop takes it, prepared once: the prompt's ids, the budget,
        the ids that end it, the knobs, the prediction's ids. A `RequestError` for a prompt
        the model cannot take, a knob naming a token outside its vocabulary, or (a 429) a
        full queue. A streamed request is prepared before its stream opens, so a bad prompt
        is still a 400."""
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
        predicted = None
        if request.prediction is not None:  # a guess longer than the room is no guess
            predicted = self.predicted(request)
            limit = context_length(self.model)
            if limit is not None and len(predicted) > limit - len(ids):
                raise RequestError("prediction", f"the prediction is {len(predicted)} tokens; "
                                   f"the context leaves {limit - len(ids)} after the prompt's "
                                   f"{len(ids)}", code="context_length_exceeded")
        if self.decoder.full():
            self.decoder.refuse()
            raise at_capacity(f"all {self.batch.slots} slots are taken and the queue is full")
        return DecodeParams(ids, budget, sampling=request.sampling, seed=request.seed,
                            stop_ids=stop_ids_of(self.model.tokenizer, request.stop_token_ids),
                            processors=request.processors, stop=request.stop,
                            logprobs=request.logprobs, prediction=predicted,
                            speculative=request.speculative)

    check = prepare  # the name app.py and older callers validate with

    def complete(self, request: Request, *, on_text: Callable[[str], None] | None = None,
                 cancelled: Callable[[], bool] | None = None,
                 on_logprobs: Callable[[list[TokenLogprob]], None] | None = None,
                 params: DecodeParams | None = None) -> Completion:
        """Decode `request` (prepared as `params`, or now); `on_text(piece)` gets the answer's
        text as it becomes final (never a character in half, never a part of a stop string).
        With logprobs asked, `on_logprobs(entries)` gets, just before each piece, the entries
        of the tokens whose text begins in it (a stream sends each chunk's logprobs with its
        content; together they are the answer's `logprobs`). Raises `RequestError` for a
        prompt the model cannot take (a 429 when the parallel queue is full)."""
        if params is None:
            params = self.prepare(request)
        return self._answer(params, on_text,
                            on_logprobs if params.logprobs is not None else None, cancelled)

    def complete_n(self, request: Request) -> list[Completion]:
        """`request.n` independent answers (not streamed). Answer i of a seeded request draws
        from seed + i, so each is reproducible and none shares another's draws; in parallel
        they decode side by side."""
        params = self.prepare(request)
        if request.n == 1:
            return [self.complete(request, params=params)]
        from concurrent.futures import ThreadPoolExecutor

        from onebit.sampling import answer_seeds

        answers = [params.with_seed(seed) for seed in answer_seeds(request.seed, request.n)]
        if not self.decoder.parallel:
            return [self._answer(a, None, None, None) for a in answers]
        with ThreadPoolExecutor(max_workers=request.n) as pool:
            return list(pool.map(lambda a: self._answer(a, None, None, None), answers))

    def _answer(self, params: DecodeParams, on_text, on_logprobs, cancelled) -> Completion:
        """The text around the loop, the same for both decoders: the streaming decoder, stop
        ids and stop strings, logprobs joined to the text, the pieces as they become final."""
        tok = self.model.tokenizer
        ids, stops = params.prompt, params.stop_ids
        stream = tok.stream(skip_special_tokens=True)
        cut = self.stop_text(params.stop)
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
            return None

        def wrapped(base):
            """The base the loop runs: raw scores recorded for logprobs (as vLLM reports
            them), then the knobs, each row with its own prefix's state."""
            from onebit.processors import ProcessedBase

            if params.logprobs is not None:
                base = self.scored(base, start=len(ids), top=params.logprobs)
                scored.append(base)
            if params.processors is not None:  # a grammar reads the model's tokenizer
                base = (self.processed or ProcessedBase)(base, params.processors, len(ids),
                                                         tokenizer=self.model.tokenizer)
            return base

        done = self.decoder.decode(params, on_token, wrapped, cancelled)
        if done.cancelled:
            finish[0] = "cancelled"
        else:  # what the head keeps of a whole answer for the next (suffix decoding's cache)
            registry.learn(self.head, emitted)
        if cut.hit is None:
            send(cut.push(stream.flush()))
            send(cut.finish())
        s = done.stats
        stats = {"head": done.drafter, "rounds": getattr(s, "rounds", 0),
                 "proposed": getattr(s, "proposed", 0), "accepted": getattr(s, "accepted", 0)}
        # a stop id is counted in the ids and the usage, but it has no text, and the tokens
        # of a stop string are not the client's: neither is listed
        listed = len(starts) if cut.hit is None else sum(at < len(cut.text) for at in starts)
        logprobs = list(done.base.logprobs)[:listed] if params.logprobs is not None else None
        return Completion(cut.text, emitted, len(ids), finish[0], logprobs, stats)

    def predicted(self, request: Request) -> list[int]:
        """The prediction's tokens, as the tokenizer spells the text on its own."""
        return self.model.tokenizer.encode(request.prediction, add_special_tokens=False)

    def takes_more(self, finish: str) -> bool:
        """Whether the consumer takes another token: not once the answer has ended (the loop
        stops at the consumer's False; this holds even if a loop did not)."""
        return finish == "length"
