"""Running one served scenario: the server, what each client received, and the references.

`execute(make_server, scenario)` builds the toy (`ServedToy`) and the server over it, works out
each ask's body (its stop strings and stop ids read off a probe answer, `scenarios`), and sends
it as a real client would, over HTTP: one after another, each asked whole and streamed (`n`
answers whole only, as OpenAI streams none of them), or all at once from threads, where a
leaving client closes its connection after a few events. Every answer is kept as it arrived
(the body, or every SSE event as sent, `[DONE]` included); the references
(`pytest_onebit.serve.reference`) are worked out on a model instance of their own.

`make_server(model, *, parallel, stream_interval, head)` returns a context manager that serves
`model` and has `.url`: onebit's own is `pytest_onebit.serve.runner.onebit_server`.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_onebit.serve import reference
from pytest_onebit.serve.scenarios import CHAT, Ask, ServedScenario
from pytest_onebit.serve.toy import ServedToy, load_toy_model

TIMEOUT = 60.0
#: a prompt longer than this many characters takes a prefill of several passes
LONG = 200


@dataclass
class Reply:
    """What one request got: the HTTP status and the JSON body (not streamed), or the SSE
    events (streamed: each `data:` payload as text, `[DONE]` included); `error` when the
    request failed below HTTP (refused, reset, timed out)."""

    status: int | None = None
    body: dict | None = None
    events: list[str] | None = None
    error: str | None = None
    left: bool = False  # the client went away after `Ask.leave_after` events
    seconds: float = 0.0


@dataclass
class AskTrace:
    index: int
    ask: Ask
    body: dict  # what was sent (without `stream`)
    expected: list[reference.Expected]  # one per answer (`n`)
    defined: reference.Expected | None  # greedy: the definitions' answer
    unpredicted: reference.Expected | None = None  # greedy with a prediction: the library's
    #                                               answer to the request without it
    whole: Reply | None = None
    streamed: Reply | None = None


@dataclass
class ServedTrace:
    scenario: ServedScenario
    asks: list[AskTrace] = field(default_factory=list)
    after: AskTrace | None = None  # concurrent: an ask sent once the crowd is done
    tokenizer: object = None
    metrics: dict[str, float] | None = None  # concurrent: the server's own counters once
    #                                          idle (Prometheus text at /metrics, if served)


def _url_of(url: str, ask: Ask) -> str:
    return url.rstrip("/") + ("/v1/chat/completions" if ask.endpoint == CHAT
                              else "/v1/completions")


def post(url: str, body: dict) -> Reply:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            reply = Reply(response.status, json.loads(response.read()))
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            reply = Reply(error.code, json.loads(raw))
        except ValueError:
            reply = Reply(error.code, {"raw": raw.decode("utf-8", "replace")[:300]})
    except (OSError, ValueError) as error:
        reply = Reply(error=f"{type(error).__name__}: {error}")
    reply.seconds = time.perf_counter() - started
    return reply


def stream(url: str, body: dict, *, leave_after: int | None = None) -> Reply:
    # every stream asks for its usage chunk: what it counts is part of the answer (V2)
    sent = {**body, "stream": True, "stream_options": {"include_usage": True}}
    request = urllib.request.Request(url, data=json.dumps(sent).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    events: list[str] = []
    reply = Reply(events=events)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            reply.status = response.status
            for raw in response:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line.startswith("data:"):
                    events.append(line[len("data:"):].strip())
                    if leave_after is not None and len(events) >= leave_after:
                        reply.left = True
                        break  # closing the response closes the connection
    except urllib.error.HTTPError as error:
        reply.status = error.code
        reply.body = {"raw": error.read().decode("utf-8", "replace")[:300]}
    except (OSError, ValueError) as error:
        reply.error = f"{type(error).__name__}: {error}"
    reply.seconds = time.perf_counter() - started
    return reply


def _stop_strings(ask: Ask, text: str) -> list[str]:
    """The stop strings `ask` names, read off the probe answer's text; a decoy is a stop that
    begins as the text does at its place but ends in a character that never follows there."""
    stops = []
    for start, length in ask.stops:
        piece = text[start:start + length]
        if len(piece) != length:
            raise ValueError(f"{ask.label}: the answer ({text!r}) is too short for a stop at "
                             f"{start}")
        stops.append(piece)
    for start, length in ask.decoys:
        end = start + length - 1
        head = text[start:end if end != 0 else None]
        for end in "~|^`":
            if head and head + end not in text:
                stops.append(head + end)
                break
        else:
            raise ValueError(f"{ask.label}: no decoy stop fits at {start} in {text!r}")
    if ask.repeat_stop:
        runs = [i for i in range(len(text) - ask.repeat_stop + 1)
                if len(set(text[i:i + ask.repeat_stop])) == 1]
        if not runs:
            raise ValueError(f"{ask.label}: no character repeats {ask.repeat_stop} times in "
                             f"{text!r}")
        stops.append(text[runs[0]:runs[0] + ask.repeat_stop])
    return stops


def _prediction(kind: str, answer: str) -> dict:
    """The `prediction` an ask sends, made of the answer without it."""
    if kind == "exact":
        return {"type": "content", "content": answer}
    if kind == "edited":  # a change in the middle, sent as text parts
        middle = len(answer) // 2
        return {"type": "content", "content": [
            {"type": "text", "text": answer[:middle]},
            {"type": "text", "text": "~~ an edit ~~" + answer[middle + 6:]}]}
    return {"type": "content", "content": "nothing like the answer " * 4}


def body_of(model, ask: Ask, head: str) -> dict:
    """The request's JSON body: the ask's fields, and its stops read off a probe answer (the
    same request without them)."""
    body = {"max_tokens": ask.max_tokens, **ask.extra}
    body["messages" if ask.endpoint == CHAT else "prompt"] = reference.messages_or_prompt(ask)
    if ask.n > 1:
        body["n"] = ask.n
    if not (ask.stopped or ask.predict):
        return body
    probe = reference.library_answer(model, ask, body, head=head)
    if ask.predict:
        body["prediction"] = _prediction(ask.predict, model.tokenizer.decode(
            probe.ids, skip_special_tokens=True))
    if ask.stops or ask.decoys or ask.repeat_stop:
        body["stop"] = _stop_strings(ask, model.tokenizer.decode(probe.ids,
                                                                 skip_special_tokens=True))
    if ask.stop_token_at is not None:
        if len(probe.ids) <= ask.stop_token_at:
            raise ValueError(f"{ask.label}: the answer ({len(probe.ids)} tokens) is too short "
                             f"for a stop token at {ask.stop_token_at}")
        body["stop_token_ids"] = [probe.ids[ask.stop_token_at]]
    return body


#: (ask, head) -> (body, expected answers, the definitions' answer): an ask's references
#: are the same in every scenario that sends it (one at a time, batched, in a crowd)
_REFERENCES: dict[tuple[Ask, str], tuple] = {}


def expect(model, index: int, ask: Ask, head: str) -> AskTrace:
    """The ask's body and its references. A client that leaves mid-answer is judged by what
    the others get, not by its own answer: its references are worked out only where its
    prompt is short (V7 checks that its answer alone outlasts its client)."""
    key = (ask, head)
    if key not in _REFERENCES:
        body = body_of(model, ask, head)
        seeds = [body.get("seed")] * ask.n
        if ask.n > 1:
            from onebit.sampling import answer_seeds

            seeds = answer_seeds(body.get("seed"), ask.n)
        one = {k: v for k, v in body.items() if k != "n"}
        leaver = ask.leave_after is not None
        expected = [] if leaver and len(ask.prompt) > LONG else [
            reference.library_answer(model, ask, {**one, "seed": seed}, head=head)
            for seed in seeds]
        defined = unpredicted = None
        if not ask.sampled and "response_format" not in body and not leaver:
            defined = reference.definition_answer(model, ask, body)
        if ask.predict and not ask.sampled:
            without = {k: v for k, v in body.items() if k != "prediction"}
            unpredicted = reference.library_answer(model, ask, without, head=head)
        _REFERENCES[key] = (body, expected, defined, unpredicted)
    body, expected, defined, unpredicted = _REFERENCES[key]
    return AskTrace(index, ask, dict(body), expected, defined, unpredicted)


def _serve_one(url: str, t: AskTrace, *, whole: bool, streamed: bool) -> None:
    target = _url_of(url, t.ask)
    if t.ask.delay:
        time.sleep(t.ask.delay)
    if whole:
        t.whole = post(target, t.body)
    if streamed and t.ask.n == 1:
        t.streamed = stream(target, t.body, leave_after=t.ask.leave_after)


def metrics(url: str) -> dict[str, float] | None:
    """The server's Prometheus samples without labels (name -> value), or None when it
    serves no /metrics."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=TIMEOUT) as reply:
            text = reply.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    samples = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            try:
                samples[name] = float(value)
            except ValueError:
                continue
    return samples


