"""The ASGI app: starlette routes over one `Engine`.

Decodes run in a worker thread (the numpy forward holds the CPU, not the event loop), so the
server keeps answering `/health` during a long request; the engine's lock serves the decodes
one at a time. A streamed answer is Server-Sent Events: `data: {chunk}` lines, then
`data: [DONE]`. Every error is OpenAI's error JSON: 400 naming the field for a bad request,
404 / 405 for a wrong route or method, 500 for a fault in the decode.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from onebit.serve.engine import Engine
from onebit.serve.errors import RequestError
from onebit.serve.requests import CHAT, COMPLETION, parse
from onebit.serve.responses import Answer


def error_response(status: int, message: str, *, kind: str = "invalid_request_error",
                   param: str | None = None, code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param,
                                   "code": code}}, status_code=status)


def _refused(error: RequestError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


def _event(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


def create_app(engine: Engine) -> Starlette:
    """The server's app over `engine` (one model, one request at a time)."""
    tok = engine.model.tokenizer
    started = int(time.time())

    async def health(_request: HTTPRequest) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def models(_request: HTTPRequest) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": engine.name, "object": "model", "created": started, "owned_by": "onebit"}]})

    async def body_of(request: HTTPRequest) -> object:
        try:
            return json.loads(await request.body())
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise RequestError(None, f"the body is not valid JSON: {error}") from None

    async def complete(request: HTTPRequest, kind: str):
        loop = asyncio.get_running_loop()
        try:
            wanted = parse(kind, await body_of(request))
            if not wanted.stream:
                completion = await loop.run_in_executor(None, engine.complete, wanted)
                return JSONResponse(Answer(wanted, engine.name).body(tok, completion))
            await loop.run_in_executor(None, engine.check, wanted)
        except RequestError as error:
            return _refused(error)
        except Exception as error:  # a fault in the decode: say what, keep serving
            return error_response(500, f"{type(error).__name__}: {error}", kind="server_error")
        return StreamingResponse(_stream(engine, wanted, loop), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def completions(request: HTTPRequest):
        return await complete(request, COMPLETION)

    async def chat(request: HTTPRequest):
        return await complete(request, CHAT)

    async def http_error(_request: HTTPRequest, error: HTTPException) -> JSONResponse:
        return error_response(error.status_code, str(error.detail), code=str(error.status_code))

    routes = [Route("/health", health, methods=["GET"]),
              Route("/v1/models", models, methods=["GET"]),
              Route("/v1/completions", completions, methods=["POST"]),
              Route("/v1/chat/completions", chat, methods=["POST"])]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error})


async def _stream(engine: Engine, wanted, loop: asyncio.AbstractEventLoop):
    """The SSE events of one streamed answer. The decode runs in a thread and hands its text
    over through a queue; when the client goes away the generator is closed, and the decode
    ends at its next token (`cancelled`)."""
    answer = Answer(wanted, engine.name)
    tok = engine.model.tokenizer
    queue: asyncio.Queue = asyncio.Queue()
    gone = threading.Event()

    def put(item) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def work() -> None:
        try:
            put(("done", engine.complete(wanted, on_text=lambda piece: put(("text", piece)),
                                         cancelled=gone.is_set)))
        except Exception as error:  # reported in the stream: the 200 is already sent
            put(("error", error))

    loop.run_in_executor(None, work)
    try:
        first = answer.first_chunk()
        if first is not None:
            yield _event(first)
        while True:
            kind, value = await queue.get()
            if kind == "text":
                yield _event(answer.text_chunk(value))
                continue
            if kind == "done":
                for chunk in answer.last_chunks(tok, value):
                    yield _event(chunk)
            else:
                body = (value.body() if isinstance(value, RequestError) else
                        {"error": {"message": f"{type(value).__name__}: {value}",
                                   "type": "server_error", "param": None, "code": None}})
                yield _event(body)
            yield _event("[DONE]")
            break
    finally:
        gone.set()  # a client gone mid-answer: the decode stops at its next token
