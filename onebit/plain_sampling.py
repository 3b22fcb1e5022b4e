"""Plain sampling, one step per token: the reference every sampled speculative run is held to.

Written apart from `run()` (no shared rounds, no drafts, no rejection rule) so that a bug in
the sampled loop cannot hide in its own reference: token i is drawn from
`warp(logits_i, sampling)` with one `rng.choice`, nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

from onebit.loop import OnToken, RunResult, _check_row, _guarded, _settled, check_request
from onebit.protocols import BaseModel
from onebit.sampling import Rng, Sampling, make_rng, warp


def sample(
    base: BaseModel,
    prompt: Sequence[int],
    *,
    max_tokens: int,
    sampling: Sampling,
    rng: Rng | None = None,
    seed: int | None = None,
    on_token: OnToken | None = None,
) -> RunResult:
    """Sample up to `max_tokens` tokens after `prompt`, each from the base's warped scores.

    All randomness goes through `rng` (`accept` / `choice`), by default `SeededRng(seed)`.
    Temperature 0 is greedy decoding. Like `greedy()`, every emitted token is run through the
    base, so afterwards its committed sequence is prompt + emitted. Whatever stops it mid-run
    is settled as `greedy()` settles it (a `DecodeError` carrying `.emitted`)."""
    tokens = check_request(base, prompt, max_tokens=max_tokens)
    if not isinstance(sampling, Sampling):
        raise ValueError(f"sampling must be a onebit.Sampling, got {sampling!r}")
    source = make_rng(rng, seed)
    base, on_token = _guarded(base, "base"), _guarded(on_token, "consumer")
    result = RunResult(seed=getattr(source, "seed", None))
    stats = result.stats
    try:
        base.reset()
        for pos, token in enumerate(tokens):
            logits = base.step(token, pos)
        stats.prefill_steps = len(tokens)
        pos = len(tokens)
        while len(result.tokens) < max_tokens:
            p = warp(_check_row(logits, base.vocab_size, pos), sampling)
            token = int(source.choice(p))
            logits = base.step(token, pos)
            stats.steps += 1
            stats.rounds += 1
            stats.emitted += 1
            result.tokens.append(token)
            pos += 1
            if on_token is not None and on_token(token) is False:
                result.stopped = True
                break
    except BaseException as error:
        settled = _settled(error, result.tokens, len(tokens) + len(result.tokens))
        if settled is error:
            raise
        raise settled from error
    return result
