"""The compiled decoder stack: every layer of a dense Llama / Qwen3 forward in one numba call.

On the integer kernel (`kernel="int8"`) with every layer's seven matrices stored in ggml blocks
(q8_0 / q4_0 / q4_1, as a GGUF file keeps them, or Q4NX blocks read as the same values in q4_1 /
q4_0 blocks: blocks.BlockWeight.from_q4nx), `Qwen3Model.forward` hands the whole stack to
`FusedStack.run`: one compiled function walks the layers, and per layer runs

    h = norm(x);  [q | k | v] = h W_qkv (+ bias);  q, k = norm per head (Qwen3), RoPE
    K[p_i], V[p_i] = k_i, v_i;  a_i = softmax(q_i K[0 .. p_i]^T / sqrt(D)) V[..]
    x += a W_o (+ bias);  h = norm(x);  [g | u] = h W_gu;  x += (silu(g) * u) W_down

with the integer kernel's products (int8_kernel.py: activations quantised once per product
input, so q, k and v share one quantisation, and gate and up another; the q/k/v rows and the
gate/up rows are stacked into one weight each at load, which changes no output's bits: each
output is its own dot product). What the Python forward spent on dozens of NumPy calls a layer
(norms, RoPE, the attention's per-row products, the softmax, SiLU) runs here compiled, and a
token costs one call for the stack, one for the lm_head.

Row i sits at position p_i of sequence s_i: one sequence's rows are at consecutive positions (a
step, a verify, a prefill: `run`), but rows of several sequences, each with its own K / V cache,
can share a call (`run_rows`): the weights are then read once for all of them, which is what a
batch of independent answers (distilling a head's data) needs.

Every value is float32 and computed per row in a fixed order, so a row's bits do not depend on
the batch (the base contract's B-checks hold bit for bit; tests/forward/test_fused.py):
- norm: s = sum of x_j^2 in index order; x_j * (1 / sqrt(s / H + eps)) * w_j, rounded per step;
- RoPE: rotate-half with the model's cos / sin tables (its `_rope_table`), per element;
- scores: s_t = tree(lanes) * (1 / sqrt(D)), the 16 lanes j = fma(q_d, K[t, d], j) over
  d = j, j + 16, .. in order (kernels.py's vector fma and halving tree; D a multiple of 16);
  p_t = exp(s_t - max) in float32 (below); z = sum_t p_t in t order; a_d = (sum_t p_t V[t, d] in t
  order) / z, each a_d on its own (the loop over d vectorises without reordering a sum);
- silu(g) = g / (1 + exp(-g));
- exp is `vexp.exp_kernel`'s float32 exp (under one ulp from the exact value), written
  in arithmetic so the SiLU and softmax loops are vectorised, where the C library's `expf`
  is a call per element.
The (row, head) pairs of a layer's attention are independent, so they are split over threads
like the products' outputs.

The unfused path (NumPy attention, float64 scores) stays: other kernels, Qwen3.5's gated
attention and GDN layers, partial RoPE and float weights run it, and `fused=False` asks for it.
The two integer paths differ only by float rounding in the attention and norms.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

from onebit.models import int8_kernel, kernel_cache, kernels, vexp
from onebit.models.blocks import BlockWeight, aligned

_compiled: dict[object, Callable] = {}

ATTENTION = ("q_proj", "k_proj", "v_proj")
LANES = kernels.VECTOR_BYTES // 4  # float32 lanes of one score's dot product
PARALLEL_ROWS = 4  # a batch of at least this many rows splits its row-wise work over threads
MLP_IN = ("gate_proj", "up_proj")


def _stacked(parts: list[BlockWeight]) -> BlockWeight:
    """One block weight whose rows are `parts`' rows in order (one kind, one input width)."""
    first = parts[0]
    out = sum(p.shape[0] for p in parts)
    return BlockWeight(first.kind, (out, first.shape[1]),
                       np.concatenate([p.codes for p in parts]),
                       np.concatenate([p.d for p in parts]),
                       np.concatenate([p.m for p in parts]))


