"""A deterministic toy base model that makes every loop bug visible.

Its state is a 64-bit rolling hash of (token, position) over the whole committed history, so a
dropped, repeated, reordered or misplaced token changes every later choice. Its hidden row is
a function of that state, and its logits are a fixed random matrix times the hidden row. A batch
of rows is computed row by row with the same code as a step, so `verify` is bit-identical to
stepping (as a real base must be for the contract to hold).

It does not trust the loop: it counts steps, batches, batch rows, tokens consumed, calls at a
position other than the committed length (`bad_pos`), batches over its row limit (`over`), and
any other misuse (`misuse`), so that the conformance checks can read what happened. With
`strict=True` it refuses misuse instead (a `ContractError`, state unchanged), as a real base
must: that is the toy the base contract (docs/base-contract.md) holds.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from onebit.errors import ContractError

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB
_POS = 0xC2B2AE3D27D4EB4F

ROWS_SHAPES = ("prefix", "batch")
#: the kinds of call in `ToyBase.calls` that are verify batches (`verify_last` is one)
VERIFY_KINDS = ("verify", "verify_last")


def mix(state: int, token: int, pos: int) -> int:
    """The toy's recurrence: splitmix64's finaliser over (state, token, position)."""
    z = (state ^ ((token + 1) * _GOLDEN) ^ ((pos + 1) * _POS)) & _MASK
    z = ((z ^ (z >> 30)) * _C1) & _MASK
    z = ((z ^ (z >> 27)) * _C2) & _MASK
    return z ^ (z >> 31)


# rows at most this wide are remembered: 65536 of them are at most 32 MB
MEMO_WIDTH = 64


def _hidden_row(state: int, hidden: int, float32: bool) -> np.ndarray:
    """`ToyBase.hidden_of`'s row: splitmix64's finaliser over `hidden` lanes of the state."""
    lanes = np.arange(1, hidden + 1, dtype=np.uint64) * np.uint64(_GOLDEN)
    z = lanes + np.uint64(state)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_C1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_C2)
    z = z ^ (z >> np.uint64(31))
    if float32:  # 24 significant bits: exact in a float32
        row = (z >> np.uint64(40)).astype(np.float64) * (2.0**-23) - 1.0
    else:
        row = (z >> np.uint64(11)).astype(np.float64) * (2.0**-52) - 1.0
    return row


@functools.lru_cache(maxsize=1 << 16)
def _remembered_row(state: int, hidden: int, float32: bool) -> np.ndarray:
    """`_hidden_row`, read-only and remembered: a pure function of its arguments, and the
    contract replays the same histories in many arms (computing it was a fifth of `onebit
    prove`'s time)."""
    row = _hidden_row(state, hidden, float32)
    row.setflags(write=False)
    return row


@dataclass(frozen=True)
class ToyConfig:
    vocab_size: int = 64
    hidden: int = 16
    max_batch_rows: int = 8
    rows_shape: str = "prefix"
    seed: int = 0
    strict: bool = False  # refuse misuse (raise) instead of counting it
    max_prefill_rows: int | None = None  # a wider prefill batch; None: max_batch_rows
    # Every hidden value and logit a float32 holds exactly, so that what crosses the C ABI
    # (float32) is bit for bit what the checks compare (pytest_onebit/native).
    float32: bool = False
    # Opt-in `verify_last` (docs/contract.md): a loop's prefill then goes through it, so the
    # loop checks hold that path too. Off, the toy has no such attribute.
    verify_last: bool = False

    def __post_init__(self) -> None:
        if self.vocab_size < 2:
            raise ValueError(f"toy vocab_size must be >= 2, got {self.vocab_size}")
        if self.hidden < 1:
            raise ValueError(f"toy hidden must be >= 1, got {self.hidden}")
        if self.max_batch_rows < 1:
            raise ValueError(f"toy max_batch_rows must be >= 1, got {self.max_batch_rows}")
        if self.max_prefill_rows is not None and self.max_prefill_rows < 1:
            raise ValueError(f"toy max_prefill_rows must be >= 1 or None, got "
                             f"{self.max_prefill_rows}")
        if self.rows_shape not in ROWS_SHAPES:
            raise ValueError(
                f"toy rows_shape must be one of {ROWS_SHAPES}, got {self.rows_shape!r}"
            )


class ToyBase:
    """A `BaseModel` with a hash recurrence for a state and counters for every pass."""

    def __init__(
        self,
        vocab_size: int = 64,
        hidden: int = 16,
        max_batch_rows: int = 8,
        rows_shape: str = "prefix",
        seed: int = 0,
        strict: bool = False,
        max_prefill_rows: int | None = None,
        float32: bool = False,
        verify_last: bool = False,
    ) -> None:
        self.config = ToyConfig(vocab_size, hidden, max_batch_rows, rows_shape, seed, strict,
                                max_prefill_rows, float32, verify_last)
        if verify_last:  # an instance attribute, so `getattr(base, "verify_last")` finds it
            self.verify_last = self._verify_last
        rng = np.random.default_rng(seed)
        self._unembed = rng.standard_normal((vocab_size, hidden))
        self.reset()

    # -- the model --------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    def max_batch_rows(self) -> int:
        return self.config.max_batch_rows

    def max_prefill_rows(self) -> int:
        """The widest prefill batch: `max_prefill_rows` when configured, else the verify
        width. A verify of up to the wider of the two is exact (it is computed row by row)."""
        return self.config.max_prefill_rows or self.max_batch_rows()

    @property
    def widest(self) -> int:
        """The most rows one verify takes (what strict mode enforces), prefill or not."""
        return max(self.config.max_batch_rows, self.config.max_prefill_rows or 0)

    def hidden_of(self, state: int) -> np.ndarray:
        """The hidden row a state shows: `hidden` floats in [-1, 1) hashed from the state (a
        fresh array: the caller may write to it)."""
        width, float32 = self.config.hidden, self.config.float32
        if width <= MEMO_WIDTH:
            return _remembered_row(state, width, float32).copy()
        return _hidden_row(state, width, float32)

    def logits_of(self, hidden: np.ndarray) -> np.ndarray:
        logits = self._unembed @ hidden
        return logits.astype(np.float32).astype(np.float64) if self.config.float32 else logits

    # -- BaseModel --------------------------------------------------------------------------

    def reset(self) -> None:
        self.state = 0
        self.committed: list[int] = []
        self._last_row = self.hidden_of(0)
        self._pending: tuple[list[int], list[int], np.ndarray] | None = None
        self._last_rows = np.zeros((0, self.config.hidden))
        # counters (since the last reset)
        self.steps = 0
        self.batches = 0
        self.batch_rows = 0
        self.consumed = 0
        self.bad_pos = 0
        self.over = 0
        self.misuse: list[str] = []
        self.misplaced: list[str] = []  # one line per pass at a wrong position
        self.calls: list[tuple[str, int, int]] = []  # (kind, pos, rows)

    def _check_token(self, token: int, where: str) -> int:
        token = int(token)
        if not 0 <= token < self.config.vocab_size:
            raise ContractError(
                f"toy base got token {token} in {where}, outside [0, {self.config.vocab_size})",
                culprit="loop",
            )
        return token

    def _check_pos(self, pos: int, kind: str) -> None:
        if self.config.strict:
            self._refuse_misuse(pos, kind)
        if self._pending is not None:
            self.misuse.append(f"{kind} at {pos} while a verify batch was not committed")
            self._pending = None
        if pos != len(self.committed):
            self.bad_pos += 1
            self.misplaced.append(f"{kind} at position {pos} with {len(self.committed)} committed")

    def _refuse_misuse(self, pos: int, kind: str) -> None:
        """Strict mode: what the lax toy counts, refused before anything changes."""
        if self._pending is not None:
            raise ContractError(f"toy base: {kind} at {pos} while a verify batch was not "
                                "committed", culprit="loop", pos=pos)
        if pos != len(self.committed):
            raise ContractError(f"toy base: {kind} at position {pos} with "
                                f"{len(self.committed)} committed", culprit="loop", pos=pos)

    def step(self, token: int, pos: int) -> np.ndarray:
        token = self._check_token(token, "step")
        self._check_pos(pos, "step")
        self.calls.append(("step", pos, 1))
        self.steps += 1
        self.state = mix(self.state, token, pos)
        self.committed.append(token)
        self.consumed += 1
        self._last_row = self.hidden_of(self.state)
        return self.logits_of(self._last_row)

    def verify(self, tokens: Sequence[int], pos: int) -> np.ndarray:
        tokens = [self._check_token(t, "verify") for t in tokens]
        if not tokens:
            raise ContractError("toy base got an empty verify batch", culprit="loop", pos=pos)
        if self.config.strict and len(tokens) > self.widest:
            raise ContractError(f"toy base: verify of {len(tokens)} rows; the widest it takes "
                                f"is {self.widest}", culprit="loop", pos=pos)
        self._check_pos(pos, "verify")
        self.calls.append(("verify", pos, len(tokens)))
        self.batches += 1
        self.batch_rows += len(tokens)
        if len(tokens) > self.widest:
            self.over += 1
        states, rows = [], []
        state = self.state
        for i, token in enumerate(tokens):
            state = mix(state, token, pos + i)
            states.append(state)
            rows.append(self.hidden_of(state))
        hidden = np.stack(rows)
        self._pending = (tokens, states, hidden)
        return np.stack([self.logits_of(row) for row in rows])

    def _verify_last(self, tokens: Sequence[int], pos: int) -> np.ndarray:
        """`verify(tokens, pos)[-1]` (commit with `commit_verify`, as after `verify`); the call
        is recorded as ("verify_last", pos, rows), a verify for every count."""
        logits = self.verify(tokens, pos)
        kind, at, rows = self.calls[-1]
        self.calls[-1] = ("verify_last", at, rows)
        return logits[-1].copy()

    def commit_verify(self, n: int) -> None:
        if self._pending is None:
            if self.config.strict:
                raise ContractError(f"toy base: commit_verify({n}) with no verify batch "
                                    "pending", culprit="loop")
            self.misuse.append(f"commit_verify({n}) with no verify batch pending")
            return
        tokens, states, hidden = self._pending
        self._pending = None
        if not 0 <= n <= len(tokens):
            raise ContractError(
                f"commit_verify({n}) on a batch of {len(tokens)} rows", culprit="loop"
            )
        if n:
            self.state = states[n - 1]
            self._last_row = hidden[n - 1]
        self.committed.extend(tokens[:n])
        self.consumed += n
        self._last_rows = hidden[:n] if self.config.rows_shape == "prefix" else hidden

    def last_hidden(self) -> np.ndarray:
        return self._last_row.copy()

    def last_hidden_rows(self) -> np.ndarray:
        return self._last_rows.copy()

    # -- for the checks ---------------------------------------------------------------------

    def passes_from(self, pos: int) -> tuple[int, int, int]:
        """(steps, batches, batch rows) of the passes that started at `pos` or later: with
        the prompt's length, the decode's passes, the prefill left out."""
        calls = [(kind, rows) for kind, at, rows in self.calls if at >= pos]
        batches = [rows for kind, rows in calls if kind in VERIFY_KINDS]
        return len(calls) - len(batches), len(batches), sum(batches)

    def too_wide(self, prompt_len: int) -> list[str]:
        """The verifies wider than the loop may send: over `max_prefill_rows()` in the
        prefill (a batch starting inside the prompt), over `max_batch_rows()` after it."""
        out = []
        for kind, pos, rows in self.calls:
            prefill = pos < prompt_len
            limit = self.max_prefill_rows() if prefill else self.max_batch_rows()
            if kind in VERIFY_KINDS and rows > limit:
                what = "max_prefill_rows()" if prefill else "max_batch_rows()"
                out.append(f"a verify of {rows} rows at position {pos} ({what} = {limit})")
        return out

    def replay(self, tokens: Sequence[int]) -> ToyBase:
        """A fresh toy of the same config with `tokens` stepped one by one from position 0."""
        twin = ToyBase(**vars(self.config))
        for pos, token in enumerate(tokens):
            twin.step(token, pos)
        return twin

    def rows_of(self, tokens: Sequence[int]) -> np.ndarray:
        """The hidden row of each position when `tokens` are stepped one by one."""
        twin = ToyBase(**vars(self.config))
        rows = []
        for pos, token in enumerate(tokens):
            twin.step(token, pos)
            rows.append(twin.last_hidden())
        return np.stack(rows) if rows else np.zeros((0, self.config.hidden))
