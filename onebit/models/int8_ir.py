"""The integer kernel's vector operations as LLVM IR: the numba intrinsics that the generated
range source (int8_source.py) is written in, for each lanes form. Only IR is made here; which
form a process uses, the compiling, the caching and the calling are int8_kernel.py's, and this
module imports nothing of it.

The one computation they serve is int8_kernel.py's formula: for one weight block b (32 codes
c_j) and one activation block (32 int8 q_j, quantised per row), the 8 four-product lanes

    v_b[l] = c_4l q_4l + c_4l+1 q_4l+1 + c_4l+2 q_4l+2 + c_4l+3 q_4l+3     l = 0..7

each an exact int32 (|v| <= 4 * 128 * 127), taken to float32 exactly, then fused into the
row's accumulators with the block's scales (kernels.py's `fma`). The integer sums are exact
whatever instruction computes them, so the three forms below give the same bits:

- "vnni": each v_b is one 256-bit `vpdpbusd` (unsigned codes times signed activations, four
  products a lane). q8_0 / q4_0 codes are signed, so they go in as |c| with the activation's
  sign flipped where c < 0 (and zeroed where c = 0), as llama.cpp does: the same products.
- "vnni512": one 512-bit `vpdpbusd` makes two blocks' lanes (block b's 8, then b + 1's 8),
  so one 16-lane fma updates the even- and odd-block accumulators together. Its codes are
  always unsigned (q8_0's c + 128, q4_0's nibble c + 8, q4_1's nibble), each lane started from
  -128 / -8 / 0 times its four activations' sum (int8_kernel.lane_corrections_kernel), so
  sum (c + k) x - k sum x = sum c x: the same integers, no sign flipped per block. Every
  operand a row brings (codes, pair scales, corrections) sits at the same byte offset of its
  own array, so a tile's rows share one index register each.
- "portable": LLVM's generic form of the same lanes (16-bit products, summed four a lane).

Weight layout (blocks.py): a block's codes are contiguous, q8_0's 32 int8, q4's 16 bytes with
c_0..c_15 in the low nibbles and c_16..c_31 in the high ones; the float16 scales are apart, in
`d16` / `m16` [out, nb]. Loads are unaligned (align=1) byte loads of whole blocks, so a block
never needs a particular address; the scales' float32 buffers sit on cache lines (blocks.ALIGN).
"""

from __future__ import annotations

from onebit.models import kernels


def _vec(dtype_name: str, n: int):
    """numba's type of an n-lane vector of `dtype_name` (kernels.py's Vec)."""
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
    - `splat(x)`, `zeros()`, `add(a, b)`: 8 float32 lanes;
    - `prefetch(a, i)`, `halves16(a, i)`, `store16(a, i, v)`: the cache-line hint, 16 float16
      scales to float32, 16 float32 stored (the scales' buffers of one output);
    - with `form` "vnni512", `_wide_ops`'s two-block forms as well.

    Made afresh on every call (numba intrinsics, each one's codegen the LLVM IR it emits); the
    driver (int8_kernel.block_ops) keeps one set per form."""
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
    return dict(**wide, prefetch=prefetch, halves16=halves16, store16=store16,
                codes_q8=make_codes(None), codes_q4_0=make_codes(8), codes_q4_1=make_codes(0),
                dot_signed=make_dot(True), dot_unsigned=make_dot(False),
                splat=splat, zeros=zeros, add=add)


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

