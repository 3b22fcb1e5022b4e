"""The host reference forward of the Gemma 4 text model, as a `BaseModel` (docs/gemma4.md).

The math, in the order it runs for R tokens at positions pos .. pos+R-1, as transformers'
`Gemma4ForCausalLM` writes it (`models/gemma4/modeling_gemma4.py`):

    e = embed[tokens] * sqrt(H)                                    embedding scaling
    PLE (per-layer embeddings, when hidden_size_per_layer_input P > 0), [R, L, P]:
        token part    t = ple_table[tokens] * sqrt(P)
        context part  c = norm_P(per_layer_model_projection @ e * H^-1/2)
        ple = (c + t) * 2^-1/2
    x = e; for each layer l:
        x += norm(attn(norm(x)))                                    post-attention norm
        x += norm(mlp(norm(x)))       mlp = down(gelu_tanh(gate(h)) * up(h))
        x += norm(per_layer_projection @ (gelu_tanh(per_layer_input_gate @ x) * ple[l]))
        x *= layer_scalar
    hidden = norm(x); logits = lm_head @ hidden; logits = cap * tanh(logits / cap) if capped

Every norm is RMSNorm with a plain weight, `x / sqrt(mean(x^2) + eps) * w`. Attention: q, k, v
projections; q_norm / k_norm (RMSNorm over the head, one weight for all heads) before RoPE; v
gets a weightless RMSNorm; the scale is 1 (the norms set the size); GQA. Sliding layers see the
last `sliding_window` positions (the query's own included) and rotate all of a head with their
RoPE; global layers see every position, may have a wider head, and use "proportional" RoPE
(only the first pairs rotate). On global layers with `attention_k_eq_v` the values are the raw
keys (no v_proj). The last `num_kv_shared_layers` layers compute no keys or values: they read
the cache of the last earlier layer of their type.

Variants change named hooks (onebit/models/gemma3.py, gemma2.py): the norm factor, the layer
scalars, the value norm, the q/k norms (`qk_norm`) and attention logit soft-capping
(`attention_softcap`: each row's float64 scores become `cap * tanh(scores / cap)` before its
softmax, elementwise, so a verify row keeps stepping's bits).

Batch invariance is achieved as in qwen3.py: a verify runs the step's code on R rows, products
go through kernels.py (each row by one fixed formula), attention runs row by row on exactly the
positions a step at that row's position would see (gathered in position order), and the rest is
elementwise or reduces within a row. So a verify row, and the state `commit_verify(n)` leaves,
are bit-identical to stepping.

State. Each layer that owns its K/V has a cache: a global layer's grows with the sequence (its
valid length is the committed length); a sliding layer's is a ring of `sliding_window +
max_batch_rows()` slots holding position p in slot p % capacity. That capacity makes rollback
free: a verify of R <= max_batch_rows rows at pos overwrites only positions below
pos - sliding_window, which no row of this pass and no later pass can see, so `commit_verify(n)`
has nothing to undo, even when the batch crosses the window's edge.

Weight cache. Every weight is prepared once (WeightStore). The PLE weights (each layer's gate
and projection, the model projection, and the 32-row band of the PLE table that holds a token)
are prepared once and kept too; `ONEBIT_PLE_PER_TOKEN=1` (or `ple_per_token=True`) prepares
them again on every use instead: the slow arm of the A/B in benchmarks/gemma4_ple_ab.py, which
must give the same bits.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from onebit.backends import Backend
from onebit.models.decoder import DEFAULT_MAX_BATCH_ROWS, LM_HEAD, DecoderBase, Pass
from onebit.models.gemma4_config import MODEL_TYPES, SLIDING, Gemma4Config
from onebit.models.registry import Family
from onebit.models.weights import WeightStore

PLE_ENV = "ONEBIT_PLE_PER_TOKEN"
PLE_TABLE = "model.embed_tokens_per_layer.weight"
PLE_PROJECTION = "model.per_layer_model_projection.weight"
BAND_ROWS = 32  # rows of the PLE table prepared together: one Q4NX block row

_GELU_C = math.sqrt(2.0 / math.pi)


def ple_per_token_from_env() -> bool:
    """True when `ONEBIT_PLE_PER_TOKEN` asks for the PLE weights to be prepared every token."""
    return os.environ.get(PLE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """transformers' "gelu_pytorch_tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    t = x.dtype.type
    return t(0.5) * x * (t(1.0) + np.tanh(t(_GELU_C) * (x + t(0.044715) * (x * x * x))))


