"""One request's decode: prompt in, a `Completion` out, through the speculative loop.

The server holds one model and serves one request at a time: `Engine.complete` takes a lock
for the whole decode (a streamed one included), because the base keeps one KV cache and one
committed position. Concurrent requests queue on the lock and each gets what it would alone.

The text is `onebit.generate()`'s recipe (`prompt_text`, the streaming decoder, a stop at
EOS/EOT through the consumer's `on_token` returning False) with what a server adds: stop
strings (`StopText`), per-token log-probabilities (`ScoredBase`), the token ids, and a
cancel flag so a client that goes away ends the run at the next token.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from onebit.serve.errors import RequestError
from onebit.serve.heads import DEFAULT_HEAD, head_for
from onebit.serve.requests import CHAT, Request
from onebit.serve.scores import ScoredBase, TokenLogprob
from onebit.serve.stops import StopText
from onebit.text.errors import ChatTemplateError
from onebit.text.generate import context_length, prompt_text


@dataclass
class Completion:
    """What one request produced. `token_ids` are every token the model emitted for it, the
    one that completed a stop string or the EOS included; `text` ends before the stop string
    (and never holds the EOS's text); `logprobs` line up with `token_ids` (None when not
    asked)."""

    text: str
    token_ids: list[int]
    prompt_tokens: int
    finish_reason: str  # "stop" (EOS/EOT or a stop string) or "length"
    logprobs: list[TokenLogprob] | None = None
    stats: dict = field(default_factory=dict)


class Engine:
    """Serves `model` (an onebit text model: a base with `.tokenizer`) with draft head `head`.

    `run` is the loop (`onebit.run`); tests hand a copy with a planted fault. `scored` and
    `stop_text` are the classes that record log-probabilities and cut at stop strings."""

    scored = ScoredBase
    stop_text = StopText

    def __init__(self, model, *, head: str = DEFAULT_HEAD, draft: str | None = None,
                 k: int | None = None, run: Callable | None = None,
                 name: str | None = None) -> None:
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

    def prompt_ids(self, request: Request) -> list[int]:
        tok = self.model.tokenizer
        where = "messages" if request.kind == CHAT else "prompt"
        try:
            text, from_template = prompt_text(tok, request.prompt,
                                              chat=request.kind == CHAT,
                                              system=None)
        except ChatTemplateError as error:
            raise RequestError(where, str(error)) from None
        ids = tok.encode(text, add_special_tokens=not from_template)
        if not ids:
            raise RequestError(where, f"the {where} encodes to no tokens")
        limit = context_length(self.model)
        if limit is not None and len(ids) >= limit:
            raise RequestError(where, f"the {where} is {len(ids)} tokens; the model's context "
                               f"is {limit}, which leaves no room to generate",
                               code="context_length_exceeded")
        return ids

    def budget(self, request: Request, prompt: int) -> int:
        limit = context_length(self.model)
        room = limit - prompt if limit is not None else None
        if request.max_tokens is None:
            if room is None:
                raise RequestError("max_tokens", "the model states no context length: give "
                                   "max_tokens")
            return room
        return request.max_tokens if room is None else min(request.max_tokens, room)

    def check(self, request: Request) -> tuple[list[int], int]:
        """The prompt's ids and the token budget; a `RequestError` for a prompt the model
        cannot take. A streamed request is checked before its stream opens, so a bad prompt
        is still a 400."""
        ids = self.prompt_ids(request)
        return ids, self.budget(request, len(ids))

    def complete(self, request: Request, *, on_text: Callable[[str], None] | None = None,
                 cancelled: Callable[[], bool] | None = None) -> Completion:
        """Decode `request`; `on_text(piece)` gets the answer's text as it becomes final
        (never a character in half, never a part of a stop string). Raises `RequestError`
        for a prompt the model cannot take."""
        ids, max_tokens = self.check(request)
        with self.lock:
            return self._decode(request, ids, max_tokens, on_text, cancelled)

    def _decode(self, request, ids, max_tokens, on_text, cancelled) -> Completion:
        tok = self.model.tokenizer
        head, k = head_for(self.head, self.model, speculative=request.speculative,
                           draft=self.draft, k=self.k)
        base = self.model
        if request.logprobs is not None:
            base = self.scored(self.model, start=len(ids), top=request.logprobs)
        stops, stream = tok.stop_ids, tok.stream(skip_special_tokens=True)
        cut = self.stop_text(request.stop)
        emitted: list[int] = []
        finish = ["length"]

        def send(piece: str) -> None:
            if piece and on_text is not None:
                on_text(piece)

        def on_token(token: int):
            if not self.takes_more(finish[0]):
                return False
            emitted.append(token)
            if token in stops:
                finish[0] = "stop"
                return False
            send(cut.push(stream.push(token)))
            if cut.hit is not None:
                finish[0] = "stop"
                return False
            if cancelled is not None and cancelled():
                finish[0] = "cancelled"
                return False
            return None

        result = self.run(base, head, ids, max_tokens=max_tokens, k=k, on_token=on_token,
                          sampling=request.sampling, seed=request.seed)
        if cut.hit is None:
            send(cut.push(stream.flush()))
            send(cut.finish())
        s = result.stats
        stats = {"head": self.head if head is not None else "none", "rounds": s.rounds,
                 "proposed": s.proposed, "accepted": s.accepted}
        logprobs = list(base.logprobs)[:len(emitted)] if request.logprobs is not None else None
        return Completion(cut.text, emitted, len(ids), finish[0], logprobs, stats)

    def takes_more(self, finish: str) -> bool:
        """Whether the consumer takes another token: not once the answer has ended (the loop
        stops at the consumer's False; this holds even if a loop did not)."""
        return finish == "length"
