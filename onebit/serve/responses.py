"""The JSON bodies the server answers with, in OpenAI's shapes.

Each choice carries `token_ids` (an extension, as vLLM's `return_token_ids`): every token the
model emitted for the answer, the one that completed a stop string or the EOS included, so a
black-box harness can compare ids and not only text. A streamed answer sends its text in
pieces, each with the logprobs of the tokens whose text begins in it, and its `token_ids`
whole in the last chunk, the one with the `finish_reason`: the pieces are released as stop
strings allow, not token by token. The
`onebit` field says what speculation did (head, rounds, drafts proposed and accepted).

With tools (and a `tool_choice` other than "none") a chat answer's text is parsed into content
and calls (onebit.serve.tools.CallStream): the message carries `tool_calls` and
`finish_reason` is "tool_calls" when the answer made one and ended at its end of turn.
Streamed, the text that may still become a call is held back, and each call goes out whole,
once complete, as one `delta.tool_calls` entry (index, id, type, name and all its
arguments). The logprobs list every token of the answer, those of the calls' text included,
as for a text answer; streamed, each chunk carries those of the text handed over with it,
held back or not.
"""

from __future__ import annotations

import time
import uuid

from onebit.serve.engine import Completion
from onebit.serve.requests import CHAT, Request
from onebit.serve.tools import parse_answer


def _token_text(tok, token: int) -> str:
    return tok.decode([token])


def _completion_logprobs(tok, entries, offsets: list[int]) -> dict:
    return {"tokens": [_token_text(tok, e.token) for e in entries],
            "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [{_token_text(tok, t): lp for t, lp in e.top} for e in entries],
            "text_offset": offsets}


def _chat_logprobs(tok, entries) -> dict:
    def one(token: int, logprob: float) -> dict:
        return {"token": _token_text(tok, token), "logprob": logprob,
                "bytes": list(tok.token_bytes(token))}

    return {"content": [{**one(e.token, e.logprob),
                         "top_logprobs": [one(t, lp) for t, lp in e.top]} for e in entries]}


class _Offsets:
    """Where each listed token's text begins in the answer (completions' `text_offset`),
    across the chunks of a stream or over a whole answer."""

    def __init__(self, tok) -> None:
        self._stream = tok.stream()

    def of(self, entries, limit: int | None = None) -> list[int]:
        offsets = []
        for entry in entries:
            at = len(self._stream.text)
            offsets.append(at if limit is None else min(at, limit))
            self._stream.push(entry.token)
        return offsets


def logprobs_of(tok, request: Request, completion: Completion, start: int = 0) -> dict | None:
    """The answer's logprobs in the endpoint's shape, from entry `start` on (a stream has
    sent the ones before with their text)."""
    if completion.logprobs is None:
        return None
    if request.kind == CHAT:
        return _chat_logprobs(tok, completion.logprobs[start:])
    offsets = _Offsets(tok).of(completion.logprobs, len(completion.text))
    return _completion_logprobs(tok, completion.logprobs[start:], offsets[start:])


def usage(completion: Completion | list[Completion], predicted: bool = False) -> dict:
    """OpenAI's usage of one answer or of n (the prompt counted once); with a prediction,
    `completion_tokens_details` says how many of its tokens the answer took
    (`accepted_prediction_tokens`: drafted from it and accepted) and how many it did not
    (`rejected_prediction_tokens`: drafted and rejected), as OpenAI reports them."""
    completions = completion if isinstance(completion, list) else [completion]
    made = sum(len(c.token_ids) for c in completions)
    prompt = completions[0].prompt_tokens
    used = {"prompt_tokens": prompt, "completion_tokens": made, "total_tokens": prompt + made}
    if predicted:
        accepted = sum(c.stats.get("accepted", 0) for c in completions)
        proposed = sum(c.stats.get("proposed", 0) for c in completions)
        used["completion_tokens_details"] = {"accepted_prediction_tokens": accepted,
                                             "rejected_prediction_tokens": proposed - accepted}
    return used


