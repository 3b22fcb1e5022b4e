"""`onebit serve`: an OpenAI-compatible HTTP server over one onebit model (docs/serve.md).

One module per job: `requests` validates a body into a `Request`, `engine` decodes it through
the speculative loop (`stops` cuts at stop strings, `scores` records log-probabilities,
`heads` picks the draft head), `tools` checks, renders, constrains and parses tool calls,
`responses` shapes OpenAI's JSON, `app` is the starlette app, `server` runs it under uvicorn.
starlette and uvicorn are the `serve` extra; importing this package does not need them, only
`create_app` and `server` do.
"""

from __future__ import annotations

from onebit.serve.engine import Completion, Engine
from onebit.serve.errors import RequestError
from onebit.serve.requests import Request, parse


def create_app(engine: Engine, **options):
    """The starlette app over `engine` (see `onebit.serve.app`)."""
    from onebit.serve.app import create_app as make

    return make(engine, **options)


__all__ = ["Completion", "Engine", "Request", "RequestError", "create_app", "parse"]
