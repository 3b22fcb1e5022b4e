"""The ASGI app: starlette routes over one `Engine`.

Decodes run in worker threads (the forward holds the CPU, not the event loop), so the server
keeps answering `/health` and `/metrics` during a long request; the engine serves the decodes
one at a time, or in parallel on its batch engine. A streamed answer is Server-Sent Events:
`data: {chunk}` lines, then `data: [DONE]`. Every error is OpenAI's error JSON: 400 naming the
field for a bad request (a body that is not JSON, nested past reason, or holds invalid
Unicode included), 401 without the API key when one is set (onebit.serve.auth), 413 for a
body past `MAX_BODY`, 429 when the parallel queue is full, 404 /
405 for a wrong route or method, 500 for a fault in the decode. `/metrics` is Prometheus text
(prometheus-client). On shutdown the engine cancels what still runs (after uvicorn has let the
open requests finish within its grace period) and stops its driver.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from onebit.serve import responses_api
from onebit.serve.auth import middleware
from onebit.serve.engine import Engine
from onebit.serve.errors import RequestError
from onebit.serve.requests import CHAT, COMPLETION, parse
from onebit.serve.responses import Answer
from onebit.serve.stream import STREAM_INTERVAL, PieceChannel


def error_response(status: int, message: str, *, kind: str = "invalid_request_error",
                   param: str | None = None, code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param,
                                   "code": code}}, status_code=status)


def _refused(error: RequestError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


def _event(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


#: the largest request body read (a chat of a full 8k context is well under 1 MB)
MAX_BODY = 8 << 20


def create_app(engine: Engine, *, stream_interval: float = STREAM_INTERVAL,
               api_key: str | None = None, cors_origins=()) -> Starlette:
    """The server's app over `engine` (one model; one request at a time, or in parallel). A
    streamed answer's pieces go out at most once per `stream_interval` seconds after the
    first (0: each as it comes). With `api_key`, the API answers only requests that carry
    `Authorization: Bearer api_key` (a 401 otherwise; /health and /metrics stay open);
    `cors_origins` (`*` for any) may call it from a browser (onebit.serve.auth)."""
    if stream_interval < 0:
        raise ValueError(f"stream_interval is {stream_interval}; it must be >= 0")
    tok = engine.model.tokenizer
    started = int(time.time())
    # A thread per request in flight: a parallel engine's requests wait in its queue, not in
    # the executor's (the default one has min(32, cores + 4) threads); its passes all run in
    # its driver thread. One at a time, every decode runs in one thread of its own: OpenMP
    # keeps a team of threads per thread that calls the compiled kernels, and once two teams
    # share two cores every pass waits on the other's spinning (measured: 67 tokens/s from
    # changing threads where one thread decodes at 200).
    if engine.threads() is not None:
        pool = ThreadPoolExecutor(max_workers=engine.threads() + 4,
                                  thread_name_prefix="onebit-request")
        decodes = pool
    else:
        pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="onebit-request")
        decodes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="onebit-decode")
    metrics = _metrics(engine)

    async def health(_request: HTTPRequest) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def models(_request: HTTPRequest) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": engine.name, "object": "model", "created": started, "owned_by": "onebit"}]})

    async def metrics_text(_request: HTTPRequest) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(metrics), media_type=CONTENT_TYPE_LATEST)

    async def body_of(request: HTTPRequest) -> object:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY:
            raise RequestError(None, f"the body is {declared} bytes; at most {MAX_BODY}",
                               status=413)
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY:
                raise RequestError(None, f"the body is over {MAX_BODY} bytes", status=413)
        try:
            return json.loads(bytes(raw))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise RequestError(None, f"the body is not valid JSON: {error}") from None
        except RecursionError:
            raise RequestError(None, "the body's JSON is nested too deeply") from None

    async def complete(request: HTTPRequest, kind: str):
        loop = asyncio.get_running_loop()
        try:
            wanted = parse(kind, await body_of(request))
            if not wanted.stream:
                completion = await loop.run_in_executor(decodes, engine.complete_n, wanted)
                return JSONResponse(Answer(wanted, engine.name).body(tok, completion))
            params = await loop.run_in_executor(pool, engine.prepare, wanted)
        except RequestError as error:
            return _refused(error)
        except Exception as error:  # a fault in the decode: say what, keep serving
            return error_response(500, f"{type(error).__name__}: {error}", kind="server_error")
        events = _stream(engine, wanted, params, loop, decodes, stream_interval)
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def completions(request: HTTPRequest):
        return await complete(request, COMPLETION)

    async def chat(request: HTTPRequest):
        return await complete(request, CHAT)

    stored = responses_api.ResponseStore()  # for previous_response_id and GET

    async def responses(request: HTTPRequest):
        """OpenAI's Responses API over the same chat decode (onebit.serve.responses_api)."""
        loop = asyncio.get_running_loop()
        try:
            wanted = responses_api.parse_response_request(await body_of(request), stored)
            if not wanted.request.stream:
                completion = await loop.run_in_executor(decodes, engine.complete,
                                                        wanted.request)
                return JSONResponse(responses_api.finished(engine, wanted, stored, completion))
            params = await loop.run_in_executor(pool, engine.prepare, wanted.request)
        except RequestError as error:
            return _refused(responses_api.renamed(error))
        except Exception as error:  # a fault in the decode: say what, keep serving
            return error_response(500, f"{type(error).__name__}: {error}", kind="server_error")
        events = responses_api.response_events(engine, wanted, params, stored, loop, decodes,
                                               stream_interval)
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def stored_response(request: HTTPRequest):
        try:
            return JSONResponse(responses_api.stored_response(
                stored, request.path_params["response_id"]))
        except RequestError as error:
            return _refused(error)

    async def http_error(_request: HTTPRequest, error: HTTPException) -> JSONResponse:
        return error_response(error.status_code, str(error.detail), code=str(error.status_code))

    @asynccontextmanager
    async def lifespan(_app):
        yield
        # uvicorn has stopped taking requests and let the open ones finish (its graceful
        # shutdown); what still runs is cancelled, and its client gets what was committed
        await asyncio.get_running_loop().run_in_executor(None, engine.shutdown)
        for executor in {pool, decodes}:
            executor.shutdown(wait=False, cancel_futures=True)

    routes = [Route("/health", health, methods=["GET"]),
              Route("/metrics", metrics_text, methods=["GET"]),
              Route("/v1/models", models, methods=["GET"]),
              Route("/v1/completions", completions, methods=["POST"]),
              Route("/v1/chat/completions", chat, methods=["POST"]),
              Route("/v1/responses", responses, methods=["POST"]),
              Route("/v1/responses/{response_id}", stored_response, methods=["GET"])]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error},
                     lifespan=lifespan, middleware=middleware(api_key, cors_origins))


