"""The one error a request can get back: a 400 with OpenAI's error body, naming the field."""

from __future__ import annotations


class RequestError(ValueError):
    """A request onebit refuses before decoding: a field missing, of the wrong type, out of
    range, or asking for what the server does not do. `param` is the field's name as the
    client sent it (`messages[2].content`, `stop[1]`); `code` is OpenAI's machine-readable
    reason where it has one (`context_length_exceeded`)."""

    def __init__(self, param: str | None, message: str, *, code: str | None = None,
                 status: int = 400) -> None:
        super().__init__(message)
        self.param = param
        self.code = code
        self.status = status

    def body(self) -> dict:
        """OpenAI's error JSON: {"error": {"message", "type", "param", "code"}}."""
        return {"error": {"message": str(self), "type": "invalid_request_error",
                          "param": self.param, "code": self.code}}
