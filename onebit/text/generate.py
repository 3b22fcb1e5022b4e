"""`generate()`: text (or chat messages) in, text out, through the speculative loop.

The loop itself stays in token ids (`onebit.run`); this module is the text around it: the chat
template, the tokenizer, a stop at EOS/EOT and the streaming decoder. The stop goes through the
loop's consumer stop (`on_token` returning False), so the loop's contract holds unchanged: the
stop token is emitted and committed, and `generate` leaves it out of the text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from onebit.text.chat import check_messages, render
from onebit.text.errors import PromptError


@dataclass
class Generation:
    """What `generate` returns: the text and the loop's `RunResult` (unpacks as both)."""

    text: str
    result: object          # onebit.RunResult
    prompt_ids: list[int]
    stopped_on: int | None  # the stop token (EOS/EOT) that ended it, or None
    prefill_seconds: float = 0.0  # from the call to the first token (the prompt's passes)
    decode_seconds: float = 0.0   # from the first token to the last

    @property
    def decode_tokens_per_second(self) -> float:
        """Tokens after the first (which the prefill produces) per second of decode."""
        after_first = len(self.result.tokens) - 1
        return after_first / self.decode_seconds if self.decode_seconds > 0 else 0.0

    def __iter__(self):
        return iter((self.text, self.result))


def context_length(model) -> int | None:
    """The longest sequence the model was made for, if it says: `model.context_length` or its
    config's `max_position_embeddings`."""
    value = getattr(model, "context_length", None)
    if value is None:
        value = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def model_tokenizer(model, tokenizer=None):
    """`tokenizer`, else the model's own; a clear error where there is neither."""
    tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tok is None:
        raise ValueError("the model carries no tokenizer (model.tokenizer): pass tokenizer=")
    return tok


def prompt_ids(model, tokenizer, prompt, max_tokens: int, *, chat: bool | None = None,
               system: str | None = None) -> tuple[list[int], int]:
    """The prompt's token ids as `generate` feeds them (the chat template's text, or the text
    with the tokenizer's own BOS), and `max_tokens` cut to what the model's context leaves.
    Raises PromptError for a prompt of no tokens or one that fills the context."""
    text, from_template = prompt_text(tokenizer, prompt, chat=chat, system=system)
    ids = tokenizer.encode(text, add_special_tokens=not from_template)
    if not ids:
        raise PromptError("the prompt is empty: it encodes to no tokens")
    limit = context_length(model)
    if limit is not None and len(ids) >= limit:
        raise PromptError(f"the prompt is {len(ids)} tokens; the model's context is {limit}, "
                          "which leaves no room to generate")
    if limit is not None:
        max_tokens = min(max_tokens, limit - len(ids))
    return ids, max_tokens


def prompt_text(tokenizer, prompt, *, chat: bool | None, system: str | None,
                tools: list | None = None) -> tuple[str, bool]:
    """The text to tokenize and whether it came from the chat template (whose text carries its
    own BOS, so the tokenizer adds none); `tools` (OpenAI's function tools) reach the template
    as transformers passes them."""
    if isinstance(prompt, str):
        if chat is None:
            chat = tokenizer.chat_template is not None
        if not chat:
            if system is not None:
                raise ValueError("system= needs a chat prompt (chat=True or a list of messages)")
            return prompt, False
        messages = [{"role": "user", "content": prompt}]
    elif chat is False:
        raise ValueError("chat=False takes a str prompt, not messages")
    else:
        messages = check_messages(prompt)
    if system is not None:
        messages = [{"role": "system", "content": system}, *messages]
    text = render(tokenizer.chat_template, messages, add_generation_prompt=True,
                  bos_token=tokenizer.bos_token or "", eos_token=tokenizer.eos_token or "",
                  tools=tools)
    return text, True


def _prediction_head(tok, prediction, prompt_len: int, head, k: int | None):
    """(head, k) drafting from `prediction`; (None, 1) when `head` is plain decode."""
    from onebit.heads.prediction import PREDICTION_K, PredictionHead

    if head is None or head == "none":  # the same request decoded plainly
        return None, k or 1
    if isinstance(prediction, str):
        predicted = tok.encode(prediction, add_special_tokens=False)
    elif isinstance(prediction, list | tuple) and all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prediction):
        predicted = list(prediction)
    else:
        raise ValueError(f"prediction must be a str or a list of token ids, got "
                         f"{type(prediction).__name__}")
    return PredictionHead(predicted, prompt_len, k=k or PREDICTION_K), k or PREDICTION_K


def _greedy(sampling) -> bool:
    greedy = getattr(sampling, "greedy", False)
    return bool(greedy() if callable(greedy) else greedy)


