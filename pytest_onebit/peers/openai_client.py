"""A small client for an OpenAI-compatible HTTP endpoint, on the standard library (urllib), so
the peer needs nothing the harness does not already have.

`Client(url)` takes the server's root or its `/v1` (`http://127.0.0.1:8000`, or
`.../v1`). `post` returns the decoded JSON; `stream` reads Server-Sent Events and returns the
text joined, the last chunk that carried a `finish_reason`, and every chunk. A connection
that cannot be made is `Unreachable` (the peer then cannot run: exit 2); an HTTP error is
`ServerError` with the status and OpenAI's error message.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field


class Unreachable(RuntimeError):
    """Nothing answers at the URL (refused, no route, a timeout, not HTTP)."""


class ServerError(RuntimeError):
    """The server answered with an HTTP error."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


@dataclass
class Streamed:
    text: str
    last: dict                      # the chunk with the finish_reason
    chunks: list[dict] = field(default_factory=list)


def root_of(url: str) -> str:
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def choice_text(choice: dict) -> str:
    """A choice's text: `text` (completions) or `message.content` / `delta.content` (chat)."""
    if "text" in choice:
        return choice.get("text") or ""
    holder = choice.get("message") or choice.get("delta") or {}
    return holder.get("content") or ""


class Client:
    def __init__(self, url: str, *, timeout: float = 120.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--url wants http://HOST:PORT, got {url!r}")
        self.root = root_of(url)
        self.timeout = timeout

    def _open(self, path: str, body: dict | None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.root + path, data=data, method="GET" if body is
                                         None else "POST",
                                         headers={"Content-Type": "application/json"})
        try:
            return urllib.request.urlopen(request, timeout=self.timeout)
        except urllib.error.HTTPError as error:
            raw = error.read().decode("utf-8", "replace")
            try:
                message = json.loads(raw)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = raw[:200]
            raise ServerError(error.code, message) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise Unreachable(f"{self.root}{path}: {reason}") from None

    def get(self, path: str) -> dict:
        with self._open(path, None) as response:
            return json.loads(response.read())

    def post(self, path: str, body: dict) -> dict:
        with self._open(path, body) as response:
            return json.loads(response.read())

    def stream(self, path: str, body: dict) -> Streamed:
        chunks, pieces, last = [], [], {}
        with self._open(path, {**body, "stream": True}) as response:
            for raw in response:
                line = raw.decode("utf-8").strip()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    raise ServerError(200, f"in the stream: {chunk['error'].get('message')}")
                chunks.append(chunk)
                for choice in chunk.get("choices", []):
                    pieces.append(choice_text(choice))
                    if choice.get("finish_reason") is not None:
                        last = chunk
        return Streamed("".join(pieces), last, chunks)

    def model_id(self) -> str:
        """The first model `/v1/models` lists; `Unreachable` when nothing answers."""
        try:
            listed = self.get("/v1/models")
        except ServerError as error:
            raise Unreachable(f"{self.root}/v1/models answered {error}") from None
        except ValueError as error:
            raise Unreachable(f"{self.root}/v1/models is not JSON: {error}") from None
        data = listed.get("data") or [{}]
        return str(data[0].get("id", "?"))


def parse_fields(items: list[str]) -> dict:
    """`--field KEY=JSON` items (onebit peer's and the pytest entry's) as the fields sent in
    every request; a value that is not JSON is kept as a string."""
    fields = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--field wants KEY=VALUE, got {item!r}")
        try:
            fields[key] = json.loads(raw)
        except ValueError:
            fields[key] = raw
    return fields
