"""The integer kernel: `Y[r] = W @ X[r]` for weights in ggml blocks (blocks.py), by 8-bit dot
products, the way llama.cpp multiplies its Q4_0 / Q4_1 / Q8_0 weights.

Each activation row is first quantised to 8 bits per block of 32 columns (`quantize_rows`),
a scheme of the Q8_0 / Q8_1 kind, in float32:

    amax = max |x_j| over the block;  dx = amax / 127;  q_j = rint(x_j * (127 / amax))
    (q = 0 and dx = 0 for an all-zero block);  sx = dx * sum_j q_j   (the block sum, for q4_1)

Then for row r and output o, with the weight block b holding codes c_j and scales dw (, mw):

    v_b[l] = c_4l q_4l + c_4l+1 q_4l+1 + c_4l+2 q_4l+2 + c_4l+3 q_4l+3     l = 0..7
             an exact int32, taken to float32 exactly (|v| <= 4 * 128 * 127)
             (q8_0: c = q; q4_0: c = nibble - 8; q4_1: c = nibble)
    even blocks b = 0, 2, ..:  e[l] = fma(v_b[l], dw_b * dx_b, e[l])     in order of b
    odd blocks  b = 1, 3, ..:  o[l] = fma(v_b[l], dw_b * dx_b, o[l])     in order of b
    m (q4_1; 0 otherwise): 16 lanes m[j] = fma(mw_b, sx_b, m[j]) over b = j, j + 16, .. for
      the whole groups of 16 blocks, tree(m), then m = fma(mw_b, sx_b, m) for the last nb % 16
      blocks in order
    y = tree(e + o) + m      tree: halve the 8 lanes and add the halves lane by lane, to one
    all in float32 (fma rounds once), from e = o = 0.

The integer sums are exact whatever instruction computes them, and the float steps run in one
fixed order per (row, output), compiled without fastmath; nothing of one row enters another
row's result. So a row's bits do not depend on the batch: a verify of 8 rows gives, row for
row, what 8 steps give (tests/forward/test_int8_kernel.py proves it for 1..16 rows), and they
do not depend on the machine either: with AVX-VNNI each v_b is one 256-bit `vpdpbusd`
(unsigned codes times signed activations, four products a lane: the q8_0 / q4_0 codes go in as
|c| with the activation's sign flipped where c < 0, as llama.cpp does), with AVX-512 VNNI one
512-bit `vpdpbusd` makes two blocks' lanes and one 16-lane fma updates e and o together (its
codes always unsigned: q8_0's c + 128 and q4_0's nibble c + 8, each lane started from -128 or
-8 times its four activations' sum, so the same integer), and elsewhere LLVM's portable form
computes the same four-product lanes (`lanes_form()` says which; the three are compared bit
for bit in the tests).

Against the float path (the weight dequantised, times the unquantised row) the only new error is
the activation's rounding, at most dx_b / 2 per element: |Y_int - Y_float| is bounded by
`error_bound` (that per-block sum, plus float32 rounding that grows with the row's length).

How it runs: outputs are split into tasks of TASK_OUTS over threads; for each output, the rows
go by tiles that share each weight block's load and nibble split while it sits in registers:
up to eight rows in the 512-bit form (32 registers hold eight accumulators), up to four in the
256-bit ones, so a verify of R rows reads each weight from memory once and decodes it R / 8
(R / 4) times. The 256-bit forms keep two accumulators (even and odd blocks) a row, two FMA
chains in flight; the 512-bit form one 16-lane accumulator a row, the tile's rows in flight,
and for one row (a decode step) it goes two outputs at a time, two chains in flight, each
output's block scales multiplied by the row's once. Its tiles of 2..8 rows take q4_1's min
term for all their rows at once (row i in lane i, the same operations per row). A parallel
product runs its tasks in a few contiguous spans a thread (spans_kernel).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from onebit.models import kernel_cache, kernels
from onebit.models.blocks import ALIGN, BLOCK, BlockWeight, aligned_empty

# outputs per parallel task (a weight row's scales are decoded once per task per output)
TASK_OUTS = 16
# contiguous spans of tasks a parallel product makes per thread (spans_kernel): a few, so a
# thread that started late can still take another, and few calls
SPANS_PER_THREAD = 4
KIND_IDS = {"q8_0": 0, "q4_0": 1, "q4_1": 2}
# how many outputs ahead a task prefetches its weight rows (a row is 288 bytes of q4_1 codes
# for a 576-wide input: from memory, the hardware prefetcher alone leaves the kernel waiting)
PREFETCH_AHEAD = 2
#: `ONEBIT_INT8_LANES=portable` compiles the portable lanes even on a VNNI machine (the same
#: bits; for comparing the two forms and for machines whose VNNI the compiler mis-detects).
LANES_ENV = "ONEBIT_INT8_LANES"

_compiled: dict[object, Callable] = {}


def f16_table() -> np.ndarray:
    """float32 value of every float16 bit pattern (the scales' decoder; exact)."""
    table = _compiled.get("table")
    if table is None:
        table = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
        table = _compiled["table"] = table.astype(np.float32)
    return table


def host_has_vnni(wide: bool = False) -> bool:
    """Whether numba compiles for a CPU with a 256-bit `vpdpbusd` (AVX-VNNI, or AVX-512 VNNI
    with VL), or with `wide`, the 512-bit one (AVX-512 VNNI and BW)."""
    key = ("vnni", wide)
    got = _compiled.get(key)
    if got is None:
        import llvmlite.binding as ll
        from numba.core import config

        if config.CPU_NAME not in (None, "host") or config.CPU_FEATURES:
            got = False  # compiling for another CPU than this one: stay portable
        else:
            f = ll.get_host_cpu_features()
            if wide:
                got = bool(f.get("avx512vnni") and f.get("avx512bw") and f.get("avx512vl"))
            else:
                got = bool(f.get("avxvnni") or (f.get("avx512vnni") and f.get("avx512vl")))
        _compiled[key] = got
    return got


FORMS = ("vnni512", "vnni", "portable")


def lanes_form() -> str:
    """How this process computes the four-product lanes: "vnni512" (two blocks a 512-bit
    `vpdpbusd`), "vnni" (one block a 256-bit one) or "portable"; the best the CPU has unless
    `ONEBIT_INT8_LANES` names a lesser one. All three give the same bits."""
    wanted = os.environ.get(LANES_ENV, "").strip().lower()
    if wanted not in ("", *FORMS):
        raise ValueError(f"{LANES_ENV}={wanted!r}: expected one of {FORMS}")
    for form in FORMS[FORMS.index(wanted) if wanted else 0:]:
        if form == "portable" or host_has_vnni(wide=form == "vnni512"):
            return form
    return "portable"


def _vec(dtype_name: str, n: int):
    from numba.core import types

    return kernels._tiled_intrinsics()["Vec"](getattr(types, dtype_name), n)


def block_ops(form: str) -> dict[str, object]:
    """The numba intrinsics the kernel is written in, for lanes `form`:

    - `codes_q8(a, i)` / `codes_q4_0(a, i)` / `codes_q4_1(a, i)`: one block's 32 weight codes
      c_0..c_31 as a vector of int8 (q4: the 16 bytes at a[i], low nibbles then high nibbles,
      minus 8 for q4_0; q8_0: the 32 int8 codes at a[i]);
    - `dot_signed(c, b, j)` / `dot_unsigned(c, b, j)`: the 8 exact four-product lanes v[l]
      of codes c (signed: q8_0 / q4_0; unsigned 0..15: q4_1) with the int8 b[j .. j + 31], as
      8 float32;
    - `splat(x)`, `zeros()`, `add(a, b)`: 8 float32 lanes."""
    got = _compiled.get(("ops", form))
    if got is not None:
        return got
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    lanes, codes_type = _vec("float32", 8), _vec("int8", 32)
    i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
    v32i8, v8i32 = ir.VectorType(i8, 32), ir.VectorType(i32, 8)
    v8f = ir.VectorType(ir.FloatType(), 8)

    def byte_array(x):
        return (isinstance(x, types.Array) and x.ndim == 1 and x.layout in "CA"
                and x.dtype in (types.int8, types.uint8))

    def load(context, builder, arr_type, arr, idx, n):
        ary = context.make_array(arr_type)(context, builder, arr)
        ptr = builder.gep(ary.data, [idx], inbounds=True)
        return builder.load(builder.bitcast(ptr, ir.VectorType(i8, n).as_pointer()), align=1)

    def make_codes(offset: int | None):
        @intrinsic
        def codes(typingctx, a, i):
            if not byte_array(a) or not isinstance(i, types.Integer):
                return None

            def codegen(context, builder, sig, args):
                if offset is None:
                    return load(context, builder, sig.args[0], args[0], args[1], 32)
                v = load(context, builder, sig.args[0], args[0], args[1], 16)
                lo = builder.and_(v, ir.Constant(ir.VectorType(i8, 16), [15] * 16))
                hi = builder.lshr(v, ir.Constant(ir.VectorType(i8, 16), [4] * 16))
                w = builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(i32, 32),
                                                               list(range(32))))
                if offset:
                    w = builder.sub(w, ir.Constant(v32i8, [offset] * 32))
                return w

            return codes_type(a, i), codegen

        return codes

    def four_product_lanes(builder, unsigned_a, signed_b):
        """v[l] = sum_k a[4l+k] * b[4l+k], a unsigned 0..128 (as i8 bits), b signed."""
        if form in ("vnni", "vnni512"):
            fnty = ir.FunctionType(v8i32, [v8i32] * 3)
            fn = cgutils.get_or_insert_function(builder.module, fnty,
                                                "llvm.x86.avx512.vpdpbusd.256")
            return builder.call(fn, [ir.Constant(v8i32, None), builder.bitcast(unsigned_a, v8i32),
                                     builder.bitcast(signed_b, v8i32)])
        x = builder.zext(unsigned_a, ir.VectorType(i16, 32))
        y = builder.sext(signed_b, ir.VectorType(i16, 32))
        p = builder.sext(builder.mul(x, y), ir.VectorType(i32, 32))  # |a b| <= 128 * 127
        total = None
        for k in range(4):
            part = builder.shuffle_vector(p, p, ir.Constant(v8i32, list(range(k, 32, 4))))
            total = part if total is None else builder.add(total, part)
        return total

    def make_dot(signed: bool):
        @intrinsic
        def dot(typingctx, c, b, j):
            if c != codes_type or not byte_array(b) or not isinstance(j, types.Integer):
                return None

            def codegen(context, builder, sig, args):
                w = args[0]
                y = load(context, builder, sig.args[1], args[1], args[2], 32)
                if signed:  # |c| times (b with c's sign): the same products, a unsigned
                    zero = ir.Constant(v32i8, None)
                    negative = builder.icmp_signed("<", w, zero)
                    w_abs = builder.select(negative, builder.neg(w), w)
                    y = builder.select(negative, builder.neg(y), y)
                    y = builder.select(builder.icmp_signed("==", w, zero), zero, y)
                    w = w_abs
                return builder.sitofp(four_product_lanes(builder, w, y), v8f)

            return lanes(c, b, j), codegen

        return dot

    @intrinsic
    def splat(typingctx, x):
        if x != types.float32:
            return None

        def codegen(context, builder, sig, args):
            v = builder.insert_element(ir.Constant(v8f, None), args[0], ir.Constant(i32, 0))
            return builder.shuffle_vector(v, v, ir.Constant(v8i32, [0] * 8))

        return lanes(x), codegen

    @intrinsic
    def zeros(typingctx):
        def codegen(context, builder, sig, args):
            return ir.Constant(v8f, None)

        return lanes(), codegen

    @intrinsic
    def add(typingctx, a, b):
        if a != lanes or b != lanes:
            return None

        def codegen(context, builder, sig, args):
            return builder.fadd(args[0], args[1])

        return lanes(a, b), codegen

    @intrinsic
    def prefetch(typingctx, a, i):
        """A hint to bring the cache line of the byte array's a[i] in (`llvm.prefetch`); it
        reads nothing into a value and cannot fault."""
        if not byte_array(a) or not isinstance(i, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = builder.gep(ary.data, [args[1]], inbounds=False)
            i8p = ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
            builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
            return context.get_dummy_value()

        return types.none(a, i), codegen

    lanes16 = _vec("float32", 16)

    @intrinsic
    def halves16(typingctx, a, i):
        """a[i .. i + 15] (uint16 float16 bit patterns) as 16 float32 (exact; F16C's vcvtph2ps
        where the CPU has it)."""
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.dtype == types.uint16
                and isinstance(i, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = builder.gep(ary.data, [args[1]], inbounds=True)
            v = builder.load(builder.bitcast(ptr, ir.VectorType(ir.HalfType(), 16).as_pointer()),
                             align=2)
            return builder.fpext(v, ir.VectorType(ir.FloatType(), 16))

        return lanes16(a, i), codegen

    @intrinsic
    def store16(typingctx, a, i, v):
        """a[i .. i + 15] = v (float32 lanes)."""
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.dtype == types.float32
                and isinstance(i, types.Integer) and v == lanes16):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = builder.gep(ary.data, [args[1]], inbounds=True)
            builder.store(args[2], builder.bitcast(ptr, args[2].type.as_pointer()), align=4)
            return context.get_dummy_value()

        return types.none(a, i, v), codegen

    wide = _wide_ops(intrinsic, ir, cgutils, types, byte_array, load) if form == "vnni512" else {}
    got = _compiled[("ops", form)] = dict(**wide, prefetch=prefetch, halves16=halves16,
                                          store16=store16,
        codes_q8=make_codes(None), codes_q4_0=make_codes(8), codes_q4_1=make_codes(0),
        dot_signed=make_dot(True), dot_unsigned=make_dot(False),
        splat=splat, zeros=zeros, add=add)
    return got


def _wide_ops(intrinsic, ir, cgutils, types, byte_array, load) -> dict[str, object]:
    """The 512-bit forms, two blocks at once, for `block_ops("vnni512")`. Every operand a row
    brings (its codes, its pair scales `dxx`, its lane corrections) sits at the same byte
    offset of its own array (a row is n_in bytes of each: pair_scales_kernel), so a tile's rows
    share one index register per row:

    - `codes2_q8(a, i)` / `codes2_q4(a, i)`: blocks b and b + 1 as 64 unsigned codes: q8_0's
      c + 128 (its bits with the sign bit flipped), q4's nibbles 0..15 (low then high nibbles
      of each block, q4_0's as q4_1's: its - 8 is in the correction);
    - `dot2(c, b, off, corr)`: 16 exact lanes, block b's 8 then block b + 1's 8, each lane the
      four products of `dot_*` in the 256-bit form: one `vpdpbusd` of the unsigned codes and
      the int8 b[off .. off + 63], started from the lanes' correction at corr's byte `off`
      (-128 or -8 times the lane's activation sum, lane_corrections_kernel; 0 for q4_1, whose
      codes are the values), so sum (c + 128) x - 128 sum x = sum c x: the same integers;
    - `pair_at(s, i)`: 8 lanes of s[i], 8 of s[i + 1] (float32 array);
    - `vload_at(a, off)`: 16 float32 at byte `off` of a float32 array;
    - `vload8(a, i)`: a[i .. i + 7] of a float32 array; `lane8(v, i)`: lane i of 8;
    - `zeros16()`, `mul16(a, b)`, and `low / high(v)`: a 16-lane vector's halves. A 16-lane
      accumulator is then the even and odd accumulators side by side: the same lanes, the
      same fma per lane, so the same bits."""
    i8, i32 = ir.IntType(8), ir.IntType(32)
    v64i8, v16i32 = ir.VectorType(i8, 64), ir.VectorType(i32, 16)
    v16f = ir.VectorType(ir.FloatType(), 16)
    lanes16, lanes8, codes64 = _vec("float32", 16), _vec("float32", 8), _vec("int8", 64)

    def f32_array(x):
        return isinstance(x, types.Array) and x.ndim == 1 and x.dtype == types.float32

    def at_byte(context, builder, arr_type, arr, off, vector):
        ary = context.make_array(arr_type)(context, builder, arr)
        base = builder.bitcast(ary.data, i8.as_pointer())
        ptr = builder.gep(base, [off], inbounds=True)
        return builder.load(builder.bitcast(ptr, vector.as_pointer()), align=1)

    def floats_at(context, builder, arr_type, arr, i, n):  # arr[i .. i + n - 1], float32
        ary = context.make_array(arr_type)(context, builder, arr)
        ptr = builder.gep(ary.data, [i], inbounds=True)
        vector = ir.VectorType(ir.FloatType(), n)
        return builder.load(builder.bitcast(ptr, vector.as_pointer()), align=4)

    def make_codes(q8: bool):
        @intrinsic
        def codes2(typingctx, a, i):
            if not byte_array(a) or not isinstance(i, types.Integer):
                return None

            def codegen(context, builder, sig, args):
                if q8:
                    v = load(context, builder, sig.args[0], args[0], args[1], 64)
                    return builder.xor(v, ir.Constant(v64i8, [-128] * 64))
                v = load(context, builder, sig.args[0], args[0], args[1], 32)
                lo = builder.and_(v, ir.Constant(ir.VectorType(i8, 32), [15] * 32))
                hi = builder.lshr(v, ir.Constant(ir.VectorType(i8, 32), [4] * 32))
                order = (list(range(0, 16)) + list(range(32, 48)) + list(range(16, 32))
                         + list(range(48, 64)))
                return builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(i32, 64), order))

            return codes64(a, i), codegen

        return codes2

    def make_dot(corrected: bool):
        @intrinsic
        def dot2(typingctx, c, b, off, corr):
            if (c != codes64 or not byte_array(b) or not isinstance(off, types.Integer)
                    or not (isinstance(corr, types.Array) and corr.dtype == types.int32)):
                return None

            def codegen(context, builder, sig, args):
                y = load(context, builder, sig.args[1], args[1], args[2], 64)
                start = (at_byte(context, builder, sig.args[3], args[3], args[2], v16i32)
                         if corrected else ir.Constant(v16i32, None))
                fnty = ir.FunctionType(v16i32, [v16i32] * 3)
                fn = cgutils.get_or_insert_function(builder.module, fnty,
                                                    "llvm.x86.avx512.vpdpbusd.512")
                v = builder.call(fn, [start, builder.bitcast(args[0], v16i32),
                                      builder.bitcast(y, v16i32)])
                return builder.sitofp(v, v16f)

            return lanes16(c, b, off, corr), codegen

        return dot2

    @intrinsic
    def pair_at(typingctx, s, i):
        if not f32_array(s) or not isinstance(i, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            two = floats_at(context, builder, sig.args[0], args[0], args[1], 2)
            return builder.shuffle_vector(two, two, ir.Constant(v16i32, [0] * 8 + [1] * 8))

        return lanes16(s, i), codegen

    @intrinsic
    def vload_at(typingctx, a, off):
        if not f32_array(a) or not isinstance(off, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            return at_byte(context, builder, sig.args[0], args[0], args[1], v16f)

        return lanes16(a, off), codegen

    @intrinsic
    def mul16(typingctx, a, b):
        if a != lanes16 or b != lanes16:
            return None

        def codegen(context, builder, sig, args):
            return builder.fmul(args[0], args[1])

        return lanes16(a, b), codegen

    @intrinsic
    def zeros16(typingctx):
        def codegen(context, builder, sig, args):
            return ir.Constant(v16f, None)

        return lanes16(), codegen

    def make_half(start: int):
        @intrinsic
        def half(typingctx, v):
            if v != lanes16:
                return None

            def codegen(context, builder, sig, args):
                mask = ir.Constant(ir.VectorType(i32, 8), list(range(start, start + 8)))
                return builder.shuffle_vector(args[0], args[0], mask)

            return lanes8(v), codegen

        return half

    @intrinsic
    def vload8(typingctx, a, i):
        if not f32_array(a) or not isinstance(i, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            return floats_at(context, builder, sig.args[0], args[0], args[1], 8)

        return lanes8(a, i), codegen

    @intrinsic
    def lane8(typingctx, v, i):
        if v != lanes8 or not isinstance(i, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            return builder.extract_element(args[0], args[1])

        return types.float32(v, i), codegen

    return dict(codes2_q8=make_codes(True), codes2_q4=make_codes(False),
                dot2_corrected=make_dot(True), dot2_plain=make_dot(False), pair_at=pair_at,
                vload_at=vload_at, zeros16=zeros16, mul16=mul16, vload8=vload8, lane8=lane8,
                low=make_half(0), high=make_half(8))


def _quantize_kernel(one_row: bool = False) -> Callable:
    got = _compiled.get(("quantize", one_row))
    if got is None:
        def quantize_row(x, xq, at, dx, sx):  # pragma: no cover - compiled
            """Row x [n] into xq[at .. at + n), its block scales into dx [n / 32], sx."""
            n = x.shape[0]
            for b in range(n // 32):
                first = b * 32
                amax = np.float32(0)
                for j in range(32):
                    a = abs(x[first + j])
                    if a > amax:
                        amax = a
                d = amax / np.float32(127)
                inv = np.float32(127) / amax if amax > 0 else np.float32(0)
                total = 0
                for j in range(32):
                    q = np.rint(x[first + j] * inv)
                    q = min(max(q, np.float32(-127)), np.float32(127))
                    qi = np.int8(q)
                    xq[at + first + j] = qi
                    total += qi
                dx[b] = d
                sx[b] = d * np.float32(total)

        quantize_row = kernel_cache.jit(quantize_row, (), nogil=True)

        def quantize(x, xq, dx, sx):  # pragma: no cover - compiled
            n_rows, n = x.shape
            for r in range(n_rows):
                quantize_row(x[r], xq, r * n, dx[r], sx[r])

        quantize = kernel_cache.jit(quantize, (), nogil=True)
        _compiled[("quantize", False)], _compiled[("quantize", True)] = quantize, quantize_row
        got = _compiled[("quantize", one_row)]
    return got


def quantize_kernel(one_row: bool = False) -> Callable:
    """The compiled `quantize(x [R, in] float32, xq int8 [R * in], dx [R, in/32],
    sx [R, in/32])` that `quantize_rows` runs, or with `one_row`, `quantize_row(x [in], xq, at,
    dx [in/32], sx [in/32])` that it runs per row (for compiled callers: the fused stack)."""
    return _quantize_kernel(one_row)


def quantize_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(q int8 [R * in], dx float32 [R, in/32], sx float32 [R, in/32])` of rows `[R, in]`
    (taken in float32), by the module docstring's scheme."""
    x = np.ascontiguousarray(rows, dtype=np.float32)
    n_rows, n = x.shape
    if n % BLOCK:
        raise ValueError(f"rows of width {n} do not split into blocks of {BLOCK}")
    xq = aligned_empty(n_rows * n, np.int8)  # its rows' 64-byte loads on cache lines
    dx = np.empty((n_rows, n // BLOCK), np.float32)
    sx = np.empty((n_rows, n // BLOCK), np.float32)
    _quantize_kernel()(x, xq, dx, sx)
    return xq, dx, sx


# The range function, as source: each tile of k rows written out in full (numba keeps a row's
# accumulators in registers only when they are named variables, and a helper function taking
# the arrays would count references on every call: measured 1.5x slower for one row).
_RANGE = """
def product_range(codes, d16, m16, table, xq, dx, dxx, sx, corr, out, t_lo, t_hi):
    n_out, nb = d16.shape
    n_rows, n_in = out.shape[0], nb * 32
    step = codes.shape[1] // nb  # code bytes per block
    flat = codes.reshape(-1)
    sx_flat = sx.reshape(-1)
    dxx_flat = dxx.reshape(-1)
    corr_flat = corr.reshape(-1)
    dx_flat = dx.reshape(-1)
    d_flat = d16.reshape(-1)
    m_flat = m16.reshape(-1)
    # the scales of one output (two in the one-row path: the second's at nb .., each times
    # the row's dx), one array each, allocated once per call (a task's call in the stack)
    # (each on a cache line, blocks.ALIGN: their 16-lane stores and loads cross none)
    buf = np.zeros(4 * nb + 2 * ALIGN // 4, np.float32)
    at = (-buf.ctypes.data) % ALIGN // 4
    dw = buf[at:at + 2 * nb]
    at2 = at + (2 * nb + ALIGN // 4 - 1) // (ALIGN // 4) * (ALIGN // 4)
    mw = buf[at2:at2 + 2 * nb]
    o_lo, o_hi = t_lo * TASK_OUTS, min(n_out, t_hi * TASK_OUTS)
{setup}{dual}
    for o in range(o_lo, o_hi):
        for b in range(0, nb - 15, 16):  # the scales, 16 at a time
            store16(dw, b, halves16(d_flat, o * nb + b))
            if WITH_MIN:
                store16(mw, b, halves16(m_flat, o * nb + b))
        for b in range(nb - nb % 16, nb):
            dw[b] = table[d16[o, b]]
            if WITH_MIN:
                mw[b] = table[m16[o, b]]
        w0 = o * codes.shape[1]
        if o + AHEAD < n_out:  # the weight row AHEAD outputs on, while this one computes
            for at in range(0, codes.shape[1], 64):
                prefetch(flat, w0 + AHEAD * codes.shape[1] + at)
        r = 0
        while r < n_rows:
            left = n_rows - r
{tiles}
"""

_TILE = """
            {test}:
{zeros}
                for b in range(0, nb - 1, 2):
                    c = load_codes(flat, w0 + b * step)
{even}
                    c = load_codes(flat, w0 + (b + 1) * step)
{odd}
                if nb % 2:
                    b = nb - 1
                    c = load_codes(flat, w0 + b * step)
{even}
{store}
                r += {k}
"""


# One row in the 512-bit form (a decode step): two outputs at a time, so two accumulator chains
# are in flight and the row's activation loads are shared; each output's operations are the
# one-row tile's, in its order, so the bits are the same. An odd last output goes the general
# way.
_DUAL = """
    if n_rows == 1:
        o = o_lo
        while o + 1 < o_hi:
            for b in range(0, nb - 15, 16):  # dw_b dx_b: the tile's mul16(w2, dxx) per lane
                xd = vload(dx_flat, b)
                store16(dw, b, mul16(halves16(d_flat, o * nb + b), xd))
                store16(dw, nb + b, mul16(halves16(d_flat, (o + 1) * nb + b), xd))
                if WITH_MIN:
                    store16(mw, b, halves16(m_flat, o * nb + b))
                    store16(mw, nb + b, halves16(m_flat, (o + 1) * nb + b))
            for b in range(nb - nb % 16, nb):
                dw[b] = table[d16[o, b]] * dx_flat[b]
                dw[nb + b] = table[d16[o + 1, b]] * dx_flat[b]
                if WITH_MIN:
                    mw[b] = table[m16[o, b]]
                    mw[nb + b] = table[m16[o + 1, b]]
            wa = o * codes.shape[1]
            wb = wa + codes.shape[1]
            if o + 1 + 2 * AHEAD < n_out:  # the pair of rows 2 * AHEAD outputs on
                for at in range(0, 2 * codes.shape[1], 64):
                    prefetch(flat, wa + 2 * AHEAD * codes.shape[1] + at)
            accA = zeros16()
            accB = zeros16()
            for b in range(0, nb - 1, 2):
                cA = load_codes2(flat, wa + b * step)
                accA = fma(dot2(cA, xq, b * 32, corr_flat), pair_at(dw, b), accA)
                cB = load_codes2(flat, wb + b * step)
                accB = fma(dot2(cB, xq, b * 32, corr_flat), pair_at(dw, nb + b), accB)
            eA = low(accA)
            oA = high(accA)
            eB = low(accB)
            oB = high(accB)
            if nb % 2:
                b = nb - 1
                c = load_codes(flat, wa + b * step)
                eA = fma(dot(c, xq, b * 32), splat(dw[b]), eA)
                c = load_codes(flat, wb + b * step)
                eB = fma(dot(c, xq, b * 32), splat(dw[nb + b]), eB)
            mA = np.float32(0)
            mB = np.float32(0)
            if WITH_MIN:
                mvA = vzero(mw)
                mvB = vzero(mw)
                for b in range(0, nb - 15, 16):
                    sv = vload(sx_flat, b)
                    mvA = fma(vload(mw, b), sv, mvA)
                    mvB = fma(vload(mw, nb + b), sv, mvB)
                mA = vsum(mvA)
                mB = vsum(mvB)
                for b in range(nb - nb % 16, nb):
                    mA = fma(mw[b], sx[0, b], mA)
                    mB = fma(mw[nb + b], sx[0, b], mB)
            out[0, o] = vsum(add(eA, oA)) + mA
            out[0, o + 1] = vsum(add(eB, oB)) + mB
            o += 2
        o_lo = o
"""


# The 512-bit form's tiles of two rows or more take q4_1's min term for all their rows at once:
# lane i of 8 is row r + i, so each (row, output) gets the one-row formula's operations in its
# order (16 block lanes by fma, the halving tree, the tail in order), 8 rows an instruction.
# sxt holds sx transposed (block-major, 8 zero lanes past the last row, for the last tile).
_WIDE_SETUP = """
    sxw = n_rows + 8
    sxt = np.zeros(nb * sxw if WITH_MIN and n_rows > 1 else 0, np.float32)
    if WITH_MIN and n_rows > 1:
        for rr in range(n_rows):
            for b in range(nb):
                sxt[b * sxw + rr] = sx[rr, b]
"""


# The 512-bit tile: blocks b and b + 1 in one 16-lane accumulator (its halves are the even and
# odd accumulators of _TILE), the last block of an odd count on the low half.
_WIDE_TILE = """
            {test}:
{zeros}
                for b in range(0, nb - 1, 2):
                    c = load_codes2(flat, w0 + b * step)
                    w2 = pair_at(dw, b)
{pairs}
{halves}
                if nb % 2:
                    b = nb - 1
                    c = load_codes(flat, w0 + b * step)
{even}
{store}
                r += {k}
"""


def _range_source(wide_form: bool = False) -> str:
    def lines(acc: str, b: str, k: int) -> str:
        return "\n".join(
            f"                    {acc}{i} = fma(dot(c, xq, (r + {i}) * n_in + {b} * 32), "
            f"splat(dw[{b}] * dx[r + {i}, {b}]), {acc}{i})" for i in range(k))

    def store(k: int) -> str:
        out = []
        for i in range(k):
            out += ["                m = np.float32(0)",
                    "                if WITH_MIN:",
                    "                    mv = vzero(mw)",
                    "                    for b in range(0, nb - 15, 16):",
                    "                        mv = fma(vload(mw, b), "
                    f"vload(sx_flat, (r + {i}) * nb + b), mv)",
                    "                    m = vsum(mv)",
                    "                    for b in range(nb - nb % 16, nb):",
                    f"                        m = fma(mw[b], sx[r + {i}, b], m)",
                    f"                out[r + {i}, o] = vsum(add(e{i}, o{i})) + m"]
        return "\n".join(out)

    def wide(k: int) -> str:  # row r + i's operands all at byte (r + i) * n_in + b * 32
        return "\n".join(
            f"                    at{i} = (r + {i}) * n_in + b * 32\n"
            f"                    acc{i} = fma(dot2(c, xq, at{i}, corr_flat), "
            f"mul16(w2, vload_at(dxx_flat, at{i})), acc{i})"
            for i in range(k))

    def rows_store(k: int) -> str:  # the 512-bit tiles of k >= 2 rows (_WIDE_SETUP)
        t = [f"t{j}" for j in range(16)]
        out = [f"                s{i} = vsum(add(e{i}, o{i}))" for i in range(k)]
        out += ["                m8 = zeros()", "                if WITH_MIN:"]
        out += [f"                    {name} = zeros()" for name in t]
        out += ["                    for b in range(0, nb - 15, 16):"]
        out += [f"                        t{j} = fma(splat(mw[b + {j}]), "
                f"vload8(sxt, (b + {j}) * sxw + r), t{j})" for j in range(16)]
        width = 16
        while width > 1:  # the halving tree, as vsum's
            width //= 2
            out += [f"                    t{j} = add(t{j}, t{j + width})" for j in range(width)]
        out += ["                    m8 = t0",
                "                    for b in range(nb - nb % 16, nb):",
                "                        m8 = fma(splat(mw[b]), vload8(sxt, b * sxw + r), m8)"]
        out += [f"                out[r + {i}, o] = s{i} + lane8(m8, {i})" for i in range(k)]
        return "\n".join(out)

    tiles = []
    # the 512-bit form has 32 registers: a tile of 8 rows keeps its 8 accumulators, the codes
    # and the scales in registers (each block pair's codes are decoded once for 8 rows); the
    # 256-bit forms keep two accumulators a row in 16 registers, so their widest tile is 4
    # and, in the 512-bit form, every tile size below it has its own tile: a verify of 3, 5,
    # 6 or 7 rows decodes each block pair once, not once for each of the tiles of 4, 2 and 1
    # rows it would otherwise split into (the tile a row lands in never changes its bits)
    sizes = (((8, "if left >= 8"), *((k, f"elif left == {k}") for k in (7, 6, 5, 4, 3)))
             if wide_form else ((4, "if left >= 4"),))
    for k, test in (*sizes, (2, "elif left >= 2"), (1, "else")):
        if wide_form:
            tiles.append(_WIDE_TILE.format(
                test=test, k=k, zeros="\n".join(f"                acc{i} = zeros16()"
                                                for i in range(k)),
                pairs=wide(k), halves="\n".join(f"                e{i} = low(acc{i})\n"
                                                 f"                o{i} = high(acc{i})"
                                                 for i in range(k)),
                even=lines("e", "b", k), store=rows_store(k) if k > 1 else store(k)))
        else:
            tiles.append(_TILE.format(
                test=test, k=k,
                zeros="\n".join(f"                e{i} = zeros()\n                o{i} = zeros()"
                                for i in range(k)),
                even=lines("e", "b", k), odd=lines("o", "(b + 1)", k), store=store(k)))
    return _RANGE.format(tiles="".join(tiles), dual=_DUAL if wide_form else "",
                         setup=_WIDE_SETUP if wide_form else "")


def _product_kernel(kind: int, parallel: bool, form: str | None = None) -> Callable:
    """The compiled `product(codes, d16, m16, table, xq, dx, sx, out)` for weights of `kind`
    (KIND_IDS): out[r, o] by the module docstring's formula."""
    form = form or lanes_form()
    key = ("product", kind, parallel, form)
    got = _compiled.get(key)
    if got is not None:
        return got
    from numba import njit, prange

    ops = block_ops(form)
    tasks_of = njit(inline="always")(tasks)
    pairs_of = pair_scales_kernel()
    parts = kernels._tiled_intrinsics()
    namespace = dict(
        load_codes=ops[("codes_q8", "codes_q4_0", "codes_q4_1")[kind]],
        dot=ops["dot_unsigned" if kind == 2 else "dot_signed"],
        splat=ops["splat"], zeros=ops["zeros"], add=ops["add"],
        fma=parts["fma"], vsum=parts["vsum"], vload=parts["vload"], vzero=parts["vzero"])
    # __name__: numba's on-disk cache rebuilds a kernel's environment from its module's name
    namespace.update(__name__=__name__, np=np, TASK_OUTS=TASK_OUTS, ALIGN=ALIGN,
                     WITH_MIN=kind == 2, AHEAD=PREFETCH_AHEAD, prefetch=ops["prefetch"],
                     halves16=ops["halves16"], store16=ops["store16"])
    if form == "vnni512":
        namespace.update(
            load_codes2=ops["codes2_q8" if kind == 0 else "codes2_q4"],
            dot2=ops["dot2_plain" if kind == 2 else "dot2_corrected"],
            **{name: ops[name] for name in ("pair_at", "vload_at", "zeros16", "low", "high",
                                           "mul16", "vload8", "lane8")})
    exec(_range_source(form == "vnni512"), namespace)  # noqa: S102 - our own template, no outside input
    product_range = namespace["product_range"]

    # fastmath stays off: the float order is the docstring's, not LLVM's choice
    ranged = kernel_cache.jit(product_range, key, nogil=True)
    corrections = lane_corrections_kernel()
    factor = correction_factor(kind, form)

    if parallel:
        spans = spans_kernel()

        def product(codes, d16, m16, table, xq, dx, sx, out):  # pragma: no cover - compiled
            dxx = pairs_of(dx)
            corr = corrections(xq, dx, factor)
            n_t = tasks_of(d16.shape[0])
            n_s = spans(n_t)
            for p in prange(n_s):
                ranged(codes, d16, m16, table, xq, dx, dxx, sx, corr, out, p * n_t // n_s,
                       (p + 1) * n_t // n_s)

        product = kernel_cache.jit(product, key, parallel=True)
    else:
        def product(codes, d16, m16, table, xq, dx, sx, out):  # pragma: no cover - compiled
            ranged(codes, d16, m16, table, xq, dx, pairs_of(dx), sx,
                   corrections(xq, dx, factor), out, 0, tasks_of(d16.shape[0]))

        product = kernel_cache.jit(product, key, nogil=True)

    got = _compiled[key] = product
    _compiled[("range",) + key[1:]] = ranged
    return got


def pair_scales_kernel() -> Callable:
    """The compiled `pair_scales(dx [R, nb]) -> [R, nb * 8]`: each pair of blocks' scales as
    the 512-bit form multiplies them in, 8 lanes of dx[r, 2p] then 8 of dx[r, 2p + 1] at
    lanes 16p .. 16p + 15 (made once per product, not once per weight row and row). A row is
    nb * 8 floats, n_in bytes: a pair's scales sit at the byte offset of its codes in xq."""
    got = _compiled.get("pairs")
    if got is None:
        def pair_scales(dx):  # pragma: no cover - compiled
            rows, nb = dx.shape
            buf = np.zeros(rows * nb * 8 + ALIGN // 4, np.float32)
            at = (-buf.ctypes.data) % ALIGN // 4  # rows on cache lines (blocks.ALIGN)
            out = buf[at:at + rows * nb * 8].reshape((rows, nb * 8))
            for r in range(rows):
                for p in range(nb // 2):
                    for lane in range(16):
                        out[r, 16 * p + lane] = dx[r, 2 * p + lane // 8]
            return out

        pair_scales = kernel_cache.jit(pair_scales, (), nogil=True)

        got = _compiled["pairs"] = pair_scales
    return got


def correction_factor(kind: int, form: str) -> int:
    """What the 512-bit form's lanes start from, per lane activation sum: q8_0's codes go in
    plus 128 and q4_0's as nibbles (their value plus 8), so their lanes start at -128 and -8
    times the lane's activation sum; 0 for q4_1 and for the other forms (no correction)."""
    return (128, 8, 0)[kind] if form == "vnni512" else 0


def lane_corrections_kernel() -> Callable:
    """The compiled `lane_corrections(xq, dx [R, nb], factor) -> int32 [R, nb * 8]`: for
    each pair of blocks p, 16 lanes (block 2p's 8, then 2p + 1's) of -factor times the sum of
    the lane's four int8 activations, laid out as pair_scales' (made once per product). With
    factor 0 (q4_1, whose lanes start at 0 and never read it) it is an empty [R, 0]: nothing
    to fill on every product."""
    got = _compiled.get("corrections")
    if got is None:
        def lane_corrections(xq, dx, factor):  # pragma: no cover - compiled
            rows, nb = dx.shape
            width = nb * 8 if factor else 0
            buf = np.zeros(rows * width + ALIGN // 4, np.int32)
            at = (-buf.ctypes.data) % ALIGN // 4  # rows on cache lines (blocks.ALIGN)
            out = buf[at:at + rows * width].reshape((rows, width))
            if factor:
                for r in range(rows):
                    for p in range(nb // 2):
                        for lane in range(16):
                            at = r * nb * 32 + 64 * p + 4 * lane
                            total = (np.int32(xq[at]) + np.int32(xq[at + 1])
                                     + np.int32(xq[at + 2]) + np.int32(xq[at + 3]))
                            out[r, 16 * p + lane] = -factor * total
            return out

        lane_corrections = kernel_cache.jit(lane_corrections, (), nogil=True)

        got = _compiled["corrections"] = lane_corrections
    return got


def threads_kernel() -> Callable:
    """The compiled `threads() -> int64`: `numba.get_num_threads()` as a parallel kernel may
    ask it, from the threading layer's `get_num_threads` by symbol name (as numba's own
    parallel loops call the layer). numba's `get_num_threads` in compiled code calls the same
    function through its runtime address instead, which marks the kernel "uses dynamic
    globals" and keeps it out of numba's on-disk cache. Only called inside parallel kernels,
    whose compilation starts the threading layer that defines the symbol."""
    got = _compiled.get("threads")
    if got is None:
        from llvmlite import ir
        from numba.core import cgutils, types
        from numba.extending import intrinsic

        @intrinsic
        def threads(typingctx):
            def codegen(context, builder, sig, args):
                # declared as numba's parallel loops declare it (one module may hold both);
                # the C function returns an int, so only the low 32 bits are read
                layer = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(ir.IntType(64), []), "get_num_threads")
                low = builder.trunc(builder.call(layer, []), ir.IntType(32))
                return builder.sext(low, ir.IntType(64))

            return types.int64(), codegen

        got = _compiled["threads"] = threads
    return got


def spans_kernel() -> Callable:
    """The compiled, inlined `spans(n_tasks) -> n`: how many contiguous spans of tasks a
    parallel product splits its tasks into, SPANS_PER_THREAD a thread (at most n_tasks); span
    p runs tasks p * n_tasks // n .. (p + 1) * n_tasks // n - 1. One call a span, not one a
    task: a call's set-up (its scale buffers, its views) cost more than a one-row task's
    work. Which thread computes an output never changes its bits."""
    got = _compiled.get("spans")
    if got is None:
        from numba import njit

        threads = threads_kernel()

        @njit(inline="always")
        def spans(n_tasks):  # pragma: no cover - compiled
            return max(1, min(n_tasks, SPANS_PER_THREAD * threads()))

        got = _compiled["spans"] = spans
    return got


def tasks(n_out: int) -> int:
    """How many tasks of TASK_OUTS outputs `n_out` outputs make."""
    return (n_out + TASK_OUTS - 1) // TASK_OUTS


def range_kernel(kind: str) -> Callable:
    """The compiled `product_range(codes, d16, m16, table, xq, dx, dxx, sx, corr, out, t_lo,
    t_hi)` (dxx: `pair_scales_kernel()(dx)`, corr: `lane_corrections_kernel()(xq, dx,
    correction_factor(KIND_IDS[kind], lanes_form()))`) for
    weights of `kind` ("q8_0" / "q4_0" / "q4_1"), in this process's lanes form: the outputs of
    tasks t_lo .. t_hi - 1 (`tasks(n_out)` in all), for a compiled caller that splits the
    tasks over threads itself (the fused stack)."""
    _product_kernel(KIND_IDS[kind], False)
    return _compiled[("range", KIND_IDS[kind], False, lanes_form())]


def block_rows(weight: BlockWeight, rows: np.ndarray, *,
               parallel: bool | None = None, form: str | None = None) -> np.ndarray:
    """`[R, out]` in rows' dtype (float32 or float64): rows `[R, in]` times the block weight,
    by the module docstring's formula. `parallel` overrides the size rule and `form` the lanes
    form (`lanes_form()`); neither changes a bit."""
    n_out, n_in = weight.shape
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[1] != n_in:
        raise ValueError(f"rows of shape {rows.shape} do not meet a [{n_out}, {n_in}] weight")
    if rows.dtype not in kernels.TILED_DTYPES:
        raise TypeError(f"the integer kernel takes float32 or float64 rows, got {rows.dtype}")
    xq, dx, sx = quantize_rows(rows)
    result = np.empty((rows.shape[0], n_out), dtype=np.float32)
    if parallel is None:
        parallel = n_out * n_in >= kernels.PARALLEL_MIN_WEIGHTS
    _product_kernel(KIND_IDS[weight.kind], parallel, form)(
        weight.codes, weight.d, weight.m, f16_table(), xq, dx, sx, result)
    return result.astype(rows.dtype, copy=False)


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