def _metrics(engine: Engine):
    """A registry of its own whose one collector reads the engine's counters at each scrape
    (so two apps in one process never share a metric)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    described = {
        "tokens_total": "tokens emitted", "proposed_total": "draft tokens proposed",
        "accepted_total": "draft tokens accepted", "finished_total": "requests finished",
        "cancelled_total": "requests cancelled (client gone, or shutdown)",
        "failed_total": "requests that failed in the decode",
        "refused_total": "requests refused: every slot busy and the queue full",
        "passes_total": "passes of the base", "rows_total": "rows the passes ran",
        "pass_seconds_total": "seconds spent in passes of the base",
        "queue_depth": "requests waiting for a slot", "running": "sequences being decoded",
        "slots": "sequences decoded at once at most",
        "suffix_cache_answers": "answers in the suffix head's cache of recent answers",
        "suffix_cache_tokens": "tokens in the suffix head's cache of recent answers",
        "suffix_cache_nodes": "nodes of the suffix head's cache (its memory: about 75 bytes "
                              "each)",
    }
    window: list[tuple[float, float]] = []  # (time, tokens) at recent scrapes

    class Collector:
        def collect(self):
            values = engine.metrics()
            now = time.monotonic()
            window.append((now, values["tokens_total"]))
            while len(window) > 2 and now - window[1][0] >= 10.0:
                window.pop(0)
            (t0, n0), (t1, n1) = window[0], window[-1]
            rate = (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0
            for name, value in values.items():
                family = CounterMetricFamily if name.endswith("_total") else GaugeMetricFamily
                metric = name[:-6] if name.endswith("_total") else name
                yield family(f"onebit_{metric}", described[name], value=float(value))
            yield GaugeMetricFamily("onebit_tokens_per_second",
                                    "tokens emitted a second, between this scrape and one "
                                    "about 10 s before it", value=rate)

    registry = CollectorRegistry(auto_describe=True)
    registry.register(Collector())
    return registry


async def _stream(engine: Engine, wanted, params, loop: asyncio.AbstractEventLoop,
                  pool: ThreadPoolExecutor, interval: float):
    """The SSE events of one streamed answer. The decode runs in a thread and hands its text
    over through a `PieceChannel` (at most one event per `interval` seconds after the first),
    each piece with the logprob entries of the tokens whose text begins in it;
    when the client goes away the generator is closed, and the decode ends at its next token
    (`cancelled`)."""
    answer = Answer(wanted, engine.name)
    tok = engine.model.tokenizer
    channel = PieceChannel(loop, interval)
    gone = threading.Event()

    held: list = []  # a piece's logprob entries, handed over with the piece

    def work() -> None:
        def text(piece: str) -> None:
            channel.put(piece, held[:])
            held.clear()

        try:
            channel.end("done", engine.complete(wanted, on_text=text, on_logprobs=held.extend,
                                                cancelled=gone.is_set, params=params))
        except Exception as error:  # reported in the stream: the 200 is already sent
            channel.end("error", error)

    loop.run_in_executor(pool, work)
    try:
        first = answer.first_chunk()
        if first is not None:
            yield _event(first)
        end, streamed = None, 0  # logprob entries sent with their text
        while end is None:
            text, entries, end = await channel.get()
            chunk = answer.text_chunk(text, tok, entries) if text else None
            if chunk is not None:  # None: text held back (it may be a tool call)
                yield _event(chunk)
                streamed += len(entries)
        kind, value = end
        if kind == "done":
            for chunk in answer.last_chunks(tok, value, streamed):
                yield _event(chunk)
        else:
            body = (value.body() if isinstance(value, RequestError) else
                    {"error": {"message": f"{type(value).__name__}: {value}",
                               "type": "server_error", "param": None, "code": None}})
            yield _event(body)
        yield _event("[DONE]")
    finally:
        gone.set()  # a client gone mid-answer: the decode stops at its next token
