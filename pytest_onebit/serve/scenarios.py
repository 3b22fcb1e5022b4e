"""The served contract's scenarios: which requests a client sends, how, and to which server.

An `Ask` is one request as a client writes it: the endpoint, the prompt, the budget and the
other JSON fields (knobs, sampling, logprobs). Stop strings and stop token ids are named by
where they fall in the answer decoded without them (`stops`, `stop_token_at`), as the batch
contract names its stop tokens: the trace reads them off the reference answer, so a stop lands
where the scenario wants it (inside a run of repeated text, straddling a token) whatever the
model says. A `ServedScenario` is a server (one at a time or `parallel` slots, its stream
interval, its draft head) and the asks sent to it: one after another, each both streamed and
not, or all at once (`concurrent`), where some clients leave mid-answer (`leave_after`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

COMPLETIONS, CHAT = "completions", "chat"


@dataclass(frozen=True)
class Ask:
    endpoint: str
    prompt: str
    max_tokens: int
    fields: str = "{}"  # the other fields of the body, as JSON text (a scenario stays hashable)
    stops: tuple[tuple[int, int], ...] = ()  # (first character in the answer, length)
    decoys: tuple[tuple[int, int], ...] = ()  # stop strings that begin there (a negative
    #   start counts from the end) but never complete
    repeat_stop: int = 0  # a stop of one character repeated this often, at the answer's first
    #                       run of it: a stop whose beginning repeats
    stop_token_at: int | None = None  # the answer index whose token becomes a stop_token_id
    n: int = 1
    leave_after: int | None = None  # concurrent only: streamed, the client leaves after this
    #                                 many events
    delay: float = 0.0  # concurrent only: seconds after the crowd starts that it is sent
    predict: str = ""  # a `prediction`: "exact" (the answer itself), "edited" (the answer
    #                    with a change in its middle, as parts) or "unrelated"
    ends_by_itself: bool = False  # the scenario means its answer to end at the model's EOS

    def __post_init__(self) -> None:
        if self.endpoint not in (COMPLETIONS, CHAT):
            raise ValueError(f"endpoint must be {COMPLETIONS!r} or {CHAT!r}")
        json.loads(self.fields)

    @property
    def stopped(self) -> bool:
        """Whether the ask sends stop strings or stop ids."""
        return bool(self.stops or self.decoys or self.repeat_stop
                    or self.stop_token_at is not None)

    @property
    def extra(self) -> dict:
        return json.loads(self.fields)

    @property
    def sampled(self) -> bool:
        return float(self.extra.get("temperature", 1.0)) > 0.0

    @property
    def knobs(self) -> bool:
        names = ("presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias",
                 "min_tokens", "response_format")
        return any(self.extra.get(n) for n in names)

    @property
    def logprobs(self) -> bool:
        return bool(self.extra.get("logprobs"))

    @property
    def label(self) -> str:
        return f"{self.endpoint} {self.prompt[:24]!r} {self.fields}"


@dataclass(frozen=True)
class ServedScenario:
    id: str
    asks: tuple[Ask, ...]
    parallel: int | None = None  # None: one request at a time
    stream_interval: float = 0.0  # seconds between a stream's events at least (0: each piece)
    head: str = "ngram"  # the server's draft head
    concurrent: bool = False  # every ask at once, each from a client of its own
    pass_delay: float = 0.0  # the toy's least time per pass (a leaving client lands inside
    #                          one, long before its answer's end)

    @property
    def stops(self) -> bool:
        return any(a.stopped for a in self.asks)

    @property
    def knobs(self) -> bool:
        return any(a.knobs for a in self.asks)

    @property
    def logprobs(self) -> bool:
        return any(a.logprobs for a in self.asks)

    @property
    def predicts(self) -> bool:
        return any(a.predict for a in self.asks)

    @property
    def answers_n(self) -> bool:
        return any(a.n > 1 for a in self.asks)


def _fields(**fields) -> str:
    return json.dumps(fields, sort_keys=True)


GREEDY = {"temperature": 0}
LOGPROBS_CHAT = {"logprobs": True, "top_logprobs": 3}
LOGPROBS_COMPLETION = {"logprobs": 3}
#: an EOS bias the toy's answers end under within a few dozen tokens
EOS_BIAS = {"256": 9.0}


def _asks(greedy: bool = True) -> tuple[Ask, ...]:
    """The asks every server mode is held to: both endpoints, greedy and seeded-sampled,
    stops (one whose beginning repeats, one straddling tokens, a decoy), a stop token, an
    answer that ends by itself, logprobs with and without knobs, knobs together, `n`."""
    sampled = {"temperature": 0.9, "top_p": 0.95, "seed": 5}
    return (
        Ask(COMPLETIONS, "the rain in spain stays", 40, _fields(**GREEDY)),
        Ask(CHAT, "say something about the sea", 32, _fields(**GREEDY, **LOGPROBS_CHAT)),
        Ask(COMPLETIONS, "one two three one two", 36, _fields(**sampled, **LOGPROBS_COMPLETION)),
        Ask(CHAT, "tell a story", 40, _fields(**sampled)),
        # stops: in the repeated run at the end, across a token boundary, and one that begins
        # where the text does but is never completed (its held-back text must come out)
        Ask(COMPLETIONS, "hello there", 40, _fields(**GREEDY, **LOGPROBS_COMPLETION),
            stops=((20, 3),), decoys=((5, 3),)),
        # a stop whose beginning repeats ("}}}" after "}}"), and one that begins at the very
        # end of an answer that runs to its budget: only the end releases what it held
        Ask(COMPLETIONS, "the rain in spain stays", 40, _fields(**GREEDY), repeat_stop=3),
        Ask(CHAT, "one two three one two", 24, _fields(**GREEDY, **LOGPROBS_CHAT),
            decoys=((-2, 3),)),
        Ask(CHAT, "the rain in spain stays", 40, _fields(**GREEDY, **LOGPROBS_CHAT),
            stops=((9, 2), (14, 4))),
        Ask(COMPLETIONS, "one two three one two", 30, _fields(**sampled), stops=((6, 2),)),
        Ask(CHAT, "tell a story", 30, _fields(**GREEDY, **LOGPROBS_CHAT), stop_token_at=7),
        # the model's own end: EOS made likely by a bias, its logprob and text left out
        Ask(CHAT, "hello there", 60, _fields(**GREEDY, **LOGPROBS_CHAT, logit_bias=EOS_BIAS),
            ends_by_itself=True),
        # knobs together: each as it alone defines it; min_tokens holds the stop token back
        Ask(COMPLETIONS, "one two three one two", 40, _fields(
            **GREEDY, **LOGPROBS_COMPLETION, presence_penalty=0.8, frequency_penalty=0.6,
            repetition_penalty=1.3, logit_bias={"101": 2.0, "125": -5.0})),
        Ask(CHAT, "hello there", 40, _fields(**GREEDY, **LOGPROBS_CHAT, min_tokens=12,
                                             logit_bias=EOS_BIAS), stop_token_at=3),
        Ask(CHAT, "say something about the sea", 40, _fields(
            **sampled, **LOGPROBS_CHAT, repetition_penalty=1.4, logit_bias={"32": 3.0},
            min_tokens=4)),
        Ask(COMPLETIONS, "the rain in spain stays", 20, _fields(
            temperature=0.8, seed=21, presence_penalty=0.5), n=3),
        # predicted outputs: the answer itself, the answer edited, and unrelated text
        Ask(CHAT, "tell a story", 48, _fields(**GREEDY, **LOGPROBS_CHAT), predict="exact"),
        Ask(COMPLETIONS, "the rain in spain stays", 48, _fields(**GREEDY), predict="edited"),
        Ask(CHAT, "hello there", 40, _fields(**sampled), predict="edited"),
        Ask(COMPLETIONS, "one two three one two", 32, _fields(**GREEDY), predict="unrelated"),
    )


#: a prompt of some 400 tokens (in the toy's vocabulary): its prefill takes a dozen passes
LONG_PROMPT = " ".join(f"item {i} of the list is {i * 7 % 13}" for i in range(19))


def _crowd() -> tuple[Ask, ...]:
    """Clients at once: long and short, streamed and not, greedy and sampled, two leaving
    mid-answer."""
    sampled = {"temperature": 0.7, "seed": 9}
    return (
        # long prompts, left right after the role chunk: admitted first, then cancelled while
        # they are prefilled, in a pass beside the others' rows
        Ask(CHAT, LONG_PROMPT, 60, _fields(**GREEDY), leave_after=1),
        Ask(CHAT, LONG_PROMPT[::-1], 60, _fields(**GREEDY), leave_after=1),
        Ask(COMPLETIONS, "the rain in spain stays", 400, _fields(**GREEDY), leave_after=3),
        Ask(CHAT, "tell a story", 48, _fields(**GREEDY, **LOGPROBS_CHAT)),
        Ask(COMPLETIONS, "one two three one two", 40, _fields(**sampled, **LOGPROBS_COMPLETION)),
        Ask(CHAT, "say something about the sea", 400, _fields(**GREEDY), leave_after=2),
        Ask(COMPLETIONS, "hello there", 24, _fields(**GREEDY, presence_penalty=0.7)),
        Ask(CHAT, "hello there", 56, _fields(**GREEDY), stops=((12, 3),)),
    )


def _prefill_leavers() -> tuple[Ask, ...]:
    """One client decoding a long answer while others arrive one by one with long prompts and
    leave as soon as their stream opens: each is cancelled while its prompt is prefilled, its
    rows in the same passes as the first client's."""
    stayer = Ask(COMPLETIONS, "tell a story", 160, _fields(**GREEDY, **LOGPROBS_COMPLETION))
    return (stayer,) + tuple(
        Ask(CHAT, LONG_PROMPT[i:] + LONG_PROMPT[:i], 40, _fields(**GREEDY), leave_after=1,
            delay=0.05 + 0.1 * n) for n, i in enumerate((0, 37, 91, 150, 201, 263)))


def standard_served_scenarios() -> list[ServedScenario]:
    """The named scenarios every served check runs on (`mutants/serve/` is killed on these),
    the cheapest first: a mutant's run stops at its first failing test."""
    asks = _asks()
    return [
        ServedScenario("one-at-a-time-coalesced", asks[4:11], stream_interval=0.02),
        ServedScenario("parallel-3-auto", asks[2:4] + asks[10:14], parallel=3, head="auto",
                       stream_interval=0.5),
        ServedScenario("parallel-3", asks, parallel=3),
        ServedScenario("one-at-a-time", asks),
        ServedScenario("crowd-parallel-3", _crowd(), parallel=3, concurrent=True,
                       pass_delay=0.008),
        ServedScenario("crowd-one-at-a-time", _crowd(), concurrent=True, pass_delay=0.004),
        # plain decode: the first client takes a pass a token, so it outlasts the leavers
        ServedScenario("prefill-leavers-parallel-2", _prefill_leavers(), parallel=2,
                       concurrent=True, pass_delay=0.008, head="none"),
    ]