def generate(model, prompt, *, chat: bool | None = None, system: str | None = None,
             max_tokens: int = 256, head="auto", k: int | None = None, sampling=None,
             seed: int | None = None, rng=None, fallback=None, on_text=None, tokenizer=None,
             draft=None, skip_special_tokens: bool = True, processors=None,
             prediction=None) -> Generation:
    """Generate text after `prompt` (a str, or chat messages [{"role", "content"}, ...]).

    A str goes through the model's chat template when it has one (`chat=None`), or always
    (`chat=True`, ChatML when the file has none), or never (`chat=False`). `system` adds a
    system turn. `head`, `k`, `sampling`, `seed`, `rng`, `fallback` and `max_tokens` are
    `onebit.run`'s; `head` may also be named: "auto" (the default: prompt lookup under the cost
    policy, which never drafts what does not pay), "none" (plain decode, as is None),
    "trained", "ngram", "mtp"/"dflash" with `draft=DIR`. Every head gives greedy text
    identical to plain decode's and sampled text from the same distribution; a sampled run
    with a `seed` (or `rng`) and the default head decodes plain, and a named head ("ngram",
    "trained") drafts without the policy, so the same seed gives the same text (the policy's
    choices depend on its clock, and the draws on those choices; onebit.heads.registry).
    `on_text(piece)` gets the text as it is decoded, never half a character. The run stops at
    EOS/EOT. A prompt that leaves no room in the context is a `PromptError`. `processors` (an
    `onebit.Processors`: penalties, `logit_bias`, `min_tokens`) process every score the loop
    reads with its own prefix's state (`onebit.processors.ProcessedBase`), so speculation
    keeps the text plain decoding gives with the same knobs; `min_tokens` holds the model's
    stop tokens back. `prediction` (a str, or token ids) is a guess of the answer, OpenAI's
    predicted outputs: its tokens become the drafts (`onebit.heads.prediction`), so an answer
    that repeats it costs a pass per verify, and the text is the text without it; it drafts
    in place of `head`, unless `head` is "none" (the same request decoded plainly), as the
    server drafts from a request's prediction in place of its own head.
    """
    from onebit.loop import run

    tok = model_tokenizer(model, tokenizer)
    ids, max_tokens = prompt_ids(model, tok, prompt, max_tokens, chat=chat, system=system)
    from onebit.heads import registry
    from onebit.heads.registry import resolve

    seeded = sampling is not None and not _greedy(sampling) and (
        seed is not None or rng is not None)
    # a seeded sampled run under `auto` decodes plain (the registry's one rule: the policy's
    # draft lengths follow its clock, and the draws follow the draft lengths); a head the
    # caller named keeps its drafts under a seed, without the policy, so the draws (and the
    # text) replay
    if prediction is not None:
        draft_head, k = _prediction_head(tok, prediction, len(ids), head, k)
    else:
        draft_head, k = resolve(head, model, k=k, draft=draft, every_draft=seeded,
                                seeded=seeded)
    if processors is not None:
        from onebit.processors import Processors

        if not isinstance(processors, Processors):
            raise ValueError(f"processors must be an onebit.Processors, got {processors!r}")
    from onebit.params import DecodeParams, stop_ids_of

    # the one request object the loop is run from: min_tokens holds every stop id back
    params = DecodeParams(ids, max_tokens, sampling=sampling, seed=seed,
                          stop_ids=stop_ids_of(tok), processors=processors)
    stops = params.stop_ids
    stream = tok.stream(skip_special_tokens=skip_special_tokens)
    stopped_on = []
    clock = [time.perf_counter(), None]   # start, first token

    def on_token(token: int):
        if clock[1] is None:
            clock[1] = time.perf_counter()
        if token in stops:
            stopped_on.append(token)
            return False
        piece = stream.push(token)
        if piece and on_text is not None:
            on_text(piece)
        return None

    result = params.run(run, params.process(model), draft_head, k=k, on_token=on_token,
                        **({"rng": rng} if rng is not None else {}),
                        **({"fallback": fallback} if fallback is not None else {}))
    end = time.perf_counter()
    if prediction is None:  # what a named head keeps of the answer (suffix decoding's cache)
        registry.learn(head, result.tokens)
    rest = stream.flush()
    if rest and on_text is not None:
        on_text(rest)
    first = clock[1] if clock[1] is not None else end
    return Generation(stream.text, result, ids, stopped_on[0] if stopped_on else None,
                      prefill_seconds=first - clock[0], decode_seconds=end - first)


def generate_n(model, prompt, *, n: int, seed: int | None = None, rng=None,
               **options) -> list[Generation]:
    """`n` independent answers to one prompt, as `generate` gives one (the same keywords).
    Answer i draws from `seed + i` (`onebit.sampling.answer_seeds`): it is the answer
    `generate` gives alone with that seed, whatever the others drew. One `rng` cannot give
    `n` answers a stream each, so an `rng` with `n > 1` is refused: pass `seed`."""
    from onebit.sampling import answer_seeds

    seeds = answer_seeds(seed, n)
    if rng is not None:
        if n > 1:
            raise ValueError(f"rng with n={n}: one rng cannot give {n} answers a stream each "
                             "(each would take the draws the one before left); pass seed, "
                             "and answer i draws from seed + i")
        return [generate(model, prompt, rng=rng, **options)]
    return [generate(model, prompt, seed=answer_seed, **options) for answer_seed in seeds]
