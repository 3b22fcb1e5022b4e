"""The integer kernel: `Y[r] = W @ X[r]` for weights in ggml blocks (blocks.py), by 8-bit dot
products, the way llama.cpp multiplies its Q4_0 / Q4_1 / Q8_0 weights.

Each activation row is first quantised to 8 bits per block of 32 columns (`quantize_rows`),
a scheme of the Q8_0 / Q8_1 kind, in float32:

    amax = max |x_j| over the block;  dx = amax / 127;  q_j = rint(x_j * (127 / amax))
    (q = 0 and dx = 0 for an all-zero block);  sx = dx * sum_j q_j   (the block sum, for q4_1)

Then for row r and output o, with the weight block b holding codes c_j and scales dw (, mw):

    v_b[l] = c_2l * q_2l + c_2l+1 * q_2l+1    for l = 0..15: exact int32 lanes, taken to float32
                                   (exactly) (q8_0: c = q; q4_0: c = nibble - 8; q4_1: c = nibble)
    acc[l] = fma(v_b[l], dw_b * dx_b, acc[l])   for b = 0, 1, .. in order, all lanes at once
    m = sum over b of mw_b * sx_b, added left to right   (q4_1; 0 otherwise)
    y = tree(acc) + m      tree: halve the 16 lanes and add the halves lane by lane, to one
    all in float32 (fma rounds once), so the horizontal sum is paid once per output, not per
    block.

The integer sums are exact whatever order the machine adds them in, and the float steps run in
one fixed order per (row, output), compiled without fastmath; nothing of one row enters another
row's result. So a row's bits do not depend on the batch: a verify of 8 rows gives, row for
row, what 8 steps give (tests/models/test_int8_kernel.py proves it for 1..16 rows).

Against the float path (the weight dequantised, times the unquantised row) the only new error is
the activation's rounding, at most dx_b / 2 per element: |Y_int - Y_float| is bounded by
`error_bound` (that per-block sum, plus float32 rounding that grows with the row's length).

How it runs: for each output, every activation row is dotted with the weight row while it sits
in L1, so a verify of R rows reads each weight from memory once. Each 32-element block dot is
one LLVM vector expression written as a numba intrinsic: load the 16 nibble bytes (or 32 int8
codes), split the nibbles in registers, sign-extend both sides to i16, multiply, widen and add
pairwise (the shape of `vpmaddwd`), convert the 16 lanes to float32 and fuse them into the
accumulator with the block's scale (kernels.py's vector type and `llvm.fma`). Rows go by
tiles of two, which split each weight block's nibbles once for both rows (`_split_ops`; the
same lanes, so the same bits, as the one-row `_block_dot` the last odd row uses).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onebit.models import kernels
from onebit.models.blocks import BLOCK, BlockWeight

# outputs per parallel task (a weight row is decoded once per task per output)
TASK_OUTS = 16
KIND_IDS = {"q8_0": 0, "q4_0": 1, "q4_1": 2}

_compiled: dict[object, Callable] = {}


def f16_table() -> np.ndarray:
    """float32 value of every float16 bit pattern (the scales' decoder; exact)."""
    table = _compiled.get("table")
    if table is None:
        table = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
        table = _compiled["table"] = table.astype(np.float32)
    return table


def _block_dot(nibbles: int | None = None):
    """`dot(a, i, b, j)`: a block's products, summed in pairs, as 16 float32 lanes: lane l is
    c_2l * b[j + 2l] + c_2l+1 * b[j + 2l + 1], an exact int32 (|lane| <= 2 * 128 * 127, so its
    float32 is exact too), `b` int8. With `nibbles` None the codes are c_k = a[i + k] (int8,
    q8_0); with an offset, a[i .. i + 15] are 16 bytes of nibbles, c_k = (low nibble of
    a[i + k]) - offset for k < 16 and (high nibble of a[i + k - 16]) - offset after (q4_0:
    offset 8, q4_1: 0), split in registers."""
    got = _compiled.get(("dot", nibbles))
    if got is not None:
        return got
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    lanes = _lanes_type()

    def byte_array(x):
        return (isinstance(x, types.Array) and x.ndim == 1 and x.layout in "CA"
                and x.dtype in (types.int8, types.uint8))

    @intrinsic
    def dot(typingctx, a, i, b, j):
        ok = byte_array(a) and byte_array(b)
        if not ok or not isinstance(i, types.Integer) or not isinstance(j, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)

            def load(arr_type, arr, idx, n):
                ary = context.make_array(arr_type)(context, builder, arr)
                ptr = builder.gep(ary.data, [idx], inbounds=True)
                vty = ir.VectorType(i8, n)
                return builder.load(builder.bitcast(ptr, vty.as_pointer()), align=1)

            if nibbles is None:
                w = load(sig.args[0], args[0], args[1], 32)
            else:
                v = load(sig.args[0], args[0], args[1], 16)
                lo = builder.and_(v, ir.Constant(ir.VectorType(i8, 16), [15] * 16))
                hi = builder.lshr(v, ir.Constant(ir.VectorType(i8, 16), [4] * 16))
                w = builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(i32, 32),
                                                               list(range(32))))
                if nibbles:
                    w = builder.sub(w, ir.Constant(ir.VectorType(i8, 32), [nibbles] * 32))
            x = builder.sext(w, ir.VectorType(i16, 32))
            y = builder.sext(load(sig.args[2], args[2], args[3], 32), ir.VectorType(i16, 32))
            p = builder.mul(x, y)  # |c * q| <= 128 * 127: fits int16

            def pick(start):
                mask = ir.Constant(ir.VectorType(i32, 16), list(range(start, 32, 2)))
                return builder.sext(builder.shuffle_vector(p, p, mask), ir.VectorType(i32, 16))

            pairs = builder.add(pick(0), pick(1))  # vpmaddwd's shape
            return builder.sitofp(pairs, ir.VectorType(ir.FloatType(), 16))

        return lanes(a, i, b, j), codegen

    _compiled[("dot", nibbles)] = dot
    return dot