def _layer_stack(weights: list[BlockWeight]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(codes [L, out, bytes], d [L, out, nb], m [L, out, nb or 0])` of one weight per layer,
    each layer's in the integer kernel's layout (int8_kernel.grouped_arrays)."""
    layers = [int8_kernel.grouped_arrays(w.kind, w.codes, w.d, w.m) for w in weights]
    return (aligned(np.stack([c for c, _, _ in layers])),  # codes on a cache line
            np.ascontiguousarray(np.stack([d for _, d, _ in layers])),
            np.ascontiguousarray(np.stack([m for _, _, m in layers])))


def unfit_reason(model) -> str | None:
    """Why `model` cannot run the compiled stack (None: it can)."""
    c = model.config
    if not getattr(model.backend, "reads_blocks", False) or model.backend.name != "host":
        return "the compiled stack runs on the host backend's int8 kernel only"
    if any(t != "full_attention" for t in c.layer_types):
        return "it has layers other than full attention"
    if c.gated_attention:
        return "its attention is gated"
    if c.rotary_dim != c.head_dim:
        return "its RoPE rotates part of each head"
    if c.head_dim % LANES:
        return f"its head_dim {c.head_dim} is not a multiple of {LANES}"
    if model.dtype != np.float32:
        return "its compute dtype is not float32"
    names = [f"model.layers.{i}.{part}.weight" for i in range(c.num_hidden_layers)
             for part in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                          "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")]
    kinds = {name: model.weights.block_kind(name) for name in names}
    # one correction a block of 32: q8_16f (Q6_K's scale per 16) runs on the layer's products
    if any(kind not in int8_kernel.PER_BLOCK_KINDS for kind in kinds.values()):
        return ("not every layer matrix is stored in q8_0 / q4_0 / q4_1 / q4_1f (or Q4NX) "
                "blocks")
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        for group in (ATTENTION, MLP_IN):
            where = "self_attn." if group is ATTENTION else "mlp."
            if len({kinds[f"{p}{where}{n}.weight"] for n in group}) > 1:
                return f"layer {i}'s {'/'.join(group)} are stored in different block kinds"
    return None


class FusedStack:
    """The layer weights of a model, stacked for the compiled stack, and the KV caches of
    `sequences` sequences (one for a model's own stack; `for_sequences` makes more)."""

    def __init__(self, model, sequences: int = 1) -> None:
        c, w = model.config, model.weights
        self.model = model
        L, D = c.num_hidden_layers, c.head_dim
        self.shape = (c.num_attention_heads, c.num_key_value_heads, D)
        groups: dict[str, list[BlockWeight]] = {"qkv": [], "o": [], "gu": [], "down": []}
        for i in range(L):
            p = f"model.layers.{i}."
            groups["qkv"].append(_stacked([w.block_weight(f"{p}self_attn.{n}.weight")
                                           for n in ATTENTION]))
            groups["o"].append(w.block_weight(f"{p}self_attn.o_proj.weight"))
            groups["gu"].append(_stacked([w.block_weight(f"{p}mlp.{n}.weight")
                                          for n in MLP_IN]))
            groups["down"].append(w.block_weight(f"{p}mlp.down_proj.weight"))
        # consecutive layers with the same kinds run in one call (all of them, in a file
        # quantised one way); a mixed file runs in a few
        self.runs: list[tuple[int, int, tuple[str, ...]]] = []
        for i in range(L):
            kinds = tuple(groups[g][i].kind for g in ("qkv", "o", "gu", "down"))
            if self.runs and self.runs[-1][2] == kinds:
                self.runs[-1] = (self.runs[-1][0], i + 1, kinds)
            else:
                self.runs.append((i, i + 1, kinds))
        self.stacks = {(start, g): _layer_stack(groups[g][start:end])
                       for start, end, _ in self.runs for g in groups}
        norms = model._norms

        def rows(name: str) -> np.ndarray:
            return np.ascontiguousarray(np.stack([
                norms.get(f"model.layers.{i}.{name}", np.zeros(0, np.float32))
                for i in range(L)]).astype(np.float32))

        self.in_norm = rows("input_layernorm.weight")
        self.post_norm = rows("post_attention_layernorm.weight")
        self.q_norm = rows("self_attn.q_norm.weight")  # [L, 0] without q/k norms
        self.k_norm = rows("self_attn.k_norm.weight")

        def biases(parts: tuple[str, ...]) -> np.ndarray:
            names = [[f"model.layers.{i}.self_attn.{n}.bias" for n in parts] for i in range(L)]
            if not all(name in w.names() for name in names[0]):
                return np.zeros((L, 0), np.float32)
            return np.ascontiguousarray(np.stack([
                np.concatenate([w.get(name) for name in layer]) for layer in names
            ]).astype(np.float32))

        self.qkv_bias = biases(ATTENTION)
        self.o_bias = biases(("o_proj",))
        self.eps = np.float32(c.rms_norm_eps)
        self.parallel = True
        self.sequences = sequences
        self.reset()

    def for_sequences(self, sequences: int) -> FusedStack:
        """A stack on the same weights (shared, not copied) with empty caches of its own for
        `sequences` sequences."""
        if isinstance(sequences, bool) or not isinstance(sequences, int) or sequences < 1:
            raise ValueError(f"sequences must be an integer >= 1, got {sequences!r}")
        other = copy.copy(self)
        other.sequences = sequences
        other.reset()
        return other

    @property
    def nbytes(self) -> int:
        """Bytes of the stacked layer weights (what one token reads, without the lm_head)."""
        return sum(a.nbytes for stack in self.stacks.values() for a in stack)

    def reset(self) -> None:
        L = self.model.config.num_hidden_layers
        Hq, Hkv, D = self.shape
        self.capacity = 64
        shape = (self.sequences, L, Hkv, self.capacity, D)
        self.keys = np.zeros(shape, np.float32)
        self.values = np.zeros(shape, np.float32)

    def free(self, sequence: int) -> None:
        """Forget what sequence `sequence` holds (its caches are indexed by position, so the
        next rows overwrite before they read; zeroed all the same)."""
        self.keys[sequence] = 0.0
        self.values[sequence] = 0.0

    def ensure_capacity(self, length: int) -> None:
        if length <= self.capacity:
            return
        new = max(length, 2 * self.capacity)
        grown = []
        for cache in (self.keys, self.values):
            bigger = np.zeros(cache.shape[:3] + (new, cache.shape[4]), np.float32)
            bigger[:, :, :, : self.capacity] = cache
            grown.append(bigger)
        keys, values = grown
        self.keys, self.values, self.capacity = keys, values, new

    def run(self, x: np.ndarray, pos: int, cos: np.ndarray, sin: np.ndarray,
            taps: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Run every layer on residual rows `x` `[R, H]` (float32, updated in place) at
        positions pos .. pos+R-1 of the first sequence, writing their K / V rows;
        `(x, tapped [R, len(taps), H])`."""
        R = x.shape[0]
        return self.run_rows(x, pos + np.arange(R, dtype=np.int64), np.zeros(R, np.int64),
                             cos, sin, taps)

    def run_rows(self, x: np.ndarray, positions: np.ndarray, sequences: np.ndarray,
                 cos: np.ndarray, sin: np.ndarray,
                 taps: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """`run` for rows of any sequences: row i at position `positions[i]` of sequence
        `sequences[i]`, attending to that sequence's positions 0 .. positions[i]. Rows of one
        sequence come in position order, with every earlier position already written (by an
        earlier call or an earlier row of this one); `cos` / `sin` cover every position."""
        L = self.model.config.num_hidden_layers
        R = x.shape[0]
        positions = np.ascontiguousarray(positions, np.int64)
        sequences = np.ascontiguousarray(sequences, np.int64)
        if positions.shape != (R,) or sequences.shape != (R,):
            raise ValueError(f"positions and sequences must be [{R}], one per row; got "
                             f"{positions.shape} and {sequences.shape}")
        if R and (positions.min() < 0 or sequences.min() < 0
                  or sequences.max() >= self.sequences):
            raise ValueError(f"a row's position is negative or its sequence is not in "
                             f"[0, {self.sequences})")
        if R and positions.max() >= cos.shape[0]:
            raise ValueError(f"position {int(positions.max())} has no RoPE row "
                             f"({cos.shape[0]} made)")
        self.ensure_capacity(int(positions.max()) + 1 if R else 0)
        tap_slot = np.full(L, -1, np.int64)
        for n, layer in enumerate(taps):
            tap_slot[layer] = n
        tapped = np.zeros((R, len(taps), x.shape[1]), np.float32)
        table = int8_kernel.f16_table()
        Hq, Hkv, D = self.shape
        for start, end, kinds in self.runs:
            qkv, o, gu, down = (self.stacks[(start, g)] for g in ("qkv", "o", "gu", "down"))
            stack_kernel(kinds, self.parallel)(
                x, positions, sequences, start, end, tap_slot, tapped,
                self.in_norm, self.post_norm, self.q_norm, self.k_norm, self.eps,
                *qkv, *o, *gu, *down, table, self.qkv_bias, self.o_bias,
                cos, sin, self.keys, self.values, Hq, Hkv, D)
        return x, tapped


def stack_kernel(kinds: tuple[str, str, str, str], parallel: bool) -> Callable:
    """The compiled stack for layers whose (qkv, o, gate/up, down) weights are of `kinds`."""
    key = (kinds, parallel, int8_kernel.lanes_form())
    got = _compiled.get(key)
    if got is not None:
        return got
    from numba import njit, prange

    quantize, quantize_row = int8_kernel.quantize_kernel(), int8_kernel.quantize_kernel(True)
    # Each product's output tasks are split over threads here, by prange: numba runs a
    # parallel loop only in the function it is written in (a parallel kernel called from
    # compiled code runs its loop on one thread, and slowly). The tasks go in a few
    # contiguous spans (int8_kernel.spans_kernel), not one call each.
    range_qkv, range_o, range_gu, range_down = (int8_kernel.range_kernel(k) for k in kinds)
    tasks = njit(inline="always")(int8_kernel.tasks)
    spans = int8_kernel.spans_kernel()
    corrections = int8_kernel.block_corrections_kernel()
    f_qkv, f_o, f_gu, f_down = (int8_kernel.correction_factor(int8_kernel.KIND_IDS[k])
                                for k in kinds)
    exp32 = vexp.exp_kernel()
    aligned_bytes = int8_kernel.aligned_bytes_kernel()
    parts = kernels._tiled_intrinsics()
    vload, vzero, fma, vsum = parts["vload"], parts["vzero"], parts["fma"], parts["vsum"]

    @njit(nogil=True, inline="always")
    def norm_row(src, w, eps, dst):  # pragma: no cover - compiled
        n = src.shape[0]
        s = np.float32(0)
        for j in range(n):
            s += src[j] * src[j]
        inv = np.float32(1) / np.sqrt(s / np.float32(n) + eps)
        for j in range(n):
            dst[j] = src[j] * inv * w[j]

    @njit(nogil=True, inline="always")
    def norm_quantize(x, w, eps, h, hq, hdx, hsx, i):  # pragma: no cover - compiled
        norm_row(x[i], w, eps, h[i])
        quantize_row(h[i], hq, i * h.shape[1], hdx[i], hsx[i])

    @njit(nogil=True, inline="always")
    def silu_quantize(gu, act, mq, mdx, msx, i):  # pragma: no cover - compiled
        inter = act.shape[1]
        for j in range(inter):
            g = gu[i, j]
            act[i, j] = g / (np.float32(1) + exp32(-g)) * gu[i, inter + j]
        quantize_row(act[i], mq, i * inter, mdx[i], msx[i])

    def stack(x, row_pos, row_seq, start, end, tap_slot, tapped, in_norm, post_norm, q_norm,
              k_norm, eps,
              c_qkv, d_qkv, m_qkv, c_o, d_o, m_o, c_gu, d_gu, m_gu, c_dn, d_dn, m_dn,
              table, qkv_bias, o_bias, cos, sin, K, V, Hq, Hkv, D):  # pragma: no cover
        R, H = x.shape
        n_qkv = c_qkv.shape[1]
        inter = c_gu.shape[1] // 2
        half = D // 2
        group = Hq // Hkv
        scale = np.float32(1) / np.sqrt(np.float32(D))
        h = np.empty((R, H), np.float32)
        hq = aligned_bytes(R * H)
        hdx = np.empty((R, H // 32), np.float32)
        hsx = np.empty((R, H // 32), np.float32)
        qkv = np.empty((R, n_qkv), np.float32)
        q = np.empty((R, Hq, D), np.float32)
        att = np.empty((R, Hq * D), np.float32)
        aq = aligned_bytes(R * Hq * D)
        adx = np.empty((R, Hq * D // 32), np.float32)
        asx = np.empty((R, Hq * D // 32), np.float32)
        proj = np.empty((R, H), np.float32)
        gu = np.empty((R, 2 * inter), np.float32)
        act = np.empty((R, inter), np.float32)
        mq = aligned_bytes(R * inter)
        mdx = np.empty((R, inter // 32), np.float32)
        msx = np.empty((R, inter // 32), np.float32)
        for layer in range(start, end):
            at = layer - start
            # -- attention ------------------------------------------------------------------
            # rows are independent: a batch splits them over threads (a step has one row, and
            # a parallel region costs more than its work)
            if parallel and R >= PARALLEL_ROWS:
                for i in prange(R):
                    norm_quantize(x, in_norm[layer], eps, h, hq, hdx, hsx, i)
            else:
                for i in range(R):
                    norm_quantize(x, in_norm[layer], eps, h, hq, hdx, hsx, i)
            corr = corrections(hq, hdx, f_qkv)
            n_t = tasks(n_qkv)
            n_s = spans(n_t)
            for p in prange(n_s):
                range_qkv(c_qkv[at], d_qkv[at], m_qkv[at], table, hq, hdx, hsx, corr, qkv,
                          p * n_t // n_s, (p + 1) * n_t // n_s)
            if qkv_bias.shape[1]:
                for i in range(R):
                    for j in range(n_qkv):
                        qkv[i, j] = qkv[i, j] + qkv_bias[layer, j]
            for i in range(R):  # q, k, v of every row; K / V rows written at its position
                t_i, s_i = row_pos[i], row_seq[i]
                for hh in range(Hq + 2 * Hkv):  # q heads, then k heads, then v heads
                    src = qkv[i, hh * D:(hh + 1) * D]
                    if hh < Hq + Hkv:
                        dst = q[i, hh] if hh < Hq else K[s_i, layer, hh - Hq, t_i]
                        if q_norm.shape[1]:
                            norm_row(src, q_norm[layer] if hh < Hq else k_norm[layer], eps,
                                     dst)
                        else:
                            for d in range(D):
                                dst[d] = src[d]
                        for j in range(half):  # rotate-half RoPE, in place
                            x1, x2 = dst[j], dst[j + half]
                            dst[j] = x1 * cos[t_i, j] - x2 * sin[t_i, j]
                            dst[j + half] = x2 * cos[t_i, j] + x1 * sin[t_i, j]
                    else:
                        vt = V[s_i, layer, hh - Hq - Hkv, t_i]
                        for d in range(D):
                            vt[d] = src[d]
            # Row i attends to its sequence's positions 0 .. p_i, exactly as a step there
            # would; the rows and heads are independent, so they are split over threads.
            for task in prange(R * Hq):
                i, head = task // Hq, task % Hq
                n = row_pos[i] + 1
                s_i = row_seq[i]
                kh, vh = K[s_i, layer, head // group], V[s_i, layer, head // group]
                qh = q[i, head]
                scores = np.empty(n, np.float32)
                top = np.float32(-np.inf)
                for t in range(n):
                    kt = kh[t]
                    lanes = vzero(qh)
                    for d in range(0, D, LANES):
                        lanes = fma(vload(qh, d), vload(kt, d), lanes)
                    s = vsum(lanes) * scale
                    scores[t] = s
                    if s > top:
                        top = s
                for t in range(n):  # vectorised: exp32 is arithmetic, not a call
                    scores[t] = exp32(scores[t] - top)
                z = np.float32(0)
                for t in range(n):
                    z += scores[t]
                acc = np.zeros(D, np.float32)
                for t in range(n):
                    p = scores[t]
                    vt = vh[t]
                    for d in range(D):
                        acc[d] += p * vt[d]
                for d in range(D):
                    att[i, head * D + d] = acc[d] / z
            if parallel and R >= PARALLEL_ROWS:
                for i in prange(R):
                    quantize_row(att[i], aq, i * Hq * D, adx[i], asx[i])
            else:
                quantize(att, aq, adx, asx)
            corr = corrections(aq, adx, f_o)
            n_t = tasks(H)
            n_s = spans(n_t)
            for p in prange(n_s):
                range_o(c_o[at], d_o[at], m_o[at], table, aq, adx, asx, corr, proj,
                        p * n_t // n_s, (p + 1) * n_t // n_s)
            for i in range(R):
                for j in range(H):
                    value = proj[i, j]
                    if o_bias.shape[1]:
                        value = value + o_bias[layer, j]
                    x[i, j] = x[i, j] + value
            # -- MLP ------------------------------------------------------------------------
            if parallel and R >= PARALLEL_ROWS:
                for i in prange(R):
                    norm_quantize(x, post_norm[layer], eps, h, hq, hdx, hsx, i)
            else:
                for i in range(R):
                    norm_quantize(x, post_norm[layer], eps, h, hq, hdx, hsx, i)
            corr = corrections(hq, hdx, f_gu)
            n_t = tasks(2 * inter)
            n_s = spans(n_t)
            for p in prange(n_s):
                range_gu(c_gu[at], d_gu[at], m_gu[at], table, hq, hdx, hsx, corr, gu,
                         p * n_t // n_s, (p + 1) * n_t // n_s)
            if parallel and R >= PARALLEL_ROWS:
                for i in prange(R):
                    silu_quantize(gu, act, mq, mdx, msx, i)
            else:
                for i in range(R):
                    silu_quantize(gu, act, mq, mdx, msx, i)
            corr = corrections(mq, mdx, f_down)
            n_t = tasks(H)
            n_s = spans(n_t)
            for p in prange(n_s):
                range_down(c_dn[at], d_dn[at], m_dn[at], table, mq, mdx, msx, corr, proj,
                           p * n_t // n_s, (p + 1) * n_t // n_s)
            for i in range(R):
                for j in range(H):
                    x[i, j] = x[i, j] + proj[i, j]
            if tap_slot[layer] >= 0:
                for i in range(R):
                    for j in range(H):
                        tapped[i, tap_slot[layer], j] = x[i, j]

    # error_model "numpy": a float division here never raises (every divisor is at least 1 or
    # eps), and without numba's zero check a loop that divides (SiLU) can be vectorised
    stack = kernel_cache.jit(stack, key, parallel=parallel, nogil=True, error_model="numpy")
    _compiled[key] = stack
    return stack
