"""The one error a request can get back: a 4xx with OpenAI's error body, naming the field (a
400), or saying the server is at capacity (a 429)."""

from __future__ import annotations


class RequestError(ValueError):
    """A request onebit refuses before decoding: a field missing, of the wrong type, out of
    range, or asking for what the server does not do. `param` is the field's name as the
    client sent it (`messages[2].content`, `stop[1]`); `code` is OpenAI's machine-readable
    reason where it has one (`context_length_exceeded`)."""

    def __init__(self, param: str | None, message: str, *, code: str | None = None,
                 status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.param = param
        self.code = code
        self.status = status
        self.kind = kind  # OpenAI's `type`: a 429 for a full queue is "rate_limit_exceeded"

    def body(self) -> dict:
        """OpenAI's error JSON: {"error": {"message", "type", "param", "code"}}."""
        return {"error": {"message": str(self), "type": self.kind,
                          "param": self.param, "code": self.code}}
