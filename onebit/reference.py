"""The references a speculative run is held to: plain greedy decode and plain sampling, one
base step per token, no drafts, no rounds, no rejection rule.

This module shares no code with the loop (`onebit.loop`): its argument checks, its checks of
the base's scores, its fault handling and its stepping are its own, written again on purpose.
A bug in a helper the loop and its reference shared would move both the same way and the
contract (I1: the run equals greedy) could not see it. Only the result types
(`onebit.result`) and the sampling maths (`onebit.sampling.warp`, the distribution a sampled
token is drawn from) are common. tests/toy_base/test_reference.py fails if this module, or
anything it imports, imports `onebit.loop`.

Behaviour is the loop's documented one (docs/errors.md): a bad argument is a `ValueError`
before the base is touched; bad scores from the base are a `BaseContractError` naming the
position; whatever stops a decode mid-way is raised as a `DecodeError` carrying `.emitted`.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Sequence

import numpy as np

from onebit.errors import BaseContractError, DecodeError, PartError
from onebit.protocols import BaseModel
from onebit.result import OnToken, RunResult
from onebit.sampling import Rng, Sampling, make_rng, warp

Choose = Callable[[np.ndarray, int], int]


def greedy(
    base: BaseModel,
    prompt: Sequence[int],
    *,
    max_tokens: int,
    on_token: OnToken | None = None,
) -> RunResult:
    """Plain greedy decode, one step per token: the reference every speculative run equals.
    Each token is the argmax of the last step's scores (the first of equal maxima)."""
    tokens = _request(base, prompt, max_tokens)
    vocab = base.vocab_size

    def choose(logits: np.ndarray, pos: int) -> int:
        return int(np.argmax(_scores(logits, vocab, pos)))

    return plain_decode(base, tokens, RunResult(), max_tokens=max_tokens, on_token=on_token,
                        choose=choose)


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
    """Sample up to `max_tokens` tokens after `prompt`, each from the base's warped scores:
    the reference every sampled speculative run is held to.

    Token i is drawn from `warp(logits_i, sampling)` with one `rng.choice`, nothing else. All
    randomness goes through `rng`, by default `SeededRng(seed)`. Temperature 0 is greedy
    decoding. Every emitted token is run through the base, so afterwards its committed
    sequence is prompt + emitted."""
    tokens = _request(base, prompt, max_tokens)
    if not isinstance(sampling, Sampling):
        raise ValueError(f"sampling must be a onebit.Sampling, got {sampling!r}")
    source = make_rng(rng, seed)
    vocab = base.vocab_size

    def choose(logits: np.ndarray, pos: int) -> int:
        return int(source.choice(warp(_scores(logits, vocab, pos), sampling)))

    return plain_decode(base, tokens, RunResult(seed=getattr(source, "seed", None)),
                        max_tokens=max_tokens, on_token=on_token, choose=choose)


def plain_decode(
    base: BaseModel,
    tokens: list[int],
    result: RunResult,
    *,
    max_tokens: int,
    on_token: OnToken | None,
    choose: Choose,
) -> RunResult:
    """Step the (checked) prompt, then one step per token, each picked from the last step's
    scores by `choose(logits, pos)`, appending to `result`. Whatever stops it is raised as a
    `DecodeError` carrying what was emitted."""
    emitted = result.tokens
    stats = result.stats
    try:
        _call("base.reset()", "base", _method(base, "reset"))
        step = _method(base, "step")
        logits = None
        for pos, token in enumerate(tokens):
            logits = _call("base.step()", "base", step, token, pos)
        stats.prefill_steps = len(tokens)
        pos = len(tokens)
        while len(emitted) < max_tokens:
            token = choose(logits, pos)
            logits = _call("base.step()", "base", step, token, pos)
            emitted.append(token)
            stats.steps += 1
            stats.rounds += 1
            stats.emitted += 1
            pos += 1
            if on_token is not None and _call("consumer", "consumer", on_token, token) is False:
                result.stopped = True
                break
    except BaseException as error:
        stopped = _stopped(error, emitted, len(tokens) + len(emitted))
        if stopped is error:
            raise
        raise stopped from error
    return result


# ---------------------------------------------------------------------------------------------
# Checks and faults (the reference's own; see the module docstring for why not the loop's)


def _integer(value: object, name: str) -> int:
    """`value` as an int; bools and non-integers are a `ValueError` naming `name`."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise ValueError(f"{name} must be an integer, got {value!r}")


def _request(base: BaseModel, prompt: Sequence[int], max_tokens: int) -> list[int]:
    """The prompt as a list of in-vocabulary ints, and `max_tokens` >= 0; `ValueError` naming
    the bad value otherwise, before the base is touched."""
    if isinstance(prompt, str | bytes):
        raise ValueError(f"prompt must be a sequence of token ids, got {type(prompt).__name__}")
    tokens = [_integer(value, f"prompt[{i}]") for i, value in enumerate(prompt)]
    if len(tokens) == 0:
        raise ValueError("prompt is empty: a decode needs at least one prompt token")
    vocab = base.vocab_size
    outside = [i for i, t in enumerate(tokens) if t < 0 or t >= vocab]
    if outside:
        i = outside[0]
        raise ValueError(f"prompt[{i}] = {tokens[i]} is outside the vocabulary [0, {vocab})")
    if _integer(max_tokens, "max_tokens") < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    return tokens


def _scores(logits: object, vocab: int, pos: int) -> np.ndarray:
    """The base's scores for position `pos`: `[vocab]` finite numbers, or a
    `BaseContractError` naming the position."""
    row = np.asarray(logits)
    problem = None
    if row.shape != (vocab,):
        problem = f"logits of shape {row.shape} scoring position {pos}; expected ({vocab},)"
    elif row.dtype.kind not in "fiu":
        problem = f"logits of dtype {row.dtype} scoring position {pos}; expected numbers"
    elif not np.all(np.isfinite(row)):
        problem = f"non-finite logits scoring position {pos}"
    if problem is not None:
        raise BaseContractError(f"base returned {problem}", pos=pos)
    return row


def _call(what: str, culprit: str, fn: Callable, *args: object) -> object:
    """`fn(*args)`; an exception from it that is not a `DecodeError` becomes a `PartError`
    naming the call and the part, with the original as its cause."""
    try:
        return fn(*args)
    except DecodeError:
        raise
    except Exception as error:
        raise PartError(f"{what} raised {type(error).__name__}: {error}",
                        culprit=culprit) from error


def _method(part: object, name: str) -> Callable:
    """The base's method `name`, looked up as a guarded call ("base.step" raised ...)."""
    return _call(f"base.{name}", "base", getattr, part, name)  # type: ignore[return-value]


def _stopped(error: BaseException, emitted: list[int], pos: int) -> BaseException:
    """What a decode stopped by `error` raises, carrying `emitted`: a `DecodeError` as it is
    (its position filled in when it has none); KeyboardInterrupt / SystemExit as they are;
    anything else the reference itself raised wrapped as a `PartError` with culprit "loop"."""
    if isinstance(error, DecodeError):
        if error.pos is None:
            error.pos = pos
    elif isinstance(error, Exception):
        error = PartError(f"the loop raised {type(error).__name__}: {error}", culprit="loop",
                          pos=pos)
    with contextlib.suppress(AttributeError):  # a type that takes no attributes
        error.emitted = list(emitted)  # type: ignore[attr-defined]
    return error


__all__ = ["greedy", "plain_decode", "sample"]
