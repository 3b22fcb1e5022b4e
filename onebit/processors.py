"""The knobs a request sends besides temperature and top-p, applied exactly under speculation.

`Processors` holds them: presence, frequency and repetition penalties, `logit_bias` and
`min_tokens` (with the ids it holds back). `ProcessedBase(base, processors, prompt_len)` wraps
the base the loop runs, so every row of scores the loop sees, a step's, a verify row's, a
prefill's last, has been processed **with the state of that row's own prefix**: the committed
tokens, then the tokens of the same verify before it (a draft's penalty history includes the
drafts before it). A commit keeps the state of the committed prefix only, so a rejected draft
leaves nothing behind. The loop itself is unchanged: greedy picks the argmax of the processed
row, sampling draws from its warp, and a draft is judged against the processed p, so greedy
output equals plain decoding with the same knobs and sampled output is exactly the processed
target distribution. The draft head may ignore the knobs: the accept rule carries exactness.

The order, for one row scoring position q + 1 (history: positions 0 .. q; the generated tokens
are those at positions >= the prompt's length):
1. repetition penalty r (vLLM / transformers): a token in the history, prompt included, has
   its score s made s / r if s > 0, else s * r;
2. frequency f and presence p penalties (OpenAI): s - f * count - p * (count > 0), count over
   the generated tokens;
3. `logit_bias`: s + bias for each listed token;
4. `min_tokens` n: while fewer than n tokens have been generated before the row's position,
   the `held` ids (the stop tokens) score `MASKED`, a finite floor no draw reaches (the loop
   refuses non-finite scores);
5. `grammar` (onebit.grammar: a JSON schema, any JSON object, a regex, a Lark grammar): the
   tokens the grammar does not allow after the row's prefix score `MASKED`. A verify consumes
   its tokens one by one into the grammar's matcher, masks each row with the state of its own
   prefix and rolls them back; a commit consumes what was accepted. After a token the grammar
   refuses (a draft), the rows that follow are all `MASKED`: the loop never reads them, since
   that draft is rejected by the row before it. Where the grammar allows only a stop token,
   `min_tokens` does not hold it back (the text is complete). A committed token the grammar
   refuses (the loop never commits one: it picks from masked rows) leaves every later row
   all `MASKED`: nothing can follow a text outside the grammar, and a base used directly
   keeps the base contract.

Rows are processed in float64 and handed back in the base's dtype. Log-probabilities a server
reports are the raw scores' (wrap a `ScoredBase` inside this one), as vLLM's default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from onebit.grammar import Grammar, Matcher
from onebit.wrapped import WrappedBase

#: the score a held-back token gets: finite (the loop checks scores are), and far enough below
#: any real score that its probability is exactly 0 after the softmax
MASKED = -1.0e30

#: the most `logit_bias` entries and the bias range OpenAI takes
MAX_BIAS_ENTRIES = 300
BIAS_RANGE = 100.0


class ProcessorError(ValueError):
    """A knob with a value no request may have: names the knob and the value."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


