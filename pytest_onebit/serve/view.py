"""What a client reads out of an answer, whole or streamed, in one shape for the checks.

A whole answer's choices and a stream's events both become `Answer`s: the text as the client
joins it, the token ids (onebit's `token_ids`, as vLLM's `return_token_ids`), the finish
reason, the usage, and the logprob entries in OpenAI's two forms (chat's `content` list with
bytes, completions' parallel lists), each as (text, logprob, top alternatives). Reading never
raises on a malformed answer: what is missing or malformed is an `AssertionError` saying so,
which the contract reports against the check that read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pytest_onebit.serve.trace import Reply


@dataclass
class Entry:
    text: str  # the token's text as listed (chat: its bytes decoded)
    logprob: float
    top: list[tuple[str, float]]


@dataclass
class Answer:
    text: str
    ids: list[int] | None
    finish: str | None
    logprobs: list[Entry] | None
    usage: dict | None = None
    index: int = 0
    # streamed: each chunk's (text, logprob entries), as they came
    chunked: list[tuple[str, list[Entry]]] = field(default_factory=list)


def _entries(logprobs: dict | None) -> list[Entry] | None:
    if logprobs is None:
        return None
    if "content" in logprobs:  # chat
        out = []
        for e in logprobs["content"] or []:
            raw = bytes(e["bytes"]) if e.get("bytes") is not None else e["token"].encode()
            out.append(Entry(raw.decode("utf-8", "replace"), float(e["logprob"]),
                             [(a["token"], float(a["logprob"])) for a in e["top_logprobs"]]))
        return out
    tops = logprobs.get("top_logprobs") or [None] * len(logprobs["tokens"])
    return [Entry(t, float(lp), list((top or {}).items()))
            for t, lp, top in zip(logprobs["tokens"], logprobs["token_logprobs"], tops,
                                  strict=True)]


def _choice_text(choice: dict) -> str:
    if "text" in choice:
        return choice["text"] or ""
    holder = choice.get("message") or choice.get("delta") or {}
    return holder.get("content") or ""


def whole(reply: Reply) -> tuple[list[Answer], dict | None]:
    """The choices of a whole answer and its usage."""
    if reply.error is not None:
        raise AssertionError(f"the request failed: {reply.error}")
    if reply.status != 200:
        raise AssertionError(f"HTTP {reply.status}: {json.dumps(reply.body)[:300]}")
    body = reply.body
    answers = [Answer(_choice_text(c), c.get("token_ids"), c.get("finish_reason"),
                      _entries(c.get("logprobs")), index=c.get("index"))
               for c in body.get("choices") or []]
    return answers, body.get("usage")


@dataclass
class Stream:
    answer: Answer
    chunks: list[dict]
    done_last: bool  # `[DONE]` came, once, and last
    role_first: bool  # chat: the first chunk names the assistant's role
    after_finish: list[str]  # text sent in chunks after the one with the finish reason
    usage_chunks: list[dict]


def streamed(reply: Reply) -> Stream:
    """A stream's events read as a client reads them."""
    if reply.error is not None:
        raise AssertionError(f"the stream failed: {reply.error}")
    if reply.status != 200:
        raise AssertionError(f"HTTP {reply.status} for a stream: {reply.body}")
    events = list(reply.events or [])
    done_last = bool(events) and events[-1] == "[DONE]" and events.count("[DONE]") == 1
    chunks = []
    for data in events:
        if data == "[DONE]":
            continue
        chunk = json.loads(data)
        if "error" in chunk:
            raise AssertionError(f"the stream carried an error: {chunk['error']}")
        chunks.append(chunk)
    pieces, ids, finish, entries, after, chunked = [], None, None, None, [], []
    usage_chunks = [c for c in chunks if c.get("usage")]
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            text = _choice_text(choice)
            if finish is not None and text:
                after.append(text)
            if text:
                pieces.append(text)
            got = []
            if choice.get("logprobs") is not None:
                got = _entries(choice["logprobs"]) or []
                entries = (entries or []) + got
            chunked.append((text, got))
            if choice.get("finish_reason") is not None:
                if finish is not None:
                    raise AssertionError("two chunks carry a finish_reason")
                finish = choice["finish_reason"]
                ids = choice.get("token_ids")
    first = chunks[0]["choices"][0] if chunks and chunks[0].get("choices") else {}
    role_first = (first.get("delta") or {}).get("role") == "assistant"
    answer = Answer("".join(pieces), ids, finish, entries,
                    usage_chunks[-1]["usage"] if usage_chunks else None, chunked=chunked)
    return Stream(answer, chunks, done_last, role_first, after, usage_chunks)
