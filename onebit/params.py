"""`DecodeParams`: one request to decode, prepared once and carried whole from where it enters
(`onebit.generate`, the server's request parser) down to the loop (`onebit.run`) and the
batch engine's `BatchRequest`.

Before it, a request's knobs were repackaged four times on the way down (the HTTP request,
the server's locals, `BatchRequest`'s fields, `run()`'s keywords), and each copy was a place
where one of them could be dropped. Now each layer adds what is its own (the text layer: stop
strings and logprobs; the server: the head; the batch engine: the slot) and passes the same
object on. It holds token ids, never text: the tokenizer has already spoken.

What it settles once:
- `stop_ids` (the model's end of turn with the request's `stop_token_ids`) end the answer,
  and `min_tokens` holds every one of them back, not just the end of turn (`processors.held`
  is widened here, so no layer below can forget it);
- `sampling` is None for a greedy request (a loop that decodes only greedily still runs it);
- `seeded`: a sampled request with a seed, which promises the same answer again (the head
  registry's `decodes_plain` reads it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from onebit.processors import ProcessedBase, Processors


@dataclass(frozen=True)
class DecodeParams:
    """One decode: `prompt` (token ids), at most `max_tokens` after it, greedy or sampled
    (`sampling`, `seed`), ended by any of `stop_ids` (the stop token is emitted and counted,
    as `onebit.generate` counts it), the scores processed by `processors` (penalties,
    `logit_bias`, `min_tokens`, a grammar). `stop` (stop strings), `logprobs` (how many
    alternatives per token, None: not asked), `prediction` (a guess of the answer, token ids)
    and `speculative` (False: decode plainly) are read by the layers above the loop."""

    prompt: tuple[int, ...]
    max_tokens: int
    sampling: object | None = None
    seed: int | None = None
    stop_ids: frozenset[int] = frozenset()
    processors: Processors | None = None
    stop: tuple[str, ...] = ()
    logprobs: int | None = None
    prediction: tuple[int, ...] | None = None
    speculative: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.prompt, str | bytes):
            raise ValueError(f"prompt must be token ids, got {type(self.prompt).__name__}")
        object.__setattr__(self, "prompt", _ids(self.prompt, "prompt"))
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) \
                or self.max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, an integer, got {self.max_tokens!r}")
        stops = frozenset(_ids(self.stop_ids, "stop_ids"))
        object.__setattr__(self, "stop_ids", stops)
        if self.sampling is not None and _greedy(self.sampling):
            object.__setattr__(self, "sampling", None)  # temperature 0 is the greedy loop
        knobs = self.processors
        if knobs is not None:
            if not isinstance(knobs, Processors):
                raise ValueError(f"processors must be an onebit.Processors, got {knobs!r}")
            if not stops <= knobs.held:  # min_tokens holds back whatever would end the answer
                object.__setattr__(self, "processors", replace(knobs, held=knobs.held | stops))
        if isinstance(self.stop, str):
            raise ValueError("stop must be a sequence of strings, not one string")
        object.__setattr__(self, "stop", tuple(self.stop))
        if self.prediction is not None:
            object.__setattr__(self, "prediction", _ids(self.prediction, "prediction"))

    @property
    def seeded(self) -> bool:
        """A sampled request with a seed: it promises the same answer every time."""
        return self.sampling is not None and self.seed is not None

    @property
    def drafts_prediction(self) -> bool:
        """Whether the request's own prediction drafts (in place of a configured head)."""
        return self.prediction is not None and self.speculative

    def with_seed(self, seed: int | None) -> DecodeParams:
        """The same request drawing from `seed` (answer i of `n` draws from seed + i)."""
        return replace(self, seed=seed)

    def sampled(self) -> dict:
        """`onebit.run`'s sampling keywords: none for a greedy request, so a loop that only
        decodes greedily (a compiled one, a peer's) still runs it."""
        return {} if self.sampling is None else {"sampling": self.sampling, "seed": self.seed}

    def process(self, base, *, tokenizer=None):
        """`base` with the request's knobs on every score the loop reads, each row with its
        own prefix's state; `base` itself when the request has none. A grammar reads tokens as
        `tokenizer` spells them (a batch slot carries no tokenizer of its own)."""
        if self.processors is None:
            return base
        return ProcessedBase(base, self.processors, len(self.prompt), tokenizer=tokenizer)

    def run(self, loop, base, head, *, k: int, on_token=None, **extra):
        """Run the request on `loop` (`onebit.run`, or any loop with its signature): the one
        place its fields become the loop's arguments."""
        return loop(base, head, list(self.prompt), max_tokens=self.max_tokens, k=k,
                    on_token=on_token, **self.sampled(), **extra)


def _ids(values, name: str) -> tuple[int, ...]:
    """`values` as token ids, each an integer >= 0 (numpy's included), or a ValueError naming
    the first that is not: a float or a bool is never read as an id."""
    ids = []
    for i, t in enumerate(values):
        if isinstance(t, bool) or not hasattr(t, "__index__") or int(t) < 0:
            raise ValueError(f"{name}[{i}] = {t!r} is not a token id (an integer >= 0)")
        ids.append(int(t))
    return tuple(ids)


def _greedy(sampling) -> bool:
    greedy = getattr(sampling, "greedy", False)
    return bool(greedy() if callable(greedy) else greedy)


def stop_ids_of(tokenizer, extra: Sequence[int] = ()) -> frozenset[int]:
    """The ids that end an answer: the tokenizer's end of turn and EOS, and `extra`."""
    return frozenset(tokenizer.stop_ids) | frozenset(int(t) for t in extra)
