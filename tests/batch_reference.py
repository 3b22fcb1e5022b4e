"""The reference a batched answer is held to: the ordinary loop on the model alone, with the
request's head, seed and stops, read field by field from the request (it shares no code with
the batch engine). Used by the batch tests on real forwards (SmolLM2's compiled stack, Gemma's
sequences)."""

from __future__ import annotations

import onebit
from onebit.batch import BatchRequest
from onebit.serve.scores import ScoredBase


def alone(model, request: BatchRequest, *, top: int = 2) -> tuple[list[int], list]:
    """`(tokens, logprobs)` of `request` decoded by `onebit.run` on `model` itself (reset
    first), its log-probabilities with `top` alternatives as the engine's ScoredBase keeps them."""
    p = request.params
    model.reset()
    scored = ScoredBase(model, start=len(p.prompt), top=top)
    out: list[int] = []

    def on_token(t):
        out.append(t)
        return False if t in p.stop_ids else None

    head = request.head(None) if request.head else None
    sampled = {} if p.sampling is None else {"sampling": p.sampling, "seed": p.seed}
    onebit.run(scored, head, list(p.prompt), max_tokens=p.max_tokens,
               k=request.k, on_token=on_token, **sampled)
    return out, scored.logprobs
