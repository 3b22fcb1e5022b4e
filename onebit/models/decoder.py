"""The decoder base every model family builds on: the `BaseModel` plumbing, written once.

`DecoderBase` holds what does not depend on a family's math: argument checks, `step` /
`verify` / `commit_verify` over one `Pass` of R rows, the committed length, the last hidden
row(s), layer taps, the products through the backend (`_linear`, with a projection bias
wherever the family's shapes list one) and RMSNorm. A family (qwen3.py, gemma4.py, llama.py)
subclasses it and implements its named hooks, never its private plumbing:

- `reset()`: the family's caches, then `self.reset_committed()` for the shared state;
- `forward(tokens, pos) -> Pass`: the math for R rows at pos .. pos+R-1; it may write K/V rows
  at those positions (the committed length says which are valid) but must leave everything
  else as it was, so that `commit_verify(n)` can keep any prefix;
- `position_limit()`: the first position it cannot compute exactly (default: none);
- `finish_logits(logits)`: what the lm_head's output goes through (default: nothing; Gemma 4
  soft-caps), applied by `lm_head_logits` as by the forward;
- the forward's lm_head multiplies `self.head_rows(hidden)`: every row, or the last alone when
  the call is `verify_last` (the loop's prefill, which needs the last row's scores only).

`_commit` keeps row n-1's recurrent state (`Pass.gdn`) in `self._gdn`: a family without
recurrent layers leaves both empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from onebit.backends import Backend, make_backend
from onebit.models.blocks import BlockWeight
from onebit.models.errors import ModelInputError
from onebit.models.weights import WeightStore

DEFAULT_MAX_BATCH_ROWS = 8
#: The widest prefill batch by default: a prompt goes through in batches of this many rows,
#: each reading the weights once, so wider is faster (benchmarks/prefill_ab.py). The bound is
#: memory: a batch holds R rows of activations and attention scores, and a Qwen3.5 verify keeps
#: one GDN state snapshot per row for a partial commit it never makes in a prefill.
DEFAULT_MAX_PREFILL_ROWS = 64
LM_HEAD = "lm_head"  # the backend's key for the lm_head (tied to the embedding or not)

@dataclass
class Pass:
    """What one forward of R rows produced, before any of it is committed."""

    tokens: list[int]
    pos: int
    logits: np.ndarray  # [R, vocab]
    hidden: np.ndarray  # [R, H], after the final norm
    taps: np.ndarray  # [R, len(taps), H], output of the tapped layers
    gdn: list[list]  # per recurrent layer (Qwen3.5's GDN), its state after each row


def rows_option(value: object, name: str) -> int:
    """A row-count option (`max_batch_rows`, `max_prefill_rows`): an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


