"""The host reference forward of Qwen3 and the Qwen3.5 hybrid, as a `BaseModel`.

The math, in the order it runs for a batch of R tokens at positions pos .. pos+R-1 (R = 1 for
a step, up to `max_batch_rows()` for a verify):

    x = embed[tokens]                                   (no scaling)
    for each layer:
        x += mixer(norm(x))        full attention, or the gated delta net (gdn.py)
        x += down(silu(gate(h)) * up(h)),  h = norm(x)
    hidden = norm(x);  logits = lm_head @ hidden        (lm_head tied to embed when configured)

Norms are RMSNorm, `x / sqrt(mean(x^2) + eps) * w`; in Qwen3.5 the stored weight is an offset
from 1, so the factor is `1 + w` (folded in once at load). Attention: q, k, v projections;
q_norm / k_norm (RMSNorm over head_dim, one weight for all heads) before rotate-half RoPE;
GQA (query head h reads kv head h // (Hq / Hkv)); causal softmax; scale 1/sqrt(D). Qwen3.5's
full attention also has a per-head output gate (`q_proj` gives `[q | gate]` per head; the
output is multiplied by sigmoid(gate)) and rotates only the first `partial_rotary_factor` of
each head.

Batch invariance: `verify` runs the same code as `step`, only with R rows, and no operation
lets one row's bits depend on another's or on R. Products go through the backend (host:
`kernels.py`; every backend computes each row the same way whatever R, docs/device.md),
attention and the GDN recurrence run row by row (row i sees the cache up to its own
position, exactly as a step at that position would), and everything else
is elementwise or reduces within a row. So after `verify` + `commit_verify(n)` the state, and
the next step's logits, are bit-identical to stepping the n tokens one by one.

State: per full-attention layer a KV cache `[Hkv, capacity, D]` whose valid length is the
committed length (rows a verify wrote past it are simply overwritten later); per GDN layer the
conv window and recurrent matrix, with one snapshot per verify row for `commit_verify`.
"""

from __future__ import annotations

import numpy as np

from onebit.backends import Backend
from onebit.models.config import FULL, ModelConfig
from onebit.models.decoder import (  # noqa: F401 (LM_HEAD and the defaults, re-exported)
    DEFAULT_MAX_BATCH_ROWS,
    DEFAULT_MAX_PREFILL_ROWS,
    LM_HEAD,
    DecoderBase,
    Pass,
    rows_option,
)
from onebit.models.gdn import GDNState, gated_norm, gdn_token, sigmoid, silu
from onebit.models.registry import Family
from onebit.models.weights import WeightStore, expected_shapes

_max, _sum = np.maximum.reduce, np.add.reduce  # what .max() / .sum() call, minus the wrapper