def _split_ops(nibbles: int | None):
    """`codes(a, i)`: a block's 32 weight codes widened to i16 lanes (the nibble split of
    `_block_dot`, done once per block for all the rows of a tile); `pairs(c, b, j)`: those
    codes times b[j .. j + 31] (int8), summed in pairs, as 16 float32 lanes (exactly what
    `_block_dot` returns for the same block and row)."""
    got = _compiled.get(("split", nibbles))
    if got is not None:
        return got
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    lanes = _lanes_type()
    codes_type = kernels._tiled_intrinsics()["Vec"](types.int16, 32)
    i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)

    def load(context, builder, arr_type, arr, idx, n):
        ary = context.make_array(arr_type)(context, builder, arr)
        ptr = builder.gep(ary.data, [idx], inbounds=True)
        return builder.load(builder.bitcast(ptr, ir.VectorType(i8, n).as_pointer()), align=1)

    @intrinsic
    def codes(typingctx, a, i):
        def codegen(context, builder, sig, args):
            if nibbles is None:
                w = load(context, builder, sig.args[0], args[0], args[1], 32)
            else:
                v = load(context, builder, sig.args[0], args[0], args[1], 16)
                lo = builder.and_(v, ir.Constant(ir.VectorType(i8, 16), [15] * 16))
                hi = builder.lshr(v, ir.Constant(ir.VectorType(i8, 16), [4] * 16))
                w = builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(i32, 32),
                                                               list(range(32))))
                if nibbles:
                    w = builder.sub(w, ir.Constant(ir.VectorType(i8, 32), [nibbles] * 32))
            return builder.sext(w, ir.VectorType(i16, 32))

        return codes_type(a, i), codegen

    @intrinsic
    def pairs(typingctx, c, b, j):
        def codegen(context, builder, sig, args):
            y = builder.sext(load(context, builder, sig.args[1], args[1], args[2], 32),
                             ir.VectorType(i16, 32))
            p = builder.mul(args[0], y)

            def pick(start):
                mask = ir.Constant(ir.VectorType(i32, 16), list(range(start, 32, 2)))
                return builder.sext(builder.shuffle_vector(p, p, mask), ir.VectorType(i32, 16))

            return builder.sitofp(builder.add(pick(0), pick(1)),
                                  ir.VectorType(ir.FloatType(), 16))

        return lanes(c, b, j), codegen

    got = _compiled[("split", nibbles)] = (codes, pairs)
    return got


def _lanes_type():
    """numba's type for 16 float32 lanes (kernels.py's vector type, 64 bytes)."""
    from numba.core import types

    return kernels._tiled_intrinsics()["Vec"](types.float32, 16)


