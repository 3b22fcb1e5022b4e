"""The trained head's greedy chain in one compiled call (onebit.heads.eagle's math).

Asking the head for a draft is five products and a dozen small vector operations. Run from
Python, each product is a call into the integer kernel with its own activation quantisation,
and each norm, SiLU and softmax a NumPy call: on SmolLM2 the products took 0.19 ms of a first
draft's 0.48 ms, the calls around them the rest (benchmarks/head_ab.py's ask figures; a step
of the base is about 3 ms, so a draft asked for must be right often to pay for that alone).
Here the whole chain, from the base's three rows to the last draft, is one numba call on the
same kernel pieces the compiled stack uses (int8_kernel's quantiser, block corrections and
range functions), so a draft costs its products and little else.

It computes what `EagleHead`'s NumPy path computes, with the same q8_0 weights and the base's
own lm_head rows, in float32; only float rounding in the norms differs (sums in index order
here, NumPy's pairwise there), so the two agree on every draft whose logits are not within
a rounding of a tie (tests/heads/test_eagle.py compares them). Greedy drafting only: a
sampled draft needs the head's q row over the vocabulary and the run's generator, which stay
in Python.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onebit.models import int8_kernel, kernel_cache, vexp
from onebit.models.blocks import BlockWeight

_compiled: dict[object, Callable] = {}


def chain_kernel(lm_kind: str) -> Callable:
    """The compiled chain for a head whose own matrices are q8_0 and whose lm_head rows are in
    blocks of `lm_kind` (int8_kernel.KIND_IDS)."""
    key = ("eagle-chain", lm_kind, int8_kernel.lanes_form())
    got = _compiled.get(key)
    if got is not None:
        return got
    from numba import njit, prange

    spans = int8_kernel.spans_kernel()
    quantize_row = int8_kernel.quantize_kernel(True)
    corrections = int8_kernel.block_corrections_kernel()
    tasks = njit(inline="always")(int8_kernel.tasks)
    range_q8, range_lm = int8_kernel.range_kernel("q8_0"), int8_kernel.range_kernel(lm_kind)
    f_q8 = int8_kernel.correction_factor(int8_kernel.KIND_IDS["q8_0"])
    f_lm = int8_kernel.correction_factor(int8_kernel.KIND_IDS[lm_kind])
    exp32 = vexp.exp_kernel()
    aligned_bytes = int8_kernel.aligned_bytes_kernel()

    @njit(nogil=True, inline="always")
    def rms(src, eps, dst):  # pragma: no cover - compiled
        n = src.shape[0]
        s = np.float32(0)
        for j in range(n):
            s += src[j] * src[j]
        inv = np.float32(1) / np.sqrt(s / np.float32(n) + eps)
        for j in range(n):
            dst[j] = src[j] * inv

    @njit(nogil=True, inline="always")
    def q8_product(codes, d, m, table, x, xq, dx, sx, out):  # pragma: no cover - compiled
        """out [1, n_out] = x [n] times a q8_0 weight; xq, dx, sx: scratch of x's width."""
        quantize_row(x, xq, 0, dx[0], sx[0])
        range_q8(codes, d, m, table, xq, dx, sx, corrections(xq, dx, f_q8), out,
                 np.int64(0), tasks(d.shape[0]))

    def chain(low, mid, high, e0, emb, w_out, eps, k, stop_below,
              c_fuse, d_fuse, m_fuse, c_into, d_into, m_into, c_gu, d_gu, m_gu,
              c_down, d_down, m_down, c_lm, d_lm, m_lm, table, picked, sure):  # pragma: no cover
        """Up to k drafts into picked (draft-vocabulary indices) and sure (each one's softmax
        probability); stops after one less sure than stop_below. Returns how many."""
        H = high.shape[0]
        inter = d_gu.shape[0] // 2
        vocab = d_lm.shape[0]
        # every buffer made once, before the loop: the activations' int8 codes of each
        # width (on a cache line) and their block scales
        q3, q2, q1, qi = (aligned_bytes(3 * H), aligned_bytes(2 * H), aligned_bytes(H),
                          aligned_bytes(inter))
        dx3, sx3 = np.empty((1, 3 * H // 32), np.float32), np.empty((1, 3 * H // 32), np.float32)
        dx2, sx2 = np.empty((1, 2 * H // 32), np.float32), np.empty((1, 2 * H // 32), np.float32)
        dx1, sx1 = np.empty((1, H // 32), np.float32), np.empty((1, H // 32), np.float32)
        dxi, sxi = np.empty((1, inter // 32), np.float32), np.empty((1, inter // 32), np.float32)
        fused_in = np.empty(3 * H, np.float32)
        rms(low, eps, fused_in[:H])
        rms(mid, eps, fused_in[H:2 * H])
        for i in range(H):  # (loops, not slice assignments: numba's parallel pass turns
            fused_in[2 * H + i] = high[i]  # those into parallel regions of their own)
        u = np.empty((1, H), np.float32)
        q8_product(c_fuse, d_fuse, m_fuse, table, fused_in, q3, dx3, sx3, u)
        step_in = np.empty(2 * H, np.float32)
        z = np.empty((1, H), np.float32)
        h = np.empty(H, np.float32)
        gu = np.empty((1, 2 * inter), np.float32)
        act = np.empty(inter, np.float32)
        down = np.empty((1, H), np.float32)
        g = np.empty(H, np.float32)
        o = np.empty(H, np.float32)
        logits = np.empty((1, vocab), np.float32)
        e = np.empty(H, np.float32)
        for i in range(H):
            e[i] = e0[i]
        made = 0
        for j in range(k):
            rms(u[0], eps, step_in[:H])
            rms(e, eps, step_in[H:])
            q8_product(c_into, d_into, m_into, table, step_in, q2, dx2, sx2, z)
            rms(z[0], eps, h)
            q8_product(c_gu, d_gu, m_gu, table, h, q1, dx1, sx1, gu)
            for i in range(inter):
                gate = gu[0, i]
                act[i] = gate / (np.float32(1) + exp32(-gate)) * gu[0, inter + i]
            q8_product(c_down, d_down, m_down, table, act, qi, dxi, sxi, down)
            for i in range(H):
                g[i] = z[0, i] + down[0, i]
            rms(g, eps, o)
            for i in range(H):
                o[i] = o[i] * w_out[i]
            quantize_row(o, q1, 0, dx1[0], sx1[0])
            corr = corrections(q1, dx1, f_lm)
            # the lm_head rows are most of a draft's bytes: both threads stream them
            n_t = tasks(vocab)
            n_s = spans(n_t)
            for p in prange(n_s):
                range_lm(c_lm, d_lm, m_lm, table, q1, dx1, sx1, corr, logits,
                         p * n_t // n_s, (p + 1) * n_t // n_s)
            top = 0
            best = logits[0, 0]
            for i in range(1, vocab):
                if logits[0, i] > best:
                    best = logits[0, i]
                    top = i
            for i in range(vocab):  # vectorised (exp32 is arithmetic): the softmax's terms
                logits[0, i] = exp32(logits[0, i] - best)
            total = np.float32(0)
            for i in range(vocab):
                total += logits[0, i]
            picked[j] = top
            sure[j] = np.float32(1) / total
            made = j + 1
            if sure[j] < stop_below:
                break
            for i in range(H):
                u[0, i] = g[i]
                e[i] = emb[top, i]
        return made

    got = _compiled[key] = kernel_cache.jit(chain, key, parallel=True, nogil=True,
                                            error_model="numpy")
    return got


class CompiledChain:
    """A head's matrices laid out for `chain_kernel`, and the call. `matrices` maps fuse,
    into, gate_up, down to q8_0 block weights; `lm` is the base's lm_head rows of the draft
    vocabulary (`lm_head_subset_blocks`); `embeddings` `[V_d, H]` float32 the base's embedding
    rows of the same tokens, in the same order."""

    def __init__(self, matrices: dict[str, BlockWeight], lm: BlockWeight,
                 embeddings: np.ndarray, w_out: np.ndarray, eps: float) -> None:
        self.kernel = chain_kernel(lm.kind)
        self.arrays = [a for name in ("fuse", "into", "gate_up", "down")
                       for a in int8_kernel.grouped(matrices[name])]
        self.arrays += list(int8_kernel.grouped(lm))
        self.embeddings = np.ascontiguousarray(embeddings, np.float32)
        self.w_out = np.ascontiguousarray(w_out, np.float32)
        self.eps = np.float32(eps)
        self.table = int8_kernel.f16_table()

    def __call__(self, low: np.ndarray, mid: np.ndarray, high: np.ndarray, e0: np.ndarray,
                 k: int, stop_below: float) -> tuple[np.ndarray, np.ndarray]:
        """`(draft indices [n], their probabilities [n])`, n <= k."""
        picked = np.zeros(k, np.int64)
        sure = np.zeros(k, np.float32)
        f32 = np.float32
        made = self.kernel(np.ascontiguousarray(low, f32), np.ascontiguousarray(mid, f32),
                           np.ascontiguousarray(high, f32), np.ascontiguousarray(e0, f32),
                           self.embeddings, self.w_out, self.eps, np.int64(k),
                           f32(stop_below), *self.arrays, self.table, picked, sure)
        return picked[:made], sure[:made]