class Qwen3Model(DecoderBase):
    """A Qwen3 / Qwen3.5 forward in numpy, implementing `onebit.BaseModel`."""

    def __init__(
        self,
        config: ModelConfig,
        weights: WeightStore,
        *,
        max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS,
        kernel: str = "auto",
        backend: str | Backend = "host",
        max_prefill_rows: int | None = None,
        fused: bool | None = None,
    ) -> None:
        self._bind(config, weights, max_batch_rows, kernel, backend)
        # Any R is batch-invariant here (docs/forward.md), so a prompt may go through in
        # batches wider than a decode verify (at least as wide: a verify is a prefill too).
        wide = DEFAULT_MAX_PREFILL_ROWS if max_prefill_rows is None else max_prefill_rows
        self._prefill_rows = max(max_batch_rows, rows_option(wide, "max_prefill_rows"))
        c = config
        self._full_layers = [i for i, t in enumerate(c.layer_types) if t == FULL]
        self._gdn_layers = [i for i, t in enumerate(c.layer_types) if t != FULL]
        self._gdn_slot = {layer: n for n, layer in enumerate(self._gdn_layers)}
        self._kv_slot = {layer: n for n, layer in enumerate(self._full_layers)}
        # Norm factors: Qwen3.5 stores w with the factor being 1 + w (computed in the compute
        # dtype, as transformers does). Small, token-invariant: prepared once.
        self._norms: dict[str, np.ndarray] = {}
        for name in weights.names():
            if name.endswith("norm.weight") and "linear_attn.norm" not in name:
                w = weights.get(name)
                self._norms[name] = (1 + w).astype(self.dtype) if c.zero_centred_norms else w
        # RoPE frequencies over the rotated dims (all of D in Qwen3, a quarter in Qwen3.5).
        rot = c.rotary_dim
        self._inv_freq = self.rope_inv_freq()
        # cos / sin of each position's angles in the compute dtype, filled on first use of a
        # position (by `_rope_table`) and kept: they depend on the position only.
        self._rope_cos = np.zeros((0, rot // 2), self.dtype)
        self._rope_sin = np.zeros((0, rot // 2), self.dtype)
        self._rope_len = 0
        self._taps: tuple[int, ...] = ()
        # The compiled stack (fused.py): by default wherever it fits (the int8 kernel on a
        # dense model whose layer matrices are all in ggml blocks); fused=False keeps the
        # NumPy layers, fused=True insists.
        self._fused = None
        if fused is None or fused:
            from onebit.models import fused as fused_stack

            reason = fused_stack.unfit_reason(self)
            if reason is None:
                self._fused = fused_stack.FusedStack(self)
            elif fused:
                raise ValueError(f"fused=True, but this model cannot run the compiled stack: "
                                 f"{reason}")
        self.reset()

    # -- hooks (DecoderBase's, and the RoPE one a family on this forward may change) ----------

    def rope_inv_freq(self) -> np.ndarray:
        """The RoPE inverse frequencies, float64, one per rotated pair (`rotary_dim / 2`):
        `theta^(-2j / rot)`. Llama 3 stretches them (llama.py)."""
        rot = self.config.rotary_dim
        return 1.0 / (self.config.rope_theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot))

    def reset(self) -> None:
        c = self.config
        self.reset_committed()
        capacity = 64
        kv_shape = (c.num_key_value_heads, capacity, c.head_dim)
        self._k = [np.zeros(kv_shape, self.dtype) for _ in self._full_layers]
        self._v = [np.zeros(kv_shape, self.dtype) for _ in self._full_layers]
        self._gdn = [GDNState.zeros(c, self.dtype) for _ in self._gdn_layers]
        if self._fused is not None:
            self._fused.reset()

    # -- the forward -------------------------------------------------------------------------

    def forward(self, tokens: list[int], pos: int) -> Pass:
        if self._fused is not None:
            return self._fused_forward(tokens, pos)
        c, w = self.config, self.weights
        self._ensure_capacity(pos + len(tokens))
        x = np.stack([np.asarray(w.embedding_row(t), dtype=self.dtype) for t in tokens])
        gdn_states: list[list[GDNState]] = []
        taps: dict[int, np.ndarray] = {}
        for layer, kind in enumerate(c.layer_types):
            p = f"model.layers.{layer}."
            h = self._rmsnorm(x, self._norms[p + "input_layernorm.weight"])
            if kind == FULL:
                x = x + self._attention(layer, h, pos)
            else:
                out, states = self._gated_delta_net(layer, h)
                x = x + out
                gdn_states.append(states)
            h = self._rmsnorm(x, self._norms[p + "post_attention_layernorm.weight"])
            x = x + self._mlp(p, h)
            if layer in self._taps:
                taps[layer] = x
        hidden = self._rmsnorm(x, self._norms["model.norm.weight"])
        logits = self._linear(LM_HEAD, self.head_rows(hidden))
        tapped = (
            np.stack([taps[layer] for layer in self._taps], axis=1)
            if self._taps
            else np.zeros((len(tokens), 0, c.hidden_size), self.dtype)
        )
        return Pass(list(tokens), pos, logits, hidden, tapped, gdn_states)

    def _fused_forward(self, tokens: list[int], pos: int) -> Pass:
        """`forward` through the compiled stack: embed, every layer in one call (fused.py),
        then the final norm and the lm_head as the NumPy forward has them."""
        w = self.weights
        x = np.stack([np.asarray(w.embedding_row(t), dtype=np.float32) for t in tokens])
        self._rope_table(pos + len(tokens))
        x, tapped = self._fused.run(x, pos, self._rope_cos, self._rope_sin, self._taps)
        hidden = self._rmsnorm(x, self._norms["model.norm.weight"])
        logits = self._linear(LM_HEAD, self.head_rows(hidden))
        return Pass(list(tokens), pos, logits, hidden, tapped, [])

    # -- several sequences at once (the compiled stack only) -----------------------------------

    def sequence_stack(self, sequences: int):
        """A compiled stack on this model's weights (shared) with KV caches of its own for
        `sequences` independent sequences, for `sequence_rows`; None where this model runs
        no compiled stack. The model's own state is not touched."""
        return None if self._fused is None else self._fused.for_sequences(sequences)

    def sequence_rows(self, stack, tokens, positions, sequences, *,
                      logits_of: np.ndarray | None = None, taps: tuple[int, ...] = ()):
        """Rows of several sequences in one pass over the weights: token i at `positions[i]`
        of sequence `sequences[i]` of `stack` (`sequence_stack`), its K / V written there.
        Returns `(logits, hidden, tapped)`: the lm_head's logits of the rows `logits_of`
        picks (default all), every row's final-normed hidden row `[R, H]` and the outputs of
        the `taps` layers `[R, len(taps), H]`. Each row's bits are those a step of that
        sequence alone gives (the stack's rows are independent of the batch)."""
        positions = np.asarray(positions, np.int64)
        x = np.stack([np.asarray(self.weights.embedding_row(t), dtype=np.float32)
                      for t in tokens])
        if len(positions):
            self._rope_table(int(positions.max()) + 1)
        x, tapped = stack.run_rows(x, positions, sequences, self._rope_cos, self._rope_sin,
                                   tuple(taps))
        hidden = self._rmsnorm(x, self._norms["model.norm.weight"])
        rows = hidden if logits_of is None else hidden[logits_of]
        return self._linear(LM_HEAD, self.head_rows(rows)), hidden, tapped

    def _mlp(self, p: str, h: np.ndarray) -> np.ndarray:
        gate = self._linear(p + "mlp.gate_proj.weight", h)
        up = self._linear(p + "mlp.up_proj.weight", h)
        return self._linear(p + "mlp.down_proj.weight", silu(gate) * up)

    def _rope_table(self, end: int) -> None:
        """Make the cos / sin rows of positions 0 .. end-1 available. Each position's row is
        computed alone, by the same expressions (one position times the frequencies, cos and
        sin of that [rot/2] vector, rounded to the compute dtype) whichever pass first needs it,
        so its bits never depend on which other positions were computed with it."""
        if end <= self._rope_len:
            return
        if end > self._rope_cos.shape[0]:
            size = max(end, 2 * self._rope_cos.shape[0], 64)
            for name in ("_rope_cos", "_rope_sin"):
                grown = np.zeros((size, self._rope_cos.shape[1]), self.dtype)
                grown[: self._rope_len] = getattr(self, name)[: self._rope_len]
                setattr(self, name, grown)
        for position in range(self._rope_len, end):
            angles = position * self._inv_freq  # float64, then rounded to the compute dtype
            self._rope_cos[position] = np.cos(angles).astype(self.dtype)
            self._rope_sin[position] = np.sin(angles).astype(self.dtype)
        self._rope_len = end

    def _rope(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Rotate-half RoPE on the first `rotary_dim` dims of each head, for R rows at
        positions pos .. pos+R-1 (`x`: [R, heads, D]). Only elementwise products, sums and
        differences, each element rounded on its own: a row's bits do not depend on R."""
        rot = self.config.rotary_dim
        half = rot // 2
        R = x.shape[0]
        cos = self._rope_cos[pos : pos + R, None, :]  # [R, 1, rot/2], broadcast over heads
        sin = self._rope_sin[pos : pos + R, None, :]
        x1, x2 = x[:, :, :half], x[:, :, half:rot]
        out = np.empty(x.shape, self.dtype)
        np.subtract(x1 * cos, x2 * sin, out=out[:, :, :half])
        np.add(x2 * cos, x1 * sin, out=out[:, :, half:rot])
        if rot < x.shape[2]:
            out[:, :, rot:] = x[:, :, rot:]
        return out

    def _attention(self, layer: int, h: np.ndarray, pos: int) -> np.ndarray:
        c = self.config
        p = f"model.layers.{layer}.self_attn."
        R, Hq, Hkv, D = h.shape[0], c.num_attention_heads, c.num_key_value_heads, c.head_dim
        q = self._linear(p + "q_proj.weight", h)
        k = self._linear(p + "k_proj.weight", h).reshape(R, Hkv, D)
        v = self._linear(p + "v_proj.weight", h).reshape(R, Hkv, D)
        if c.gated_attention:  # per head: [q (D) | gate (D)]
            q = q.reshape(R, Hq, 2 * D)
            q, gate = q[:, :, :D], q[:, :, D:].reshape(R, Hq * D)
        q = q.reshape(R, Hq, D)
        if p + "q_norm.weight" in self._norms:  # Qwen3's q/k norms (the Llama family has none)
            q = self._rmsnorm(q, self._norms[p + "q_norm.weight"])
            k = self._rmsnorm(k, self._norms[p + "k_norm.weight"])
        self._rope_table(pos + R)
        group = Hq // Hkv
        q = self._rope(q, pos).reshape(R, Hkv, group, D)
        slot = self._kv_slot[layer]
        K, V = self._k[slot], self._v[slot]
        K[:, pos : pos + R] = self._rope(k, pos).transpose(1, 0, 2)  # all R rows at once
        V[:, pos : pos + R] = v.transpose(1, 0, 2)
        KT = K.transpose(0, 2, 1)  # [Hkv, D, capacity], a view
        T = pos + R
        # Scores of all rows in one [R, Hkv, g, T] array; row i's product fills only its own
        # positions 0 .. pos+i, the rest stays -inf, so the max, exp and division (elementwise
        # or exact, whatever the array) see row i's positions only. The products and the sums
        # (whose order depends on their length) run row by row, at the step's shapes.
        raw = np.full((R, Hkv, group, T), -np.inf, self.dtype)
        for i in range(R):
            np.matmul(q[i], KT[:, :, : pos + i + 1], out=raw[i, :, :, : pos + i + 1])
        scale = 1.0 / np.sqrt(D)  # a float64 scalar: the scores and probabilities are float64
        scores = np.multiply(raw, scale)
        np.subtract(scores, _max(scores, axis=-1, keepdims=True), out=scores)
        np.exp(scores, out=scores)
        sums = np.empty((R, Hkv, group, 1), scores.dtype)
        for i in range(R):
            _sum(scores[i, :, :, : pos + i + 1], axis=-1, keepdims=True, out=sums[i])
        np.divide(scores, sums, out=scores)
        # V as float64 once for all rows (exact), rather than a cast inside each row's product
        V64 = V[:, :T].astype(np.float64, copy=False)
        out = np.empty((R, Hkv, group, D), self.dtype)
        for i in range(R):  # row i reads positions 0 .. pos+i, as a step at pos+i would
            out[i] = np.matmul(scores[i, :, :, : pos + i + 1], V64[:, : pos + i + 1])
        out = out.reshape(R, Hq * D)
        if c.gated_attention:
            out = out * sigmoid(gate)
        return self._linear(p + "o_proj.weight", out)

    def _gated_delta_net(self, layer: int, h: np.ndarray) -> tuple[np.ndarray, list[GDNState]]:
        c, w = self.config, self.weights
        p = f"model.layers.{layer}.linear_attn."
        R, Hv, dv = h.shape[0], c.linear_num_value_heads, c.linear_value_head_dim
        qkv = self._linear(p + "in_proj_qkv.weight", h)
        z = self._linear(p + "in_proj_z.weight", h).reshape(R, Hv, dv)
        b = self._linear(p + "in_proj_b.weight", h)
        a = self._linear(p + "in_proj_a.weight", h)
        conv = w.get(p + "conv1d.weight")[:, 0, :]  # [C, K]
        a_log, dt_bias = w.get(p + "A_log"), w.get(p + "dt_bias")
        state = self._gdn[self._gdn_slot[layer]]
        states, core = [], np.empty((R, Hv, dv), self.dtype)
        for i in range(R):  # the recurrence is sequential; keep each row's state
            core[i], state = gdn_token(c, state, qkv[i], b[i], a[i], conv, a_log, dt_bias)
            states.append(state)
        normed = gated_norm(core, z, w.get(p + "norm.weight"), c.rms_norm_eps)
        out = self._linear(p + "out_proj.weight", normed.reshape(R, Hv * dv))
        return out, states

    def _ensure_capacity(self, length: int) -> None:
        for slot in range(len(self._k)):
            capacity = self._k[slot].shape[1]
            if length <= capacity:
                continue
            new = max(length, 2 * capacity)
            for cache in (self._k, self._v):
                grown = np.zeros((cache[slot].shape[0], new, cache[slot].shape[2]), self.dtype)
                grown[:, :capacity] = cache[slot]
                cache[slot] = grown


# ---------------------------------------------------------------------------------------------
# The two families this module's forward is (the registry lists them)


def _build(config: ModelConfig, weights: WeightStore, **options) -> Qwen3Model:
    return Qwen3Model(config, weights, **options)


def _family(name: str, model_types: tuple[str, ...], doc: str) -> Family:
    from onebit.models import qwen3_fabricate as fabricate

    return Family(
        name=name,
        model_types=model_types,
        read_config=lambda raw, source: ModelConfig.from_dict(raw, source=source),
        shapes=expected_shapes,
        build=_build,
        tiny_config=lambda **overrides: fabricate.tiny_qwen3_config(name, **overrides),
        random_weights=lambda config, seed=0: fabricate.random_qwen3_weights(config, seed),
        doc=doc,
    )


QWEN3 = _family("qwen3", ("qwen3",), "dense Qwen3: q/k norms, GQA, SwiGLU")
QWEN3_5 = _family("qwen3_5", ("qwen3_5", "qwen3_5_text"),
                  "the Qwen3.5 hybrid: gated delta net and gated full attention")