class Answer:
    """The id, clock and model name one request's body and chunks share."""

    def __init__(self, request: Request, model: str) -> None:
        self.request = request
        self.model = model
        chat = request.kind == CHAT
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.object = "chat.completion" if chat else "text_completion"
        self._offsets = None  # a stream's completions text_offset, across its chunks
        tools = request.tools
        self._calls = tools.stream() if tools is not None and tools.parses else None
        self._called = 0  # calls streamed so far

    def _envelope(self, obj: str, choices: list) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "choices": choices}

    def body(self, tok, completion: Completion | list[Completion]) -> dict:
        """The whole answer, not streamed: one choice per completion (`n`), the usage of
        all of them (the prompt counted once, as OpenAI does)."""
        completions = completion if isinstance(completion, list) else [completion]
        choices = []
        for index, c in enumerate(completions):
            choice = {"index": index, "finish_reason": c.finish_reason,
                      "logprobs": logprobs_of(tok, self.request, c), "token_ids": c.token_ids}
            if self.request.kind == CHAT:
                choice["message"] = {"role": "assistant", "content": c.text}
                if self._calls is not None:
                    content, calls = parse_answer(self.request.tools, c.text)
                    choice["message"]["content"] = content
                    if calls:
                        choice["message"]["tool_calls"] = calls
                        choice["finish_reason"] = _finish(c, calls)
            else:
                choice["text"] = c.text
            choices.append(choice)
        used = usage(completions, self.request.prediction is not None)
        stats = completions[0].stats if len(completions) == 1 else \
            [c.stats for c in completions]
        return {**self._envelope(self.object, choices), "usage": used, "onebit": stats}

    def _chunk_object(self) -> str:
        return "chat.completion.chunk" if self.request.kind == CHAT else "text_completion"

    def _piece(self, text: str, **extra) -> dict:
        if self.request.kind == CHAT:
            choice = {"index": 0, "delta": {"content": text} if text else {}, **extra}
        else:
            choice = {"index": 0, "text": text, **extra}
        return self._envelope(self._chunk_object(), [choice])

    def first_chunk(self) -> dict | None:
        """Chat streams open with the assistant's role, as OpenAI's do."""
        if self.request.kind != CHAT:
            return None
        return self._envelope(self._chunk_object(), [{
            "index": 0, "delta": {"role": "assistant", "content": ""},
            "finish_reason": None, "logprobs": None}])

    def text_chunk(self, text: str, tok=None, entries=()) -> dict | None:
        """A piece of the text, with the logprobs of the tokens whose text begins in it (as
        OpenAI streams them) when logprobs were asked. With calls parsed, the content and
        calls the piece settles (None when it settles nothing and carries no logprobs)."""
        calls = []
        if self._calls is not None:
            text, calls = self._calls.push(text)
            if not text and not calls and not entries:
                return None
        logprobs = None
        if self.request.logprobs is not None:
            if self.request.kind == CHAT:
                logprobs = _chat_logprobs(tok, entries)
            else:
                if self._offsets is None:
                    self._offsets = _Offsets(tok)
                logprobs = _completion_logprobs(tok, entries, self._offsets.of(entries))
        return self._with_calls(text, calls, logprobs)

    def _with_calls(self, text: str, calls: list[dict], logprobs=None) -> dict:
        """A chunk of `text` and `calls`, each call whole in OpenAI's delta form (index, id,
        type, name and all its arguments), numbered across the stream."""
        chunk = self._piece(text, finish_reason=None, logprobs=logprobs)
        if calls:
            chunk["choices"][0]["delta"]["tool_calls"] = [
                {"index": self._called + i, **call} for i, call in enumerate(calls)]
            self._called += len(calls)
        return chunk

    def last_chunks(self, tok, completion: Completion, streamed: int = 0) -> list[dict]:
        """The chunk with the finish reason, the ids and the logprobs not yet sent with their
        text (`streamed` were); then the usage chunk when `stream_options.include_usage` asked
        for it. With calls parsed, what was held back goes first: an unfinished block as
        content, the calls the answer's end completes."""
        chunks, finish = [], completion.finish_reason
        if self._calls is not None:
            text, calls = self._calls.finish()
            if text or calls:
                chunks.append(self._with_calls(text, calls))
            if self._called:
                finish = _finish(completion, self._calls.calls)
        chunks += [{**self._piece("", finish_reason=finish,
                                 logprobs=logprobs_of(tok, self.request, completion, streamed),
                                 token_ids=completion.token_ids), "onebit": completion.stats}]
        if self.request.include_usage:
            chunks.append({**self._envelope(self._chunk_object(), []),
                           "usage": usage(completion, self.request.prediction is not None)})
        return chunks


def _finish(completion: Completion, calls: list[dict]) -> str:
    """"tool_calls" for an answer that made calls and ended at its end of turn (or a stop);
    its own finish reason otherwise (a budget that ran out is "length")."""
    return "tool_calls" if calls and completion.finish_reason == "stop" else \
        completion.finish_reason