class _RopeTable:
    """cos / sin of each position's angles for one set of inverse frequencies, one row per
    position, each computed alone (position * freqs in float64, rounded to the compute dtype)
    the first time a pass needs it: a row's bits never depend on which pass filled it."""

    def __init__(self, inv_freq: list[float], dtype: np.dtype) -> None:
        self.inv_freq = np.asarray(inv_freq, dtype=np.float64)
        self.dtype = dtype
        self.cos = np.zeros((0, len(inv_freq)), dtype)
        self.sin = np.zeros((0, len(inv_freq)), dtype)

    def rows(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        filled = self.cos.shape[0]
        if end > filled:
            positions = range(filled, max(end, 2 * filled, 64))
            cos = [np.cos(p * self.inv_freq).astype(self.dtype) for p in positions]
            sin = [np.sin(p * self.inv_freq).astype(self.dtype) for p in positions]
            self.cos = np.concatenate([self.cos, np.stack(cos)])
            self.sin = np.concatenate([self.sin, np.stack(sin)])
        return self.cos[start:end], self.sin[start:end]

    def apply(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Rotate-half RoPE over the whole head for R rows at pos .. pos+R-1 (`x`: [R, heads,
        D]); pairs with frequency 0 pass through unchanged (cos 1, sin 0)."""
        half = x.shape[2] // 2
        cos, sin = self.rows(pos, pos + x.shape[0])
        cos, sin = cos[:, None, :], sin[:, None, :]
        x1, x2 = x[:, :, :half], x[:, :, half:]
        out = np.empty(x.shape, self.dtype)
        np.subtract(x1 * cos, x2 * sin, out=out[:, :, :half])
        np.add(x2 * cos, x1 * sin, out=out[:, :, half:])
        return out


@dataclass(frozen=True)
class _Run:
    """Rows `rows` of a pass: one sequence's tokens at positions pos .. pos + len - 1, whose
    keys and values live in the caches `k` / `v` (layer -> `[Hkv, capacity, D]`): the model's
    own, or one sequence's of a `GemmaSequences`."""

    rows: slice
    pos: int
    k: dict
    v: dict


# the most rows one sequence may bring to a pass of a `GemmaSequences` unless told: the batch
# engine's widest pass (its default max_rows), so any prefill chunk or verify of it fits
SEQUENCE_ROWS = 64


class GemmaSequences:
    """K / V caches for `sequences` independent sequences on a Gemma model's weights (shared,
    not copied), for `sequence_rows`: each sequence's caches shaped as the model's own, with
    sliding rings of window + `rows` slots (so a sequence may bring up to `rows` rows to a
    pass; the module docstring says why that makes rollback free) and global caches that
    grow. The model's own state is never touched."""

    def __init__(self, model: Gemma4Model, sequences: int, rows: int = SEQUENCE_ROWS) -> None:
        for name, value in (("sequences", sequences), ("rows", rows)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.model = model
        self.sequences = sequences
        self.rows = rows
        self.k: list[dict[int, np.ndarray]] = []
        self.v: list[dict[int, np.ndarray]] = []
        for _ in range(sequences):
            k, v = model.empty_caches(rows)
            self.k.append(k)
            self.v.append(v)

    def free(self, sequence: int) -> None:
        """Forget everything sequence `sequence` holds: its caches as new."""
        self.k[sequence], self.v[sequence] = self.model.empty_caches(self.rows)

    def kv_bytes_per_position(self) -> int:
        """Bytes of keys and values one position of one sequence takes, at most (every layer
        that owns its K/V counted, though a sliding layer's ring stops growing)."""
        c, itemsize = self.model.config, self.model.dtype.itemsize
        return 2 * sum(c.kv_heads[layer] * c.head_dims[layer] * itemsize
                       for layer in range(c.num_hidden_layers) if c.owns_kv(layer))


class Gemma4Model(DecoderBase):
    """A Gemma 4 text forward in numpy, implementing `onebit.BaseModel`.

    The BaseModel plumbing (argument checks, step / verify / commit_verify, layer taps, the
    final norm, the embedding row a head reads) is `DecoderBase`'s; this class implements its
    hooks (`reset`, `forward`, `finish_logits`) with its own layer, attention, caches and PLE.
    """

    def __init__(self, config: Gemma4Config, weights: WeightStore, *,
                 max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS, kernel: str = "auto",
                 backend: str | Backend = "host", ple_per_token: bool | None = None) -> None:
        self._bind(config, weights, max_batch_rows, kernel, backend)
        self.ple_per_token = ple_per_token_from_env() if ple_per_token is None else ple_per_token
        c, t = config, self.dtype.type
        self._norms = {name: self.norm_factor(name) for name in weights.names()
                       if name.endswith("norm.weight")}
        self._scalars = self.layer_scalars()
        # the scales transformers keeps as float32 buffers or Python floats, in the compute dtype
        self._embed_scale = t(math.sqrt(c.hidden_size))
        self._ple_scales = (t(math.sqrt(c.hidden_size_per_layer_input)),
                            t(c.hidden_size ** -0.5), t(2.0 ** -0.5))
        self._cap = None if c.final_logit_softcapping is None else t(c.final_logit_softcapping)
        # the query's scale before its dot products (1 here: the q/k norms set the size)
        self._q_scale = None if c.attention_scale == 1 else t(c.attention_scale)
        # attention soft-capping, applied to the float64 scores of each row (elementwise)
        cap = self.attention_softcap()
        self._attn_cap = None if cap is None else np.float64(cap)
        self._ropes: dict[tuple[str, int], _RopeTable] = {}
        for layer, kind in enumerate(c.layer_types):
            key = (kind, c.head_dims[layer])
            if key not in self._ropes:
                self._ropes[key] = _RopeTable(c.inv_freq(layer), self.dtype)
        self._ple_bands: dict[int, np.ndarray] = {}
        self._taps: tuple[int, ...] = ()
        self.reset()

    # -- what a variant changes (onebit/models/gemma3.py) ---------------------------------------

    value_norm = True  # the values get a weightless RMSNorm
    qk_norm = True  # q_norm / k_norm before RoPE (Gemma 2 has none)

    def attention_softcap(self) -> float | None:
        """Attention logit soft-capping: the scores become `cap * tanh(scores / cap)` before
        the softmax (Gemma 2); None: no capping."""
        return None

    def norm_factor(self, name: str) -> np.ndarray:
        """The factor a norm weight multiplies by: the weight itself."""
        return self.weights.get(name)

    def layer_scalars(self) -> list[np.ndarray] | None:
        """Each layer's output scalar (None: no scalars)."""
        return [self.weights.get(f"model.layers.{i}.layer_scalar")
                for i in range(self.config.num_hidden_layers)]

    # -- state -----------------------------------------------------------------------------------

    def reset(self) -> None:
        self.reset_committed()
        self._k, self._v = self.empty_caches()

    def empty_caches(self, rows: int | None = None
                     ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """Empty K and V caches of one sequence: for each layer that owns its K/V, a sliding
        layer's ring of window + `rows` slots (default max_batch_rows; see the module
        docstring), a global layer's 64 slots, which grow."""
        c = self.config
        slack = self._max_rows if rows is None else rows
        k: dict[int, np.ndarray] = {}
        v: dict[int, np.ndarray] = {}
        for layer in range(c.num_hidden_layers):
            if c.owns_kv(layer):
                slots = c.sliding_window + slack if c.layer_types[layer] == SLIDING else 64
                shape = (c.kv_heads[layer], slots, c.head_dims[layer])
                k[layer] = np.zeros(shape, self.dtype)
                v[layer] = np.zeros(shape, self.dtype)
        return k, v

    def visible_kv(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """`[Hkv, n, D]` keys and values the next step at the committed length L reads in
        `layer` (its own cache or the one it shares), in position order: positions
        L - sliding_window + 1 .. L - 1 on a sliding layer, 0 .. L - 1 on a global one."""
        end = self._length  # the next query sits at `end` and sees up to `end` itself
        return self._window(self.config.kv_sources[layer], self._first_visible(layer, end + 1),
                            end)

    # -- the forward -------------------------------------------------------------------------------

    def forward(self, tokens: list[int], pos: int) -> Pass:
        run = _Run(slice(0, len(tokens)), pos, self._k, self._v)
        hidden, tapped = self._rows(tokens, [run], self._taps)
        logits = self.finish_logits(self._linear(LM_HEAD, self.head_rows(hidden)))
        return Pass(list(tokens), pos, logits, hidden, tapped, [])

    def _rows(self, tokens: list[int], runs: list[_Run],
              taps: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The final-normed hidden rows `[R, H]` of `tokens`, each run of them at its positions
        with its own caches (written here), and the outputs of the `taps` layers
        `[R, len(taps), H]`: every row by the same operations whatever the runs."""
        c, R = self.config, len(tokens)
        for run in runs:
            self._ensure_capacity(run.pos + run.rows.stop - run.rows.start, run.k, run.v)
        x = np.stack([np.asarray(self.weights.embedding_row(t), self.dtype) for t in tokens])
        x = x * self._embed_scale
        ple = self._per_layer_inputs(tokens, x) if c.ple else None
        tapped: dict[int, np.ndarray] = {}
        for layer in range(c.num_hidden_layers):
            x = self._layer(layer, x, runs, ple)
            if layer in taps:
                tapped[layer] = x
        hidden = self._rmsnorm(x, self._norms["model.norm.weight"])
        return hidden, (np.stack([tapped[layer] for layer in taps], axis=1) if taps
                        else np.zeros((R, 0, c.hidden_size), self.dtype))

    # -- several sequences at once -----------------------------------------------------------

    def sequence_stack(self, sequences: int, rows: int = SEQUENCE_ROWS) -> GemmaSequences:
        """Caches of their own for `sequences` independent sequences on this model's weights,
        each taking up to `rows` rows a pass, for `sequence_rows` (the batch engine's slots).
        The model's own state is not touched."""
        return GemmaSequences(self, sequences, rows)

    def sequence_rows(self, stack: GemmaSequences, tokens, positions, sequences, *,
                      logits_of: np.ndarray | None = None, taps: tuple[int, ...] = ()):
        """Rows of several sequences in one pass over the weights: token i at `positions[i]`
        of sequence `sequences[i]` of `stack` (`sequence_stack`), its K / V written there, a
        sequence's rows in position order with every earlier position already written, at most
        the stack's `rows` of them (its sliding rings hold one such batch past the window).
        Returns `(logits, hidden, tapped)` as the compiled stack's `sequence_rows` does: the
        logits of the rows `logits_of` picks (default all), every row's final-normed hidden
        row and the `taps` layers' outputs. Each row's bits are those a step of that sequence
        alone gives: the products and norms treat rows apart, and a row's attention reads its
        own sequence's positions in order."""
        tokens = list(tokens)
        positions = [int(p) for p in positions]
        sequences = [int(s) for s in sequences]
        if not len(tokens) == len(positions) == len(sequences):
            raise ValueError(f"{len(tokens)} tokens, {len(positions)} positions and "
                             f"{len(sequences)} sequences: one of each a row")
        runs: list[_Run] = []
        start = 0
        for i in range(1, len(tokens) + 1):
            if (i < len(tokens) and sequences[i] == sequences[start]
                    and positions[i] == positions[i - 1] + 1):
                continue
            seq = sequences[start]
            if not 0 <= seq < stack.sequences:
                raise ValueError(f"sequence {seq} is not one of the stack's {stack.sequences}")
            if i - start > stack.rows:
                raise ValueError(f"{i - start} rows of sequence {seq} in one pass; the stack "
                                 f"takes at most {stack.rows} a sequence")
            runs.append(_Run(slice(start, i), positions[start], stack.k[seq], stack.v[seq]))
            start = i
        hidden, tapped = self._rows(tokens, runs, tuple(taps))
        rows = hidden if logits_of is None else hidden[logits_of]
        return (self.finish_logits(self._linear(LM_HEAD, self.head_rows(rows))), hidden,
                tapped)

    def _layer(self, layer: int, x: np.ndarray, runs: list[_Run],
               ple: np.ndarray | None) -> np.ndarray:
        p, n = f"model.layers.{layer}.", self._norms
        h = self._rmsnorm(x, n[p + "input_layernorm.weight"])
        attended = self._attention(layer, h, runs)
        x = x + self._rmsnorm(attended, n[p + "post_attention_layernorm.weight"])
        h = self._rmsnorm(x, n[p + "pre_feedforward_layernorm.weight"])
        x = x + self._rmsnorm(self._mlp(p, h), n[p + "post_feedforward_layernorm.weight"])
        if ple is not None:  # the per-layer input, after the MLP residual
            gate = gelu_tanh(self._ple_linear(p + "per_layer_input_gate.weight", x))
            out = self._ple_linear(p + "per_layer_projection.weight",
                               gate * ple[:, layer])
            x = x + self._rmsnorm(out, n[p + "post_per_layer_input_norm.weight"])
        return x if self._scalars is None else x * self._scalars[layer]

    def _mlp(self, p: str, h: np.ndarray) -> np.ndarray:
        gate, up = self._linears((p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"), h)
        return self._linear(p + "mlp.down_proj.weight", gelu_tanh(gate) * up)

    def finish_logits(self, logits: np.ndarray) -> np.ndarray:
        """Final logit soft-capping, `cap * tanh(logits / cap)`, when configured: the forward
        and `lm_head_logits` both end with it (bit for bit the same)."""
        if self._cap is None:
            return logits
        return np.tanh(logits / self._cap) * self._cap

    # -- per-layer embeddings ------------------------------------------------------------------

    def _per_layer_inputs(self, tokens: list[int], embedded: np.ndarray) -> np.ndarray:
        """`[R, L, P]`: the token part and the context part of the PLE, combined."""
        c, R = self.config, len(tokens)
        L, P = c.num_hidden_layers, c.hidden_size_per_layer_input
        token_scale, projection_scale, input_scale = self._ple_scales
        token_part = np.stack([self._ple_row(t) for t in tokens]).reshape(R, L, P) * token_scale
        context = self._ple_linear(PLE_PROJECTION, embedded) * projection_scale
        context = self._rmsnorm(context.reshape(R, L, P),
                                self._norms["model.per_layer_projection_norm.weight"])
        return (context + token_part) * input_scale

    def _ple_per_token(self) -> bool:
        return self.ple_per_token or self.weights.unpack_per_token

    def _ple_weight(self, name: str) -> np.ndarray:
        """A PLE gate / projection weight: from the cache, or prepared afresh per token."""
        return self.weights.unpack(name) if self._ple_per_token() else self.weights.get(name)

    def _ple_linear(self, name: str, rows: np.ndarray) -> np.ndarray:
        """Rows times a PLE gate / projection weight on the backend; with the per-token switch
        the backend prepares it again for this product (the A/B's slow arm)."""
        return self.backend.linear(name, self._ple_weight, rows,
                                   resident=not self._ple_per_token())

    def _ple_row(self, token: int) -> np.ndarray:
        """The PLE table's row of `token` (`[L * P]`), from its 32-row band: a band is prepared
        the first time one of its tokens is seen and kept (or prepared again every time)."""
        band, row = divmod(token, BAND_ROWS)
        if self._ple_per_token():
            return self.weights.row_band(PLE_TABLE, band)[row]
        rows = self._ple_bands.get(band)
        if rows is None:
            rows = self._ple_bands[band] = self.weights.row_band(PLE_TABLE, band)
        return rows[row]

    # -- attention -------------------------------------------------------------------------------

    def _attention(self, layer: int, h: np.ndarray, runs: list[_Run]) -> np.ndarray:
        c = self.config
        a = f"model.layers.{layer}.self_attn."
        R, Hq, D = h.shape[0], c.num_attention_heads, c.head_dims[layer]
        rope = self._ropes[c.layer_types[layer], D]
        source = c.kv_sources[layer]
        # q, k and v of the same rows in one call: the int8 kernel quantises h once for them
        names = (a + "q_proj.weight",)
        if source == layer:
            names += (a + "k_proj.weight",) + (() if c.values_are_keys(layer)
                                               else (a + "v_proj.weight",))
        projected = self._linears(names, h)
        q = projected[0].reshape(R, Hq, D)
        if self.qk_norm:
            q = self._rmsnorm(q, self._norms[a + "q_norm.weight"])
        q = np.concatenate([rope.apply(q[run.rows], run.pos) for run in runs])
        if self._q_scale is not None:
            q = q * self._q_scale
        if source == layer:
            self._write_kv(layer, projected[1:], runs, rope)
        Hkv = c.kv_heads[source]
        q = q.reshape(R, Hkv, Hq // Hkv, D)
        out = np.empty(q.shape, self.dtype)
        at = [(run, i) for run in runs for i in range(run.rows.start, run.rows.stop)]
        for run, i in at:  # row i reads what a step of its sequence would, in the same order
            end = run.pos + i - run.rows.start + 1
            keys, values = self._window(source, self._first_visible(layer, end), end, run)
            scores = np.matmul(q[i], keys.transpose(0, 2, 1)).astype(np.float64)
            if self._attn_cap is not None:  # elementwise on this row's scores only
                scores = np.tanh(scores / self._attn_cap) * self._attn_cap
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            out[i] = np.matmul(scores, values.astype(np.float64))
        return self._linear(a + "o_proj.weight", out.reshape(R, Hq * D))

    def _write_kv(self, layer: int, projected: list[np.ndarray], runs: list[_Run],
                  rope: _RopeTable) -> None:
        """Normalise and rotate the keys and values of R rows (`projected`: the k projection,
        and the v one unless the values are the keys) into the layer's caches, each run's at
        its positions in its own caches (all rows first; each row then reads only its own
        sequence's past)."""
        c = self.config
        a = f"model.layers.{layer}.self_attn."
        R, Hkv, D = projected[0].shape[0], c.kv_heads[layer], c.head_dims[layer]
        raw_k = projected[0].reshape(R, Hkv, D)
        raw_v = raw_k if c.values_are_keys(layer) else projected[1].reshape(R, Hkv, D)
        normed = (self._rmsnorm(raw_k, self._norms[a + "k_norm.weight"]) if self.qk_norm
                  else raw_k)
        v = (raw_v / np.sqrt((raw_v * raw_v).mean(axis=-1, keepdims=True) + c.rms_norm_eps)
             if self.value_norm else raw_v)
        for run in runs:
            k = rope.apply(normed[run.rows], run.pos)
            n = run.rows.stop - run.rows.start
            slots = np.arange(run.pos, run.pos + n) % run.k[layer].shape[1]
            run.k[layer][:, slots] = k.transpose(1, 0, 2)
            run.v[layer][:, slots] = v[run.rows].transpose(1, 0, 2)

    def _first_visible(self, layer: int, end: int) -> int:
        """The first position a query at end - 1 sees in `layer`."""
        if self.config.layer_types[layer] == SLIDING:
            return max(0, end - self.config.sliding_window)
        return 0

    def _window(self, source: int, start: int, end: int,
                run: _Run | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Positions start .. end-1 of a cache (the model's own, or `run`'s sequence's),
        `[Hkv, end - start, D]`, in position order."""
        K, V = (self._k, self._v) if run is None else (run.k, run.v)
        K, V = K[source], V[source]
        if self.config.layer_types[source] != SLIDING:
            return K[:, start:end], V[:, start:end]
        slots = np.arange(start, end) % K.shape[1]
        return K[:, slots], V[:, slots]

    def _ensure_capacity(self, length: int, k: dict, v: dict) -> None:
        """Grow the global layers' caches `k` / `v` to hold `length` positions (rings never
        grow)."""
        for layer, K in k.items():
            if self.config.layer_types[layer] == SLIDING or length <= K.shape[1]:
                continue
            size = max(length, 2 * K.shape[1])
            for cache in (k, v):
                grown = np.zeros((K.shape[0], size, K.shape[2]), self.dtype)
                grown[:, : K.shape[1]] = cache[layer]
                cache[layer] = grown


# ---------------------------------------------------------------------------------------------
# The family (the registry lists it)


def build_gemma4(config: Gemma4Config, weights: WeightStore, *, max_batch_rows: int,
                 max_prefill_rows: int | None = None, kernel: str = "auto",
                 backend: str | Backend = "host", ple_per_token: bool | None = None
                 ) -> Gemma4Model:
    """A Gemma 4 forward. It prefills in batches of `max_batch_rows` and refuses a wider
    `max_prefill_rows`: its sliding-window cache holds that many rows past the window."""
    if max_prefill_rows is not None and max_prefill_rows != max_batch_rows:
        raise ValueError(f"max_prefill_rows = {max_prefill_rows!r}: a Gemma 4 model "
                         f"prefills in batches of max_batch_rows ({max_batch_rows})")
    return Gemma4Model(config, weights, max_batch_rows=max_batch_rows, kernel=kernel,
                       backend=backend, ple_per_token=ple_per_token)


def _tiny(**overrides):
    from onebit.models.gemma4_fabricate import tiny_gemma4_config

    return tiny_gemma4_config(**overrides)


def _random(config: Gemma4Config, seed: int = 0):
    from onebit.models.gemma4_fabricate import random_gemma4_weights

    return random_gemma4_weights(config, seed)


GEMMA4 = Family(
    name="gemma4",
    model_types=MODEL_TYPES,
    read_config=lambda raw, source: Gemma4Config.from_dict(raw, source=source),
    shapes=Gemma4Config.expected_shapes,
    build=build_gemma4,
    tiny_config=_tiny,
    random_weights=_random,
    doc="the Gemma 4 text model: sliding and global layers, per-layer embeddings, shared K/V",
)
