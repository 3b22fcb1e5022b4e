"""The draft / verify / commit loop.

`run()` is the speculative loop of `docs/contract.md`; `onebit.reference.greedy()` is the
reference it must equal token for token, written in its own module with no code shared with
this one (only the result types of `onebit.result`). Both leave the base with prompt + emitted
committed, so one more `step()` continues where decoding stopped.

Imports are absolute on purpose: the conformance suite and the mutant catalogue load copies of
this file as stand-alone modules.
"""

from __future__ import annotations

import contextlib
import operator
import time
from collections.abc import Callable, Sequence

import numpy as np

from onebit.errors import (
    BaseContractError,
    DecodeError,
    HeadContractError,
    PartError,
)
from onebit.fallback import Fallback, FallbackWatch
from onebit.protocols import BaseModel, DraftHead, Drafts
from onebit.reference import greedy  # noqa: F401 (its old home; reference never imports loop)
from onebit.result import OnToken, RunResult, RunStats  # noqa: F401 (re-exported)
from onebit.sampling import Rng, Sampling, is_greedy, make_rng, one_hot_rows, warp

# ---------------------------------------------------------------------------------------------
# Arguments


def _as_int(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def check_request(
    base: BaseModel, prompt: Sequence[int], *, max_tokens: int, k: int | None = None
) -> list[int]:
    """Validate the arguments of a decode before the base is touched; return the prompt as a
    list of ints. `k` is None for plain decode, which drafts nothing. Raises `ValueError`
    naming the bad value."""
    if isinstance(prompt, str | bytes):
        raise ValueError(f"prompt must be a sequence of token ids, got {type(prompt).__name__}")
    tokens = [_as_int(t, f"prompt[{i}]") for i, t in enumerate(prompt)]
    if not tokens:
        raise ValueError("prompt is empty: a decode needs at least one prompt token")
    vocab = base.vocab_size
    for i, t in enumerate(tokens):
        if not 0 <= t < vocab:
            raise ValueError(f"prompt[{i}] = {t} is outside the vocabulary [0, {vocab})")
    if _as_int(max_tokens, "max_tokens") < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    if k is not None and _as_int(k, "k") < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return tokens


# ---------------------------------------------------------------------------------------------
# What the loop reads from the base: checked where it is read


def _argmax_row(logits: np.ndarray, vocab: int, pos: int) -> int:
    """The base's choice for position `pos` from one row of scores."""
    return int(np.argmax(_check_row(logits, vocab, pos)))


def _check_row(logits: np.ndarray, vocab: int, pos: int) -> np.ndarray:
    """One row of the base's scores for position `pos`, checked: shape and finiteness."""
    row = np.asarray(logits)
    if row.shape != (vocab,):
        raise BaseContractError(
            f"base returned logits of shape {row.shape} scoring position {pos}; "
            f"expected ({vocab},)",
            pos=pos,
        )
    if row.dtype.kind not in "fiu":  # bools, strings, objects are no scores to argmax
        raise BaseContractError(f"base returned logits of dtype {row.dtype} scoring position "
                                f"{pos}; expected numbers", pos=pos)
    if not np.isfinite(row).all():
        raise BaseContractError(f"base returned non-finite logits scoring position {pos}", pos=pos)
    return row


def _check_rows(logits: np.ndarray, n: int, vocab: int, pos: int) -> np.ndarray:
    """The scores of a verify of `n` rows at `pos`, checked: shape and finiteness."""
    rows = np.asarray(logits)
    if rows.shape != (n, vocab):
        raise BaseContractError(
            f"base.verify of {n} rows at position {pos} returned logits of shape {rows.shape}; "
            f"expected ({n}, {vocab})",
            pos=pos,
        )
    if rows.dtype.kind not in "fiu":
        raise BaseContractError(f"base.verify at position {pos} returned logits of dtype "
                                f"{rows.dtype}; expected numbers", pos=pos)
    if not np.isfinite(rows).all():
        bad = int(np.flatnonzero(~np.isfinite(rows).all(axis=1))[0])
        raise BaseContractError(
            f"base.verify returned non-finite logits in row {bad}, scoring position "
            f"{pos + bad + 1}",
            pos=pos + bad + 1,
        )
    return rows


# ---------------------------------------------------------------------------------------------
# Faults: whatever stops a run, the caller learns what was emitted (docs/errors.md)


class _Part:
    """A base, head or consumer as the loop sees it: every call goes through, and whatever it
    raises that is not already a `DecodeError` becomes a `PartError` naming the part and the
    call, with the original as `__cause__` (so the run can attach what it emitted). Each
    method's wrapper is made once per run and kept, so a call costs one extra frame."""

    def __init__(self, part: object, name: str) -> None:
        self._part = part
        self._name = name

    def _guard(self, what: str, fn: Callable) -> Callable:
        culprit = self._name

        def call(*args: object) -> object:
            try:
                return fn(*args)
            except DecodeError:
                raise
            except Exception as error:
                raise PartError(f"{what} raised {type(error).__name__}: {error}",
                                culprit=culprit) from error

        return call

    def __getattr__(self, attr: str) -> object:
        value = self._guard(f"{self._name}.{attr}", getattr)(self._part, attr)
        if not callable(value):
            return value  # read each time: a property may change (vocab_size does not)
        call = self.__dict__[attr] = self._guard(f"{self._name}.{attr}()", value)
        return call


def _guarded(part: object, name: str) -> object:
    """`part` behind a `_Part`; a consumer (a plain callable) behind one guarded call."""
    if part is None:
        return None
    guard = _Part(part, name)
    return guard._guard(name, part) if name == "consumer" else guard  # type: ignore[arg-type]


def _settled(error: BaseException, emitted: list[int], pos: int) -> BaseException:
    """What a decode that stopped on `error` raises: a `DecodeError` carrying `emitted` (what
    the base committed after the prompt). An exception the loop itself raised is wrapped
    (culprit "loop"); KeyboardInterrupt and SystemExit keep their type and get `emitted`."""
    if isinstance(error, DecodeError):
        error.emitted = list(emitted)
        error.pos = pos if error.pos is None else error.pos
        return error
    if not isinstance(error, Exception):
        with contextlib.suppress(AttributeError):  # a type that takes no attributes
            error.emitted = list(emitted)  # type: ignore[attr-defined]
        return error
    wrapped = PartError(f"the loop raised {type(error).__name__}: {error}", culprit="loop",
                        pos=pos)
    wrapped.emitted = list(emitted)
    return wrapped


def _prompt_rows(chunks: list[np.ndarray]) -> np.ndarray:
    """The prompt's hidden rows, given as `[n, H]` chunks in prompt order, as one `[P, H]`
    array; a chunk whose rows differ in shape from position 0's is the base's contract error,
    naming the first position of that chunk."""
    pos = 0
    for chunk in chunks:
        if chunk.ndim != 2 or chunk.shape[1:] != chunks[0].shape[1:]:
            raise BaseContractError(
                f"base's hidden rows for prompt position {pos} have shape {chunk.shape[1:]}; "
                f"expected 1-D rows like position 0's {chunks[0].shape[1:]}", pos=pos)
        pos += chunk.shape[0]
    return np.concatenate(chunks)


def _committed_rows(rows: object, count: int, pos: int) -> np.ndarray:
    """`base.last_hidden_rows()` after committing `count` rows at `pos`, checked to hold
    them: two-dimensional, at least `count` rows (it may hold the whole batch)."""
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[0] < count:
        raise BaseContractError(
            f"base.last_hidden_rows() has shape {rows.shape} after committing {count} rows; "
            f"it must have at least {count} rows (positions {pos}..{pos + count - 1})",
            pos=pos + (rows.shape[0] if rows.ndim == 2 else 0),
        )
    return rows


def _rows_limit(value: object, name: str) -> int:
    """A base's row limit (`max_batch_rows()`, `max_prefill_rows()`): an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise BaseContractError(f"base.{name}() returned {_short(value)}; expected an "
                                "integer >= 1")
    if value < 1:
        raise BaseContractError(f"base.{name}() is {value}; it must be >= 1")
    return int(value)


def _short(value: object) -> str:
    text = " ".join(repr(value).split())  # one line, however the value prints
    return text if len(text) <= 60 else text[:57] + "..."


def _drafts_of(proposed: object, pos: int) -> list:
    """`head.propose`'s answer as a list: None, a list, a tuple or a 1-D array of token ids.
    Anything else (an int, a 2-D array) is the head's contract error."""
    if proposed is None:
        return []
    if not (isinstance(proposed, list | tuple)
            or isinstance(proposed, np.ndarray) and proposed.ndim == 1):
        raise HeadContractError(
            f"head.propose returned {type(proposed).__name__} {_short(proposed)} for position "
            f"{pos + 1}; expected a list of token ids", pos=pos + 1)
    return list(proposed)


# ---------------------------------------------------------------------------------------------
# The loop


def _tell_sampling(head: DraftHead, sampling: Sampling | None, rng: Rng | None) -> None:
    """A sampling head learns how this run samples, after its reset: (None, None) on a greedy
    run, so a head that sampled in the last run drafts greedily in this one."""
    inner = head._part if isinstance(head, _Part) else head  # the guard would raise for a miss
    if callable(getattr(inner, "use_sampling", None)):
        head.use_sampling(sampling, rng)  # type: ignore[union-attr]


class _Decode:
    """One run's state: the cursor, what was emitted, and the counters."""

    sampling: Sampling | None = None  # greedy; a sampled run sets both (see _SampledDecode)
    rng: Rng | None = None

    def __init__(
        self,
        base: BaseModel,
        head: DraftHead | None,
        prompt: list[int],
        max_tokens: int,
        k: int,
        on_token: OnToken | None,
        fallback: Fallback | None = None,
    ) -> None:
        self.base = _guarded(base, "base")
        self.head = _guarded(head, "head")
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.k = k
        self.on_token = _guarded(on_token, "consumer")
        self.fallback = fallback
        self.watch: FallbackWatch | None = None  # set at prefill when there is a policy
        self.vocab = base.vocab_size
        self.result = RunResult()
        self.stats = self.result.stats
        self.tokens = self.result.tokens

    # -- emission ---------------------------------------------------------------------------

    def emit(self, token: int) -> bool:
        """Hand one token to the consumer; False when it asked to stop."""
        self.tokens.append(token)
        self.stats.emitted += 1
        if self.on_token is not None and self.on_token(token) is False:
            self.result.stopped = True
            return False
        return True

    def budget_left(self) -> int:
        return self.max_tokens - len(self.tokens)

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> RunResult:
        try:
            max_rows = _rows_limit(self.base.max_batch_rows(), "max_batch_rows")
            t1, pos = self.prefill(self.prefill_width(max_rows))
            two_pass = self.head is not None and bool(self.head.needs_last_hidden())
            while self.budget_left() > 0 and not self.result.stopped:
                self.stats.rounds += 1
                if self.head is None:
                    t1, pos = self.plain_step(t1, pos)
                    continue
                before = (self.stats.emitted, self.stats.steps, self.stats.batches,
                          self.stats.batch_rows, self.stats.drafts_asked, time.perf_counter())
                if two_pass:
                    t1, pos = self.two_pass_round(t1, pos, max_rows)
                else:
                    t1, pos = self.one_pass_round(t1, pos, max_rows)
                if self.watch is not None and self.falls_back(self.watch, before):
                    # The head is out of this run: no more drafts, and no more rows to keep
                    # its context (it would only cost time; the next run resets it).
                    self.head = None
                    self.stats.fallback_round = self.stats.rounds
                    self.stats.fallback_emitted = self.stats.emitted
        except BaseException as error:
            settled = _settled(error, self.tokens, len(self.prompt) + len(self.tokens))
            if settled is error:
                raise
            raise settled from error
        return self.result

    def falls_back(self, watch: FallbackWatch, before: tuple) -> bool:
        """Charge the round just run to the fallback policy; True when drafting stops."""
        emitted, steps, batches, rows, asked, started = before
        s = self.stats
        if s.drafts_asked == asked:  # the head was not asked: plain decode's cost, not counted
            return False
        cost = watch.policy.round_cost(
            steps=s.steps - steps, batches=s.batches - batches, batch_rows=s.batch_rows - rows,
            drafts_asked=s.drafts_asked - asked, seconds=time.perf_counter() - started,
            step_seconds=watch.step_seconds)
        return watch.losing_round(emitted=s.emitted - emitted, cost=cost)

    def prefill_width(self, max_rows: int) -> int:
        """The most prompt tokens one prefill batch takes: the base's `max_prefill_rows()`
        when it declares one, else `max_batch_rows()` (docs/contract.md, Prefill)."""
        inner = self.base._part  # type: ignore[union-attr]  # a miss is no fault: optional
        if not callable(getattr(inner, "max_prefill_rows", None)):
            return max_rows
        return _rows_limit(self.base.max_prefill_rows(), "max_prefill_rows")

    def prefill(self, width: int) -> tuple[int, int]:
        """Run the prompt through the base in batches of up to `width` tokens, each committed
        whole; the head gets every prompt row, in order, in one `commit_rows`. With a measured
        fallback the last prompt token is stepped instead, and that step's time is the unit
        rounds are charged in. Returns (t1, its position)."""
        self.base.reset()
        if self.head is not None:
            self.head.reset()
            _tell_sampling(self.head, self.sampling, self.rng)
        timed = self.fallback is not None and self.fallback.measured
        batched = len(self.prompt) - timed
        chunks: list[np.ndarray] = []
        for pos in range(0, batched, width):
            logits = self.prefill_batch(self.prompt[pos : min(pos + width, batched)], pos,
                                        chunks)
        step_seconds = 0.0
        if timed:
            started = time.perf_counter()
            logits = self.base.step(self.prompt[-1], batched)
            step_seconds = time.perf_counter() - started
            self.stats.prefill_steps += 1
            if self.head is not None:
                chunks.append(np.asarray(self.base.last_hidden())[None, :])
        if self.fallback is not None:
            self.watch = FallbackWatch(self.fallback, step_seconds)
        if self.head is not None:
            self.head.commit_rows(self.prompt, _prompt_rows(chunks), len(self.prompt))
        pos = len(self.prompt)
        return self.pick(logits, pos), pos

    def prefill_batch(self, tokens: list[int], pos: int, chunks: list[np.ndarray]) -> np.ndarray:
        """One prefill batch at `pos`, committed whole; its hidden rows go to `chunks` when
        there is a head. Returns the scores of its last row. Bad logits: the batch is dropped
        (what earlier batches committed stays) and the error names the position."""
        # a base with `verify_last` (optional, docs/contract.md) scores the last row only; a
        # wrapper that merely forwards it (__getattr__) to an inner base is not trusted with it,
        # since it would bypass the wrapper's own `verify`
        inner = self.base._part  # type: ignore[union-attr]
        last_only = getattr(getattr(inner, "verify_last", None), "__self__", None) is inner
        if last_only:
            logits = np.asarray(self.base.verify_last(tokens, pos))[None, :]
        else:
            logits = self.base.verify(tokens, pos)
        self.stats.prefill_batches += 1
        self.stats.prefill_rows += len(tokens)
        try:
            if last_only:
                rows = _check_rows(logits, 1, self.vocab, pos + len(tokens) - 1)
            else:
                rows = _check_rows(logits, len(tokens), self.vocab, pos)
        except BaseContractError:
            self.base.commit_verify(0)
            raise
        self.base.commit_verify(len(tokens))
        if self.head is not None:
            hidden = _committed_rows(self.base.last_hidden_rows(), len(tokens), pos)
            chunks.append(hidden[: len(tokens)])
        return rows[-1]

    def pick(self, logits: np.ndarray, pos: int) -> int:
        """The next token from the base's scores for `pos`: the argmax (greedy)."""
        return _argmax_row(logits, self.vocab, pos)

    def plain_step(self, t1: int, pos: int) -> tuple[int, int]:
        """Consume t1 with one step; the head gets its row."""
        logits = self.base.step(t1, pos)
        self.stats.steps += 1
        going = self.emit(t1)  # emitted once committed: a head that fails next loses nothing
        if self.head is not None:
            self.head.commit_rows([t1], np.asarray(self.base.last_hidden())[None, :], 1)
        after = pos + 1
        if not going:
            return t1, after  # the run ends: these logits are never read
        return self.pick(logits, after), after

    def step_t1(self, t1: int, pos: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """A two-pass round's first pass: step t1, emit it, hand the head its row. Returns the
        step's logits, the hidden after t1, and whether the consumer wants more."""
        logits = self.base.step(t1, pos)
        self.stats.steps += 1
        going = self.emit(t1)  # emitted once committed: a head that fails next loses nothing
        hidden = np.asarray(self.base.last_hidden())
        self.head.commit_rows([t1], hidden[None, :], 1)  # type: ignore[union-attr]
        return logits, hidden, going

    def propose(self, t1: int, pos: int, room: int, hidden: np.ndarray | None) -> list[int]:
        """Ask the head for up to `room` drafts; cut to the room and check each token."""
        return self.draft(t1, pos, room, hidden)[0]

    def draft(
        self, t1: int, pos: int, room: int, hidden: np.ndarray | None
    ) -> tuple[list[int], np.ndarray | None]:
        """The head's drafts (cut to the room, each token checked) and their `q` rows when it
        returned `Drafts` (None for a bare list: deterministic drafts)."""
        assert self.head is not None
        self.stats.drafts_asked += 1
        answer = self.head.propose(t1, pos, room, hidden)
        q = None
        if isinstance(answer, Drafts):
            answer, q = answer.tokens, answer.q
        drafts = _drafts_of(answer, pos)[:room]
        for slot, draft in enumerate(drafts):
            try:
                draft = None if isinstance(draft, bool) else operator.index(draft)
            except TypeError:
                draft = None
            if draft is None or not 0 <= draft < self.vocab:
                raise HeadContractError(
                    f"head proposed {drafts[slot]!r} for position {pos + 1 + slot} (slot {slot}), "
                    f"outside the vocabulary [0, {self.vocab})",
                    pos=pos + 1 + slot,
                )
            drafts[slot] = draft
        self.stats.proposed += len(drafts)
        return drafts, q

    def verify(self, tokens: list[int], pos: int) -> np.ndarray:
        """One provisional batch; returns the argmax of each row."""
        return np.argmax(self.verify_rows(tokens, pos), axis=1)

    def verify_rows(self, tokens: list[int], pos: int) -> np.ndarray:
        """One provisional batch; returns its checked scores. Bad logits: drop the batch
        (nothing of it is committed) and raise."""
        logits = self.base.verify(tokens, pos)
        self.stats.batches += 1
        self.stats.batch_rows += len(tokens)
        try:
            return _check_rows(logits, len(tokens), self.vocab, pos)
        except BaseContractError:
            self.base.commit_verify(0)
            raise

    def emit_and_commit(self, tokens: list[int]) -> int:
        """Emit `tokens` (the accepted part of the last verify) until the consumer stops; commit
        exactly the emitted ones in the base and tell the head. Returns how many."""
        count = 0
        try:
            for token in tokens:
                count += 1
                if not self.emit(token):
                    break
        finally:
            self.base.commit_verify(count)
            if self.head is not None:
                first = len(self.prompt) + len(self.tokens) - count  # the batch's position
                rows = _committed_rows(self.base.last_hidden_rows(), count, first)
                self.head.commit_rows(tokens, rows, count)
        return count

    def one_pass_round(self, t1: int, pos: int, max_rows: int) -> tuple[int, int]:
        """t1 and the drafts go through the base as one batch (docs/contract.md, one-pass)."""
        room = min(self.k, max_rows - 1, self.budget_left() - 1)
        drafts = self.propose(t1, pos, room, None) if room > 0 else []
        if not drafts:
            return self.plain_step(t1, pos)
        batch = [t1, *drafts]
        choices = self.verify(batch, pos)
        take = 0
        while take < len(drafts) and drafts[take] == choices[take]:
            take += 1
        count = self.emit_and_commit(batch[: take + 1])
        self.stats.accepted += count - 1
        return int(choices[count - 1]), pos + count

    def two_pass_round(self, t1: int, pos: int, max_rows: int) -> tuple[int, int]:
        """t1 is stepped first so the head can read the hidden after it; drafts that the step
        already rejects never reach a batch (docs/contract.md, two-pass)."""
        logits, hidden, going = self.step_t1(t1, pos)
        after = pos + 1
        if not going:
            return t1, after  # the run ends: these logits are never read
        b = _argmax_row(logits, self.vocab, after)
        room = min(self.k, max_rows, self.budget_left())
        drafts = self.propose(t1, pos, room, hidden) if room > 0 else []
        if not drafts or drafts[0] != b:
            return b, after
        choices = self.verify(drafts, after)
        take = 1
        while take < len(drafts) and drafts[take] == choices[take - 1]:
            take += 1
        count = self.emit_and_commit(drafts[:take])
        self.stats.accepted += count
        return int(choices[count - 1]), after + count


# ---------------------------------------------------------------------------------------------
# The sampled loop (docs/sampling.md): the same rounds, with the rejection rule of Leviathan et
# al. in place of "the draft equals the argmax". Every random decision goes through `rng`.


# How far a head's q row may sum from 1 (a float32 softmax is off by ~1e-7). A power of two
# (about 9.5e-7), so a row off by exactly the tolerance exists and the boundary is testable.
Q_SUM_TOLERANCE = 2.0**-20


def _judge(p: np.ndarray, q: np.ndarray, draft: int, rng: Rng) -> int | None:
    """One draft drawn from `q`, held to the target's `p`: None when it is accepted (with
    probability min(1, p(d) / q(d))), else the token drawn in its place from the residual
    norm(max(0, p - q)). Together the two keep the output distributed exactly as `p`."""
    if rng.accept(min(1.0, p[draft] / q[draft])):
        return None
    residual = np.maximum(p - q, 0.0)
    total = residual.sum()
    # total is 0 only when p == q, where a rejection has probability 0 (a rounding remnant)
    return rng.choice(residual / total if total > 0 else p)


class _SampledDecode(_Decode):
    """A sampled run: t1, the residual and the bonus are drawn from the warped scores; drafts
    are accepted by the rejection rule against the `q` rows they were drawn from."""

    def __init__(self, *args, sampling: Sampling, rng: Rng) -> None:
        super().__init__(*args)
        self.sampling = sampling
        self.rng = rng

    def p_row(self, logits: np.ndarray, pos: int) -> np.ndarray:
        """The target's distribution for position `pos` from one row of its scores."""
        return warp(_check_row(logits, self.vocab, pos), self.sampling)

    def pick(self, logits: np.ndarray, pos: int) -> int:
        """The next token, drawn from the warped scores for `pos`."""
        return int(self.rng.choice(self.p_row(logits, pos)))

    def draft(
        self, t1: int, pos: int, room: int, hidden: np.ndarray | None
    ) -> tuple[list[int], np.ndarray]:
        """The drafts and their `q` rows (one-hot for a bare list), each row checked."""
        drafts, q = super().draft(t1, pos, room, hidden)
        if q is None:
            return drafts, one_hot_rows(drafts, self.vocab)
        q = np.asarray(q, dtype=np.float64)
        if q.ndim != 2 or q.shape[0] < len(drafts) or q.shape[1] != self.vocab:
            raise HeadContractError(
                f"head returned q of shape {q.shape} with {len(drafts)} drafts at position "
                f"{pos + 1}; expected ({len(drafts)}, {self.vocab})", pos=pos + 1)
        q = q[: len(drafts)]
        for slot, token in enumerate(drafts):
            row = q[slot]
            if not (np.isfinite(row).all() and (row >= 0).all()
                    and abs(row.sum() - 1.0) <= Q_SUM_TOLERANCE and row[token] > 0):
                raise HeadContractError(
                    f"head's q row for slot {slot} (position {pos + 1 + slot}) is not a "
                    f"distribution with draft {token} in its support", pos=pos + 1 + slot)
        return drafts, q

    def judge_drafts(self, drafts: list[int], q: np.ndarray,
                     rows: np.ndarray) -> tuple[int, int]:
        """Hold `drafts` to `rows` of the target's scores (checked by `verify_rows`), row i
        scoring draft i and row len(drafts) the bonus. Returns (drafts accepted, next t1)."""
        for i, token in enumerate(drafts):
            replaced = _judge(warp(rows[i], self.sampling), q[i], token, self.rng)
            if replaced is not None:
                return i, int(replaced)
        bonus = len(drafts)
        return bonus, int(self.rng.choice(warp(rows[bonus], self.sampling)))

    def one_pass_round(self, t1: int, pos: int, max_rows: int) -> tuple[int, int]:
        """t1 and the drafts in one batch; row i scores draft i, the last row the bonus."""
        room = min(self.k, max_rows - 1, self.budget_left() - 1)
        drafts, q = self.draft(t1, pos, room, None) if room > 0 else ([], None)
        if not drafts:
            return self.plain_step(t1, pos)
        batch = [t1, *drafts]
        rows = self.verify_rows(batch, pos)
        take, following = self.judge_drafts(drafts, q, rows)
        count = self.emit_and_commit(batch[: take + 1])
        self.stats.accepted += count - 1
        return following, pos + count

    def two_pass_round(self, t1: int, pos: int, max_rows: int) -> tuple[int, int]:
        """t1 is stepped; its scores judge d0 before any batch, so only an accepted d0 reaches
        a verify, whose row i then scores draft i + 1 (the last row the bonus)."""
        logits, hidden, going = self.step_t1(t1, pos)
        after = pos + 1
        if not going:
            return t1, after  # the run ends: these logits are never read
        room = min(self.k, max_rows, self.budget_left())
        drafts, q = self.draft(t1, pos, room, hidden) if room > 0 else ([], None)
        if not drafts:
            return self.pick(logits, after), after
        replaced = _judge(self.p_row(logits, after), q[0], drafts[0], self.rng)
        if replaced is not None:
            return int(replaced), after
        rows = self.verify_rows(drafts, after)
        take, following = self.judge_drafts(drafts[1:], q[1:], rows)
        count = self.emit_and_commit(drafts[: take + 1])
        self.stats.accepted += count
        return following, after + count


def run(
    base: BaseModel,
    head: DraftHead | None,
    prompt: Sequence[int],
    *,
    max_tokens: int,
    k: int,
    on_token: OnToken | None = None,
    fallback: Fallback | None = None,
    sampling: Sampling | None = None,
    rng: Rng | None = None,
    seed: int | None = None,
) -> RunResult:
    """Decode up to `max_tokens` tokens after `prompt`, drafting up to `k` per round with
    `head` (None: plain decode). The tokens equal `greedy()`'s; only the cost differs.

    `fallback` (a `onebit.Fallback`) switches the run to plain steps, without the head, after
    consecutive rounds that cost more than they emit; `stats.fallback_round` says when.

    `sampling` (a `onebit.Sampling` with temperature > 0) samples instead: the output is then
    distributed exactly as `onebit.sample()`'s. Every random draw goes through `rng` (with
    `accept(prob)` and `choice(probs)`), by default a `SeededRng(seed)`; the same seed and k
    give the same text. `sampling=None` or temperature 0 is greedy, and ignores both."""
    if k is None:
        raise ValueError("k must be an integer, got None (plain decode is head=None)")
    tokens = check_request(base, prompt, max_tokens=max_tokens, k=k)
    if fallback is not None and not isinstance(fallback, Fallback):
        raise ValueError(f"fallback must be a onebit.Fallback or None, got {fallback!r}")
    if sampling is not None and not isinstance(sampling, Sampling):
        raise ValueError(f"sampling must be a onebit.Sampling or None, got {sampling!r}")
    source = make_rng(rng, seed)
    if is_greedy(sampling):
        return _Decode(base, head, tokens, max_tokens, k, on_token, fallback).run()
    decode = _SampledDecode(base, head, tokens, max_tokens, k, on_token, fallback,
                            sampling=sampling, rng=source)
    decode.result.seed = getattr(source, "seed", None)
    return decode.run()