class DecoderBase:
    """The `onebit.BaseModel` plumbing a family's forward plugs into (see the module
    docstring for the hooks). A family's constructor calls `self._bind(...)` first and
    `self.reset()` last."""

    _taps: tuple[int, ...] = ()
    _gdn: list = []

    # -- hooks -------------------------------------------------------------------------------------

    def forward(self, tokens: list[int], pos: int) -> Pass:
        """The family's math for R rows (see the module docstring)."""
        raise NotImplementedError

    def position_limit(self) -> int | None:
        """The first position this forward cannot compute exactly (None: no limit); a pass
        reaching it is refused with `ModelInputError`. A sliding-window family whose window
        is not implemented says where the window starts to matter."""
        return None

    def finish_logits(self, logits: np.ndarray) -> np.ndarray:
        """What the lm_head's output goes through before it is a logit (default: nothing)."""
        return logits

    def reset_committed(self) -> None:
        """Forget every committed token: the shared state a family's `reset()` clears."""
        self._length = 0  # committed tokens
        self._pending: Pass | None = None
        self._last_hidden = np.zeros(self.config.hidden_size, self.dtype)
        self._last_rows = np.zeros((0, self.config.hidden_size), self.dtype)
        self._tapped: list[np.ndarray] = []  # one [len(taps), H] per committed token

    # -- BaseModel -------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def layer_count(self) -> int:
        return self.config.num_hidden_layers

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    def max_batch_rows(self) -> int:
        return self._max_rows

    def max_prefill_rows(self) -> int:
        """The most rows one prefill batch takes: a `verify` of up to this many rows is exact
        too (the loop sends it only for the prompt, committed whole)."""
        return self._prefill_rows

    def step(self, token: int, pos: int) -> np.ndarray:
        """Run one token at `pos` (the committed length) and commit it; logits for pos + 1."""
        tokens = self._check_tokens([token], pos, "step")
        result = self.forward(tokens, pos)
        self._commit(result, 1)
        return result.logits[0]

    def verify(self, tokens: Sequence[int], pos: int) -> np.ndarray:
        """Run `tokens` at pos .. pos+n-1 provisionally; row i scores position pos + i + 1."""
        tokens = self._check_tokens(tokens, pos, "verify")
        if len(tokens) > self._prefill_rows:
            raise ModelInputError(
                f"verify got {len(tokens)} rows; max_batch_rows() is {self._max_rows} and "
                f"max_prefill_rows() {self._prefill_rows}"
            )
        self._pending = self.forward(tokens, pos)
        return self._pending.logits.copy()

    def verify_last(self, tokens: Sequence[int], pos: int) -> np.ndarray:
        """`verify(tokens, pos)[-1]`, bit for bit, computing the lm_head for the last row only
        (a prefill batch needs no other row's scores; the hidden rows are all kept for
        `last_hidden_rows` and the head). Commit with `commit_verify` as after `verify`. Every
        family's `forward` asks `head_rows` which rows its lm_head multiplies."""
        self._last_only = True
        try:
            logits = self.verify(tokens, pos)
        finally:
            self._last_only = False
        return logits[-1]

    def commit_verify(self, n: int) -> None:
        """Keep the first n rows of the last verify: KV length and GDN state as of row n-1."""
        if self._pending is None:
            raise ModelInputError(f"commit_verify({n}) with no verify batch pending")
        pending, self._pending = self._pending, None
        if (isinstance(n, bool) or not isinstance(n, int | np.integer)
                or not 0 <= n <= len(pending.tokens)):
            raise ModelInputError(f"commit_verify({n}) on a batch of {len(pending.tokens)} rows")
        self._commit(pending, int(n))

    def last_hidden(self) -> np.ndarray:
        """The final-normed hidden row of the last committed token (what lm_head reads)."""
        return self._last_hidden.copy()

    def last_hidden_rows(self) -> np.ndarray:
        """The committed prefix of the last verify's hidden rows, `[n, H]`."""
        return self._last_rows.copy()

    # -- beyond BaseModel ----------------------------------------------------------------------

    @property
    def committed_length(self) -> int:
        return self._length

    def embed_row(self, token: int) -> np.ndarray:
        """The (unscaled) embedding of `token`, `[H]`."""
        self._check_token(token, "embed_row")
        return np.array(self.weights.embedding_row(int(token)), dtype=self.dtype)

    def lm_head_logits(self, hidden: np.ndarray) -> np.ndarray:
        """Logits of final-normed hidden rows (`[H]` -> `[V]`, `[R, H]` -> `[R, V]`); the same
        product, bit for bit, that the forward ends with."""
        hidden = np.asarray(hidden, dtype=self.dtype)
        if hidden.shape[-1:] != (self.config.hidden_size,) or hidden.ndim > 2:
            raise ModelInputError(
                f"lm_head_logits needs [H] or [R, H] rows with H = "
                f"{self.config.hidden_size}; got shape {hidden.shape}"
            )
        rows = np.ascontiguousarray(hidden.reshape(-1, self.config.hidden_size))
        logits = self.finish_logits(self._linear(LM_HEAD, rows))
        return logits[0] if hidden.ndim == 1 else logits

    def final_norm(self, rows: np.ndarray) -> np.ndarray:
        """The final RMSNorm the forward applies before its lm_head, on `[R, H]` residual
        rows (a DFlash draft runs its block through it)."""
        rows = np.asarray(rows, dtype=self.dtype)
        if rows.ndim != 2 or rows.shape[1] != self.config.hidden_size:
            raise ModelInputError(
                f"final_norm needs [R, H] rows with H = {self.config.hidden_size}; got shape "
                f"{rows.shape}"
            )
        return self._rmsnorm(rows, self._norms["model.norm.weight"])

    def set_layer_taps(self, layer_ids: Sequence[int]) -> None:
        """Record, for every token committed from now on, the hidden output (the residual
        stream after the layer, before any final norm) of these layers."""
        ids = []
        for layer in layer_ids:
            if (
                isinstance(layer, bool)
                or not isinstance(layer, int | np.integer)
                or not (0 <= layer < self.layer_count)
            ):
                raise ModelInputError(
                    f"layer tap {layer!r} is not a layer id in [0, {self.layer_count})"
                )
            ids.append(int(layer))
        self._taps = tuple(ids)
        self._tapped = []

    @property
    def layer_taps(self) -> tuple[int, ...]:
        """The layers whose outputs are recorded (`set_layer_taps`)."""
        return self._taps

    def tapped_rows(self) -> np.ndarray:
        """`[T, len(taps), H]`: the tapped layers' outputs for each token committed since the
        taps were set (or the last reset), in order."""
        if not self._tapped:
            return np.zeros((0, len(self._taps), self.config.hidden_size), self.dtype)
        return np.stack(self._tapped)

    def tapped_tail(self, n: int) -> np.ndarray:
        """`[n, len(taps), H]`: the tapped rows of the last `n` committed tokens (a head that
        reads only the newest rows need not stack them all, as `tapped_rows` does)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= len(self._tapped):
            raise ModelInputError(f"tapped_tail({n!r}): {len(self._tapped)} tokens have tapped "
                                  "rows")
        if n == 0:
            return np.zeros((0, len(self._taps), self.config.hidden_size), self.dtype)
        return np.stack(self._tapped[-n:])

    def lm_head_subset(self, token_ids: Sequence[int]):
        """A product `f(rows [R, H]) -> [R, len(token_ids)]`: the lm_head's scores of these
        tokens only, in their order, through the same kernel as the forward's lm_head (its
        block rows gathered once, here) and `finish_logits`. A draft head with a reduced
        vocabulary scores through it."""
        ids = self._subset_ids(token_ids, "lm_head_subset")
        weight = self._weight(LM_HEAD)
        if isinstance(weight, BlockWeight):
            from onebit.models import int8_kernel

            rows_of = _block_rows_of(weight, ids)

            def product(rows):
                return self.finish_logits(int8_kernel.block_rows(rows_of, rows))
        else:
            dense = np.ascontiguousarray(self.weights.get(self.weights.lm_head_name())[ids].T,
                                         dtype=self.dtype)

            def product(rows):
                return self.finish_logits(np.asarray(rows, self.dtype) @ dense)
        return product

    def lm_head_subset_blocks(self, token_ids: Sequence[int]) -> BlockWeight | None:
        """The lm_head's block rows of these tokens, in their order, when its scores are those
        rows' products and nothing more (the lm_head kept in blocks, no `finish_logits` of the
        family's own): what a compiled draft head multiplies by itself. None otherwise."""
        ids = self._subset_ids(token_ids, "lm_head_subset_blocks")
        weight = self._weight(LM_HEAD)
        if (not isinstance(weight, BlockWeight)
                or type(self).finish_logits is not DecoderBase.finish_logits):
            return None
        return _block_rows_of(weight, ids)

    def _subset_ids(self, token_ids: Sequence[int], where: str) -> np.ndarray:
        ids = np.asarray(token_ids)
        if (ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu"
                or ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ModelInputError(f"{where} needs a non-empty list of token ids in "
                                  f"[0, {self.vocab_size})")
        return ids

    # -- checks ----------------------------------------------------------------------------------

    def _check_token(self, token: object, where: str) -> int:
        if isinstance(token, bool) or not isinstance(token, int | np.integer):
            raise ModelInputError(f"{where}: token {token!r} is not an integer token id")
        if not 0 <= int(token) < self.vocab_size:
            raise ModelInputError(
                f"{where}: token id {int(token)} is outside the vocabulary [0, {self.vocab_size})"
            )
        return int(token)

    def _check_tokens(self, tokens: Sequence[int], pos: int, where: str) -> list[int]:
        checked = [self._check_token(t, where) for t in tokens]
        if not checked:
            raise ModelInputError(f"{where}: no tokens")
        if pos != self._length:
            raise ModelInputError(
                f"{where} at position {pos}, but {self._length} tokens are committed "
                f"(the next position is {self._length})"
            )
        if self._limit is not None and pos + len(checked) > self._limit:
            raise ModelInputError(
                f"{where}: positions {pos} .. {pos + len(checked) - 1} reach {self._limit}, where "
                f"this {self.config.model_type} model's sliding window starts to matter; "
                f"attention past the window is not implemented"
            )
        if self._pending is not None:  # a new pass forgets an uncommitted verify
            self._pending = None
        return checked

    # -- commit ---------------------------------------------------------------------------------

    def _commit(self, result: Pass, n: int) -> None:
        # KV: the rows at pos .. pos+n-1 are already in the caches; the valid length says
        # which are committed. GDN: row n-1's snapshot is exactly the stepped state.
        if n:
            for slot, states in enumerate(result.gdn):
                self._gdn[slot] = states[n - 1]
            self._last_hidden = result.hidden[n - 1].copy()
            self._tapped.extend(result.taps[i] for i in range(n))
        self._length = result.pos + n
        self._last_rows = result.hidden[:n].copy()

    # -- products ----------------------------------------------------------------------------------

    def _bind(self, config, weights: WeightStore, max_batch_rows: int, kernel: str,
              backend: str | Backend) -> None:
        """What every family sets first: the config, the
        weights, the batch width (checked) and the backend its products run on."""
        self.config = config
        self.weights = weights
        self.dtype = weights.dtype
        self._max_rows = rows_option(max_batch_rows, "max_batch_rows")
        self._prefill_rows = max_batch_rows  # a forward that can take wider ones says so
        # The heavy products go through the backend (docs/device.md), by the weight's name,
        # so a device backend prepares each weight once; the rest of the forward is host code.
        self.backend = make_backend(backend, kernel=kernel,
                                    resident=not getattr(weights, "unpack_per_token", False))
        self.backend.attach(self)
        if getattr(self.backend, "reads_blocks", False):
            weights.check_block_form()  # Q4NX on the integer kernel: refused now, not mid-run
        self.kernel = getattr(self.backend, "kernel", self.backend.name)
        # Projection biases (Qwen2's q/k/v): added wherever the family's shapes list one.
        self._biases = {name[: -len("bias")] + "weight" for name in weights.names()
                        if name.endswith(".bias")}
        self._limit = self.position_limit()
        self._last_only = False  # verify_last: the lm_head for the last row only

    def head_rows(self, hidden: np.ndarray) -> np.ndarray:
        """The final-normed rows the forward's lm_head multiplies: all of them, or the last
        alone inside `verify_last` (each row's product is batch-invariant, so the last row
        alone has the same bits)."""
        return hidden[-1:] if self._last_only else hidden

    def _linear(self, name: str, rows: np.ndarray) -> np.ndarray:
        """`[R, out]`: rows times the weight `name` (LM_HEAD: the lm_head), on the backend."""
        out = self.backend.linear(name, self._weight, rows)
        if name in self._biases:  # after the product, as transformers' nn.Linear adds it
            out = out + self.weights.get(name[: -len("weight")] + "bias")
        return out

    def _linears(self, names: tuple[str, ...], rows: np.ndarray) -> list[np.ndarray]:
        """`_linear` of the same rows by each weight of `names`, in one call to the backend
        (which may share their common work: the int8 kernel quantises the rows once)."""
        outs = self.backend.linears(names, self._weight, rows)
        return [out + self.weights.get(name[: -len("weight")] + "bias")
                if name in self._biases else out for name, out in zip(names, outs, strict=True)]

    def _weight(self, name: str):
        """The weight `name` in the form the backend reads: blocks when it multiplies blocks
        (the int8 kernel: a ggml q8_0 / q4_0 / q4_1 weight, or a Q4NX one as the same values
        in q4_1 / q4_0 blocks), a Q4NX weight packed when it multiplies packed weights (the
        host's numba kernel), else the float array."""
        name = self.weights.lm_head_name() if name == LM_HEAD else name
        if getattr(self.backend, "reads_blocks", False) and self.weights.block_kind(name):
            return self.weights.block_weight(name)
        if getattr(self.backend, "reads_q4nx", False) and self.weights.kind(name) == "q4nx":
            return self.weights.packed(name)
        return self.weights.get(name)

    def _rmsnorm(self, x: np.ndarray, factor: np.ndarray) -> np.ndarray:
        """RMSNorm over the last axis; `factor` is w (Qwen3) or 1 + w (Qwen3.5)."""
        eps = self.config.rms_norm_eps
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * factor


def _block_rows_of(weight: BlockWeight, ids: np.ndarray) -> BlockWeight:
    """The rows `ids` of a block weight, gathered into one of their own."""
    return BlockWeight(weight.kind, (int(ids.size), weight.shape[1]),
                       np.ascontiguousarray(weight.codes[ids]),
                       np.ascontiguousarray(weight.d[ids]),
                       np.ascontiguousarray(weight.m[ids]) if weight.m.size
                       else weight.m[: ids.size])