def _number(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ProcessorError(name, f"{name} must be a number, got {value!r}")
    if not low <= value <= high:
        raise ProcessorError(name, f"{name} must be in [{low:g}, {high:g}], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Processors:
    """The knobs of one request; the defaults change nothing (`active` is False)."""

    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: Mapping[int, float] = field(default_factory=dict)
    min_tokens: int = 0
    held: frozenset[int] = frozenset()  # the ids min_tokens holds back (EOS, stop ids)
    grammar: Grammar | None = None  # the generated text must stay inside it

    def __post_init__(self) -> None:
        object.__setattr__(self, "presence_penalty",
                           _number("presence_penalty", self.presence_penalty, -2.0, 2.0))
        object.__setattr__(self, "frequency_penalty",
                           _number("frequency_penalty", self.frequency_penalty, -2.0, 2.0))
        r = _number("repetition_penalty", self.repetition_penalty, 0.0, 10.0)
        if r == 0.0:
            raise ProcessorError("repetition_penalty", "repetition_penalty must be > 0, got 0")
        object.__setattr__(self, "repetition_penalty", r)
        if not isinstance(self.logit_bias, Mapping):
            raise ProcessorError("logit_bias", f"logit_bias must map token ids to biases, got "
                                 f"{type(self.logit_bias).__name__}")
        if len(self.logit_bias) > MAX_BIAS_ENTRIES:
            raise ProcessorError("logit_bias", f"logit_bias takes at most {MAX_BIAS_ENTRIES} "
                                 f"tokens, got {len(self.logit_bias)}")
        bias = {}
        for token, value in self.logit_bias.items():
            where = f"logit_bias[{token!r}]"
            if isinstance(token, bool) or not isinstance(token, int) or token < 0:
                raise ProcessorError(where, f"{where}: a token id must be an integer >= 0")
            bias[int(token)] = _number(where, value, -BIAS_RANGE, BIAS_RANGE)
        object.__setattr__(self, "logit_bias", dict(sorted(bias.items())))
        n = self.min_tokens
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ProcessorError("min_tokens", f"min_tokens must be an integer >= 0, got {n!r}")
        held = frozenset(int(t) for t in self.held)
        if any(t < 0 for t in held):
            raise ProcessorError("held", f"held ids must be >= 0, got {sorted(held)}")
        object.__setattr__(self, "held", held)
        if self.grammar is not None and not isinstance(self.grammar, Grammar):
            raise ProcessorError("grammar", f"grammar must be an onebit.grammar.Grammar, got "
                                 f"{type(self.grammar).__name__}")

    @property
    def active(self) -> bool:
        """Whether any knob changes a score."""
        return bool(self.presence_penalty or self.frequency_penalty
                    or self.repetition_penalty != 1.0 or self.logit_bias
                    or (self.min_tokens and self.held) or self.grammar is not None)

    def check_vocab(self, vocab: int) -> None:
        """Refuse a token id outside the vocabulary, naming the knob."""
        for token in self.logit_bias:
            if token >= vocab:
                where = f"logit_bias[{token}]"
                raise ProcessorError(where, f"{where}: token {token} is outside the vocabulary "
                                     f"[0, {vocab})")
        for token in self.held:
            if token >= vocab:
                raise ProcessorError("held", f"held token {token} is outside the vocabulary "
                                     f"[0, {vocab})")


class _History:
    """What the knobs read of a prefix: which tokens it holds (prompt included), how often
    each was generated, and its length."""

    def __init__(self, vocab: int) -> None:
        self.seen = np.zeros(vocab, bool)
        self.counts = np.zeros(vocab, np.int64)
        self.length = 0

    def push(self, token: int, generated: bool) -> None:
        self.seen[token] = True
        if generated:
            self.counts[token] += 1
        self.length += 1


class ProcessedBase(WrappedBase):
    """`base` with every row it scores processed by `processors`, each with the state of its
    own prefix; `prompt_len` tokens are the prompt (not generated). A grammar reads tokens as
    `tokenizer` spells them (default: the base's `tokenizer`). Members the loop does not call
    through this class are the base's own."""

    def __init__(self, base, processors: Processors, prompt_len: int, *,
                 tokenizer=None) -> None:
        processors.check_vocab(base.vocab_size)
        super().__init__(base)
        self.processors = processors
        self.prompt_len = int(prompt_len)
        self._history = _History(base.vocab_size)
        self._pending: tuple[list[int], int] | None = None
        bias = np.zeros(base.vocab_size)
        for token, value in processors.logit_bias.items():
            bias[token] = value
        self._bias = bias if processors.logit_bias else None
        self._held = np.array(sorted(processors.held), np.int64)
        self._matcher: Matcher | None = None
        self._refused = False  # a committed token the grammar refused
        if processors.grammar is not None:
            tokenizer = tokenizer if tokenizer is not None else getattr(base, "tokenizer", None)
            if tokenizer is None:
                raise ProcessorError("grammar", "a grammar needs the base's tokenizer (the "
                                     "base has none: pass tokenizer=)")
            self._matcher = processors.grammar.matcher(tokenizer, base.vocab_size)

    def reset(self) -> None:
        self._history = _History(self._base.vocab_size)
        self._pending = None
        if self._matcher is not None:
            self._matcher.reset()
        self._refused = False
        self._base.reset()

    # -- the passes -------------------------------------------------------------------------

    def step(self, token: int, pos: int):
        row = self._base.step(token, pos)
        self._commit([int(token)])
        return self.process(row, [])

    def verify(self, tokens: Sequence[int], pos: int):
        rows = np.asarray(self._base.verify(tokens, pos))
        tokens = [int(t) for t in tokens]
        self._pending = (tokens, pos)
        if not tokens:
            return rows
        if self._matcher is None:
            return np.stack([self.process(rows[i], tokens[:i + 1])
                             for i in range(len(tokens))])
        out, taken, refused = [], 0, self._refused
        try:
            for i, token in enumerate(tokens):
                took, refused = self._take(token, i, refused)
                taken += took
                out.append(self.process(rows[i], tokens[:i + 1], refused=refused))
        finally:
            self._matcher.rollback(taken)
        return np.stack(out)

    def verify_last(self, tokens: Sequence[int], pos: int):
        # the loop trusts a wrapper's own verify_last (loop.prefill_batch); the base's when it
        # has one, else verify's last row
        inner = getattr(self._base, "verify_last", None)
        row = inner(tokens, pos) if callable(inner) else self._base.verify(tokens, pos)[-1]
        tokens = [int(t) for t in tokens]
        self._pending = (tokens, pos)
        if self._matcher is None:
            return self.process(np.asarray(row), tokens)
        taken, refused = 0, self._refused
        try:
            for i, token in enumerate(tokens):  # a prefill is the prompt: normally none
                took, refused = self._take(token, i, refused)
                taken += took
            return self.process(np.asarray(row), tokens, refused=refused)
        finally:
            self._matcher.rollback(taken)

    def _take(self, token: int, i: int, refused: bool) -> tuple[int, bool]:
        """Token `i` of a pass into the grammar's matcher, if it is generated and nothing
        before it was refused: (1, False) when taken (the caller rolls it back), (0, True)
        when the grammar refuses it (a draft: the rows after it are never read)."""
        if refused or self._history.length + i < self.prompt_len:
            return 0, refused
        if self._matcher.allows(token):
            self._matcher.consume(token)
            return 1, False
        return 0, True

    def commit_verify(self, n: int) -> None:
        self._base.commit_verify(n)
        if self._pending is not None:
            tokens, _ = self._pending
            self._pending = None
            self._commit(tokens[:int(n)])

    def _commit(self, tokens: list[int]) -> None:
        for token in tokens:
            generated = self._history.length >= self.prompt_len
            if generated and self._matcher is not None and not self._refused:
                if self._matcher.allows(token):
                    self._matcher.consume(token)
                else:
                    self._refused = True
            self._history.push(token, generated)

    # -- the knobs --------------------------------------------------------------------------

    def process(self, row, extra: Sequence[int], *, refused: bool = False) -> np.ndarray:
        """`row` (scoring the position after the committed prefix and `extra`) processed with
        that prefix's state, in the row's dtype. The grammar's matcher, if any, must stand
        after that prefix (verify consumes `extra` into it); `refused`: the grammar refused a
        token of `extra`, and the row is all MASKED (nothing reads it)."""
        p, h = self.processors, self._history
        raw = np.asarray(row)
        if not p.active:
            return raw
        if refused or self._refused:
            return np.full(raw.shape, MASKED, raw.dtype if raw.dtype.kind == "f" else float)
        out = raw.astype(np.float64)
        generated_before = h.length - self.prompt_len  # generated tokens committed
        extra_generated = [t for i, t in enumerate(extra)
                           if h.length + i >= self.prompt_len]
        if p.repetition_penalty != 1.0:
            seen = h.seen.copy()
            seen[list(extra)] = True
            hit = out[seen]
            out[seen] = np.where(hit > 0, hit / p.repetition_penalty, hit * p.repetition_penalty)
        if p.frequency_penalty or p.presence_penalty:
            counts = h.counts.copy()
            np.add.at(counts, extra_generated, 1)
            out -= p.frequency_penalty * counts + p.presence_penalty * (counts > 0)
        if self._bias is not None:
            out += self._bias
        generated = max(0, generated_before) + len(extra_generated)
        if self._matcher is not None and h.length + len(extra) >= self.prompt_len:
            allowed = self._matcher.allowed()
            if generated < p.min_tokens and self._held.size and allowed.sum() > np.count_nonzero(
                    allowed[self._held]):  # a complete text's stop is never held back
                out[self._held] = MASKED
            out[~allowed] = MASKED
        elif generated < p.min_tokens and self._held.size:
            out[self._held] = MASKED
        return out.astype(raw.dtype) if raw.dtype.kind == "f" else out
