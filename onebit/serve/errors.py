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


def context_exceeded(param: str, limit: int, prompt: int, completion: int | None = None, *,
                     where: str = "messages", slot: str = "") -> RequestError:
    """A prompt, or a prompt and the completion asked for, past the context: a 400 with code
    `context_length_exceeded` in the words OpenAI's own and vLLM's servers use, which
    LangChain and LiteLLM match to tell a context overflow from another bad request.
    `completion` None: the prompt alone leaves no room (OpenAI's "your messages resulted in
    M tokens"); else vLLM's "you requested T tokens (P in the messages, C in the completion)".
    `where` is "messages" or "prompt"; `slot` says where a limit below the model's comes
    from."""
    head = f"This model's maximum context length is {limit} tokens{slot}."
    if completion is None:
        full = ", which leaves no room for the completion" if prompt == limit else ""
        text = (f"{head} However, your {where} resulted in {prompt} tokens{full}. Please "
                f"reduce the length of the {where}.")
    else:
        text = (f"{head} However, you requested {prompt + completion} tokens ({prompt} in the "
                f"{where}, {completion} in the completion). Please reduce the length of the "
                f"{where} or completion.")
    return RequestError(param, text, code="context_length_exceeded")
