"""`onebit serve --api-key`: a bearer key in front of the API, and `--cors-origin`'s wiring.

`BearerKey` is a pure ASGI middleware (it reads the headers and answers or passes the call
on, never touching a body, so a streamed answer goes through it untouched). With a key, every
request but `/health` and `/metrics` (what a load balancer and a scraper poll, holding no
text) and a CORS preflight (`OPTIONS`, which a browser sends without credentials) needs
`Authorization: Bearer KEY`; anything else gets OpenAI's 401 (`invalid_api_key`), the one
OpenAI's clients raise as `AuthenticationError`. The comparison is `hmac.compare_digest`, so
how long it takes says nothing about how much of a guess was right. vLLM's `--api-key` opens
the same paths.
"""

from __future__ import annotations

import hmac

#: paths served without the key: health checks and Prometheus scrapes carry no credentials
OPEN_PATHS = frozenset({"/health", "/metrics"})


def bearer_token(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The token of the request's `Authorization: Bearer TOKEN` header, None without one (the
    scheme's case does not matter, RFC 7235)."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else None
    return None


def _refusal(given: bool) -> dict:
    message = ("Incorrect API key provided." if given else
               "You didn't provide an API key. You need to provide your API key in an "
               "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": "invalid_api_key"}}


class BearerKey:
    """ASGI middleware: `app` behind `key` (see the module's docstring)."""

    def __init__(self, app, key: str) -> None:
        if not key:
            raise ValueError("the API key is empty")
        self.app = app
        self.key = key.encode("utf-8")

    def allowed(self, scope) -> bool:
        if scope["path"] in OPEN_PATHS or scope["method"] == "OPTIONS":
            return True
        token = bearer_token(scope["headers"])
        return token is not None and hmac.compare_digest(token, self.key)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or self.allowed(scope):
            await self.app(scope, receive, send)
            return
        from starlette.responses import JSONResponse

        given = bearer_token(scope["headers"]) is not None
        response = JSONResponse(_refusal(given), status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)


def middleware(api_key: str | None, cors_origins) -> list:
    """The app's middleware, outermost first: CORS for `cors_origins` (so a browser's preflight
    is answered, and a 401 carries the headers that let the page read it), then the key."""
    from starlette.middleware import Middleware

    stack = []
    if cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        # any header: OpenAI's browser SDK sends its own (x-stainless-*); no cookies, so no
        # credentials mode (a bearer key is a header)
        stack.append(Middleware(CORSMiddleware, allow_origins=list(cors_origins),
                                allow_methods=["GET", "POST", "OPTIONS"], allow_headers=["*"]))
    if api_key is not None:
        stack.append(Middleware(BearerKey, key=api_key))
    return stack