def _settled_metrics(url: str, requests: int, timeout: float = 20.0) -> dict[str, float] | None:
    """The counters once every one of `requests` is accounted for (finished, cancelled or
    failed: a leaver's decode ends when the server sees it gone, and one at a time it may
    still wait its turn when the others are done), or as they stand at the timeout."""
    deadline = time.monotonic() + timeout
    ended = ("onebit_finished_total", "onebit_cancelled_total", "onebit_failed_total")
    while True:
        samples = metrics(url)
        if samples is None or time.monotonic() > deadline or (
                sum(samples.get(name, 0) for name in ended) >= requests
                and samples.get("onebit_running", 0) == 0):
            return samples
        time.sleep(0.02)


def execute(make_server: Callable, scenario: ServedScenario) -> ServedTrace:
    """Serve the scenario's toy with `make_server` and record what every client got."""
    ref = load_toy_model()
    trace = ServedTrace(scenario, tokenizer=ref.tokenizer)
    trace.asks = [expect(ref, i, a, scenario.head) for i, a in enumerate(scenario.asks)]
    served = ServedToy(scenario.parallel or 1, pass_delay=scenario.pass_delay)
    with make_server(served, parallel=scenario.parallel, head=scenario.head,
                     stream_interval=scenario.stream_interval) as server:
        if not scenario.concurrent:
            for t in trace.asks:
                _serve_one(server.url, t, whole=True, streamed=True)
            return trace
        threads = []
        for i, t in enumerate(trace.asks):
            # alternate whole and streamed clients; a leaving client streams
            as_stream = t.ask.leave_after is not None or i % 2 == 1
            threads.append(threading.Thread(target=_serve_one, args=(server.url, t),
                                            kwargs={"whole": not as_stream,
                                                    "streamed": as_stream}))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT * 2)
        trace.metrics = _settled_metrics(server.url, len(trace.asks))
        # once the crowd is gone (the leavers' decodes included), one more ask alone
        last = next(a for a in scenario.asks if a.leave_after is None)
        trace.after = expect(ref, len(trace.asks), last, scenario.head)
        _serve_one(server.url, trace.after, whole=True, streamed=False)
    return trace
