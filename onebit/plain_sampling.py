"""Plain sampling, one step per token: the reference every sampled speculative run is held to.

Written apart from `run()` (no shared rounds, no drafts, no rejection rule) so that a bug in
the sampled loop cannot hide in its own reference: token i is drawn from
`warp(logits_i, sampling)` with one `rng.choice`, nothing else. The stepping is
`onebit.loop.plain_decode`, which `greedy()` shares.
"""

from __future__ import annotations

from collections.abc import Sequence

from onebit.loop import OnToken, RunResult, _check_row, check_request, plain_decode
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
    vocab = base.vocab_size

    def choose(logits, pos: int) -> int:
        return int(source.choice(warp(_check_row(logits, vocab, pos), sampling)))

    return plain_decode(base, tokens, RunResult(seed=getattr(source, "seed", None)),
                        max_tokens=max_tokens, on_token=on_token, choose=choose)
