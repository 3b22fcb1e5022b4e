"""The served contract V1..V8 on onebit serve's app and engine, over the contract's toy (a
fabricated model on the NumPy forward with an ASCII tokenizer): one request at a time and
three in parallel, whole and streamed at three stream intervals, greedy and seeded-sampled,
with stops, logprobs, knobs together and `n`, and crowds where clients leave mid-answer
(docs/serve.md, "The served contract"). The mutant catalogue `mutants/serve/` is killed here."""

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from pytest_onebit.serve.suite import ServedContract  # noqa: E402


class TestOnebitServe(ServedContract):
    """onebit serve, its requests decoded by `onebit.run`."""