def _lane_ops():
    """`splat(x)`: 16 lanes of float32 x; `zeros()`: 16 zero lanes."""
    got = _compiled.get("lane_ops")
    if got is not None:
        return got
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    lanes = _lanes_type()
    vt, i32 = ir.VectorType(ir.FloatType(), 16), ir.IntType(32)

    @intrinsic
    def splat(typingctx, x):
        if x != types.float32:
            return None

        def codegen(context, builder, sig, args):
            v = builder.insert_element(ir.Constant(vt, None), args[0], ir.Constant(i32, 0))
            return builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, 16), [0] * 16))

        return lanes(x), codegen

    @intrinsic
    def zeros(typingctx):
        def codegen(context, builder, sig, args):
            return ir.Constant(vt, None)

        return lanes(), codegen

    got = _compiled["lane_ops"] = (splat, zeros)
    return got


def _quantize_kernel() -> Callable:
    got = _compiled.get("quantize")
    if got is None:
        from numba import njit

        @njit(nogil=True)
        def quantize(x, xq, dx, sx):  # pragma: no cover - compiled
            n_rows, n = x.shape
            for r in range(n_rows):
                for b in range(n // 32):
                    at = b * 32
                    amax = np.float32(0)
                    for j in range(32):
                        a = abs(x[r, at + j])
                        if a > amax:
                            amax = a
                    d = amax / np.float32(127)
                    inv = np.float32(127) / amax if amax > 0 else np.float32(0)
                    total = 0
                    for j in range(32):
                        q = np.rint(x[r, at + j] * inv)
                        q = min(max(q, np.float32(-127)), np.float32(127))
                        qi = np.int8(q)
                        xq[r * n + at + j] = qi
                        total += qi
                    dx[r, b] = d
                    sx[r, b] = d * np.float32(total)

        got = _compiled["quantize"] = quantize
    return got


def quantize_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(q int8 [R * in], dx float32 [R, in/32], sx float32 [R, in/32])` of rows `[R, in]`
    (taken in float32), by the module docstring's scheme."""
    x = np.ascontiguousarray(rows, dtype=np.float32)
    n_rows, n = x.shape
    if n % BLOCK:
        raise ValueError(f"rows of width {n} do not split into blocks of {BLOCK}")
    xq = np.empty(n_rows * n, np.int8)
    dx = np.empty((n_rows, n // BLOCK), np.float32)
    sx = np.empty((n_rows, n // BLOCK), np.float32)
    _quantize_kernel()(x, xq, dx, sx)
    return xq, dx, sx


def _product_kernel(parallel: bool) -> Callable:
    got = _compiled.get(("product", parallel))
    if got is not None:
        return got
    from numba import njit, prange

    dot_q8, dot_q4_0, dot_q4_1 = _block_dot(), _block_dot(8), _block_dot(0)
    splat, zeros = _lane_ops()
    codes_q8, pairs_q8 = _split_ops(None)
    codes_q4_0, pairs_q4_0 = _split_ops(8)
    codes_q4_1, pairs_q4_1 = _split_ops(0)
    parts = kernels._tiled_intrinsics()
    fma, vsum = parts["fma"], parts["vsum"]

    def product(kind, codes, d16, m16, table, xq, dx, sx, out):  # pragma: no cover - compiled
        n_out, n_blocks = d16.shape
        n_rows, n_in = out.shape[0], n_blocks * 32
        row_bytes = codes.shape[1]
        flat = codes.reshape(-1)
        for t in prange((n_out + TASK_OUTS - 1) // TASK_OUTS):
            dw = np.empty(n_blocks, np.float32)
            mw = np.zeros(n_blocks, np.float32)
            for o in range(t * TASK_OUTS, min(n_out, (t + 1) * TASK_OUTS)):
                for b in range(n_blocks):
                    dw[b] = table[d16[o, b]]
                    if kind == 2:
                        mw[b] = table[m16[o, b]]
                w0 = o * row_bytes
                r = 0
                while r + 2 <= n_rows:  # two rows share each block's split codes
                    b0, b1 = r * n_in, (r + 1) * n_in
                    acc0 = zeros()
                    acc1 = zeros()
                    if kind == 0:
                        for b in range(n_blocks):
                            c = codes_q8(flat, w0 + b * 32)
                            acc0 = fma(pairs_q8(c, xq, b0 + b * 32), splat(dw[b] * dx[r, b]), acc0)
                            acc1 = fma(pairs_q8(c, xq, b1 + b * 32),
                                       splat(dw[b] * dx[r + 1, b]), acc1)
                    elif kind == 1:
                        for b in range(n_blocks):
                            c = codes_q4_0(flat, w0 + b * 16)
                            acc0 = fma(pairs_q4_0(c, xq, b0 + b * 32),
                                       splat(dw[b] * dx[r, b]), acc0)
                            acc1 = fma(pairs_q4_0(c, xq, b1 + b * 32),
                                       splat(dw[b] * dx[r + 1, b]), acc1)
                    else:
                        for b in range(n_blocks):
                            c = codes_q4_1(flat, w0 + b * 16)
                            acc0 = fma(pairs_q4_1(c, xq, b0 + b * 32),
                                       splat(dw[b] * dx[r, b]), acc0)
                            acc1 = fma(pairs_q4_1(c, xq, b1 + b * 32),
                                       splat(dw[b] * dx[r + 1, b]), acc1)
                    for k in range(2):
                        m = np.float32(0)
                        if kind == 2:
                            for b in range(n_blocks):
                                m = m + mw[b] * sx[r + k, b]
                        out[r + k, o] = (vsum(acc0) if k == 0 else vsum(acc1)) + m
                    r += 2
                if r < n_rows:
                    base = r * n_in
                    acc = zeros()
                    if kind == 0:
                        for b in range(n_blocks):
                            acc = fma(dot_q8(flat, w0 + b * 32, xq, base + b * 32),
                                      splat(dw[b] * dx[r, b]), acc)
                    elif kind == 1:
                        for b in range(n_blocks):
                            acc = fma(dot_q4_0(flat, w0 + b * 16, xq, base + b * 32),
                                      splat(dw[b] * dx[r, b]), acc)
                    else:
                        for b in range(n_blocks):
                            acc = fma(dot_q4_1(flat, w0 + b * 16, xq, base + b * 32),
                                      splat(dw[b] * dx[r, b]), acc)
                    m = np.float32(0)
                    if kind == 2:
                        for b in range(n_blocks):
                            m = m + mw[b] * sx[r, b]
                    out[r, o] = vsum(acc) + m

    # fastmath stays off: the float order is the docstring's, not LLVM's choice
    got = njit(parallel=True)(product) if parallel else njit(nogil=True)(product)
    _compiled[("product", parallel)] = got
    return got


def block_rows(weight: BlockWeight, rows: np.ndarray, *,
               parallel: bool | None = None) -> np.ndarray:
    """`[R, out]` in rows' dtype (float32 or float64): rows `[R, in]` times the block weight,
    by the module docstring's formula. `parallel` overrides the size rule (same bits)."""
    n_out, n_in = weight.shape
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[1] != n_in:
        raise ValueError(f"rows of shape {rows.shape} do not meet a [{n_out}, {n_in}] weight")
    if rows.dtype not in kernels.TILED_DTYPES:
        raise TypeError(f"the integer kernel takes float32 or float64 rows, got {rows.dtype}")
    xq, dx, sx = quantize_rows(rows)
    out = np.empty((rows.shape[0], n_out), dtype=rows.dtype)
    if parallel is None:
        parallel = n_out * n_in >= kernels.PARALLEL_MIN_WEIGHTS
    _product_kernel(parallel)(KIND_IDS[weight.kind], weight.codes, weight.d, weight.m,
                              f16_table(), xq, dx, sx, out)
    return out


def error_bound(weight_float: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`[R, out]`: a bound on |block_rows - rows @ W.T| given the dequantised weight `W`:
    the activation rounding, sum over blocks of (dx_b / 2) * sum_j |w_j|, plus float32
    rounding of the n-term sums, 2 * n * 2^-24 * sum_j |w_j x_j| (with n the row's length:
    the budget grows with the reduction), computed in float64."""
    w = np.abs(np.asarray(weight_float, np.float64))
    x = np.asarray(rows, np.float32).astype(np.float64)
    n = w.shape[1]
    _, dx, _ = quantize_rows(rows)
    blocks_w = w.reshape(w.shape[0], n // BLOCK, BLOCK).sum(axis=2)  # [out, nb]
    rounding = 0.5 * dx.astype(np.float64) @ blocks_w.T  # [R, out]
    magnitude = np.abs(x) @ w.T
    return rounding * (1 + 2.0**-10) + 2.0 * n * 2.0**-24 * (magnitude + rounding)
