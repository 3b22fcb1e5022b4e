"""The integer kernel's vector operations as LLVM IR: the numba intrinsics that the generated
range source (int8_source.py) is written in, for each lanes form. Only IR is made here; which
form a process uses, the compiling, the caching and the calling are int8_kernel.py's, and this
module imports nothing of it.

The kernel works on a *group*: 16 consecutive outputs (weight rows) side by side, one output
per 32-bit lane of a 16-lane vector (int8_kernel.py's layout). For one weight block b of a
group, chunk t of its codes is 64 bytes: lane l holds four consecutive codes of output l,
unsigned (q8_0's c + 128, q4's nibbles). One activation row brings four int8 values per chunk,
the same four for every lane. So the operation everything rests on is

    dot4(acc, codes, x, at):  acc[l] += sum_k codes[4l + k] * x[at + k]     k = 0..3, l = 0..15

an exact int32 per lane (|sum| <= 4 * 255 * 127), whatever instruction computes it:

- "vnni512": one 512-bit `vpdpbusd` with the four activations broadcast to every lane;
- "vnni": two 256-bit `vpdpbusd` (AVX-VNNI, or AVX-512 VNNI with VL), lanes 0..7 and 8..15;
- "portable": LLVM's generic form (16-bit products, summed four a lane).

The three give the same integers, so the same bits (tests/forward/test_int8_kernel.py).
The float steps (convert, scale, fma, add) are plain 16-lane LLVM operations, the same in
every form; LLVM splits them into two 256-bit halves where the CPU has no 512-bit vectors.
"""

from __future__ import annotations

from onebit.models import kernels


def _vec(dtype_name: str, n: int):
    """numba's type of an n-lane vector of `dtype_name` (kernels.py's Vec)."""
    from numba.core import types

    return kernels._tiled_intrinsics()["Vec"](getattr(types, dtype_name), n)


def block_ops(form: str) -> dict[str, object]:
    """The numba intrinsics the kernel is written in, for lanes `form`:

    - `codes_raw(a, off)`: the 64 bytes at byte `off` of a uint8 array (a q8_0 chunk, its
      codes stored plus 128);
    - `codes_low(a, off)` / `codes_high(a, off)`: the low / high nibbles of the 64 bytes at
      `off` as 64 bytes 0..15 (a q4 chunk pair: the low nibbles are chunk t, the high ones
      chunk t + 4, as ggml pairs element j with j + 16 in one byte);
    - `dot4(acc, codes, x, at)`: the module docstring's operation, x an int8 array;
    - `isplat(n)`, `izero()`, `iadd(a, b)`, `tofloat(a)`: 16 int32 lanes: n in every lane,
      zeros, the lane sums, each lane's float32 (exact: |a| < 2^24 here);
    - `fsplat(x)`, `fzero()`, `fmul(a, b)`, `fadd(a, b)`: 16 float32 lanes, rounded as the
      scalar operations round;
    - `halves(a, i)`: a[i .. i + 15] (uint16 float16 bit patterns) as 16 float32, exact; of a
      float32 array (q4_1f's scales), the 16 values as they are;
    - `store(a, i, v)`: a[i .. i + 15] = v (a float32 array);
    - `prefetch(a, off)`: a hint to bring the cache line at byte `off` of a byte array in.

    Made afresh on every call (numba intrinsics, each one's codegen the LLVM IR it emits); the
    driver (int8_kernel.block_ops) keeps one set per form."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    floats, ints, codes_type = _vec("float32", 16), _vec("int32", 16), _vec("int8", 64)
    i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
    v64i8, v16i32 = ir.VectorType(i8, 64), ir.VectorType(i32, 16)
    v16f = ir.VectorType(ir.FloatType(), 16)
    every_lane = ir.Constant(v16i32, [0] * 16)

    def array_of(x, *dtypes) -> bool:
        return (isinstance(x, types.Array) and x.ndim == 1 and x.layout in "CA"
                and x.dtype in dtypes)

    def byte_pointer(context, builder, arr_type, arr, off):
        ary = context.make_array(arr_type)(context, builder, arr)
        return builder.gep(builder.bitcast(ary.data, i8.as_pointer()), [off], inbounds=True)

    def load64(context, builder, sig, args):
        ptr = byte_pointer(context, builder, sig.args[0], args[0], args[1])
        return builder.load(builder.bitcast(ptr, v64i8.as_pointer()), align=1)

    def splat(builder, value, vector):
        one = builder.insert_element(ir.Constant(vector, None), value, i32(0))
        return builder.shuffle_vector(one, one, every_lane)

    @intrinsic
    def codes_raw(typingctx, a, off):
        if not array_of(a, types.uint8) or not isinstance(off, types.Integer):
            return None
        return codes_type(a, off), load64

    def make_nibbles(high: bool):
        @intrinsic
        def nibbles(typingctx, a, off):
            if not array_of(a, types.uint8) or not isinstance(off, types.Integer):
                return None

            def codegen(context, builder, sig, args):
                v = load64(context, builder, sig, args)
                if high:
                    v = builder.lshr(v, ir.Constant(v64i8, [4] * 64))
                return builder.and_(v, ir.Constant(v64i8, [15] * 64))

            return codes_type(a, off), codegen

        return nibbles

    def four_products(builder, acc, codes, x4):
        """acc + each lane's four products of unsigned `codes` and the signed bytes of x4."""
        if form == "vnni512":
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(v16i32, [v16i32] * 3),
                "llvm.x86.avx512.vpdpbusd.512")
            return builder.call(fn, [acc, builder.bitcast(codes, v16i32), x4])
        if form == "vnni":
            v8i32 = ir.VectorType(i32, 8)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(v8i32, [v8i32] * 3),
                "llvm.x86.avx512.vpdpbusd.256")
            words = builder.bitcast(codes, v16i32)
            halves = []
            for lo in (0, 8):
                pick = ir.Constant(v8i32, list(range(lo, lo + 8)))
                halves.append(builder.call(fn, [builder.shuffle_vector(acc, acc, pick),
                                                builder.shuffle_vector(words, words, pick),
                                                builder.shuffle_vector(x4, x4, pick)]))
            return builder.shuffle_vector(halves[0], halves[1],
                                          ir.Constant(v16i32, list(range(16))))
        a = builder.zext(codes, ir.VectorType(i16, 64))
        b = builder.sext(builder.bitcast(x4, v64i8), ir.VectorType(i16, 64))
        products = builder.sext(builder.mul(a, b), ir.VectorType(i32, 64))  # |a b| <= 255 * 128
        total = acc
        for k in range(4):
            pick = ir.Constant(v16i32, list(range(k, 64, 4)))
            total = builder.add(total, builder.shuffle_vector(products, products, pick))
        return total

    @intrinsic
    def dot4(typingctx, acc, c, x, at):
        if (acc != ints or c != codes_type or not array_of(x, types.int8)
                or not isinstance(at, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            ptr = byte_pointer(context, builder, sig.args[2], args[2], args[3])
            word = builder.load(builder.bitcast(ptr, i32.as_pointer()), align=1)
            return four_products(builder, args[0], args[1], splat(builder, word, v16i32))

        return ints(acc, c, x, at), codegen

    @intrinsic
    def isplat(typingctx, n):
        if not isinstance(n, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            value = args[0]
            if value.type.width > 32:
                value = builder.trunc(value, i32)
            elif value.type.width < 32:
                value = (builder.sext if sig.args[0].signed else builder.zext)(value, i32)
            return splat(builder, value, v16i32)

        return ints(n), codegen

    def constant(vector, type_):
        @intrinsic
        def zero(typingctx):
            def codegen(context, builder, sig, args):
                return ir.Constant(vector, None)

            return type_(), codegen

        return zero

    def binary(type_, make):
        @intrinsic
        def op(typingctx, a, b):
            if a != type_ or b != type_:
                return None

            def codegen(context, builder, sig, args):
                return make(builder)(args[0], args[1])

            return type_(a, b), codegen

        return op

    @intrinsic
    def tofloat(typingctx, a):
        if a != ints:
            return None

        def codegen(context, builder, sig, args):
            return builder.sitofp(args[0], v16f)

        return floats(a), codegen

    @intrinsic
    def fsplat(typingctx, x):
        if x != types.float32:
            return None

        def codegen(context, builder, sig, args):
            return splat(builder, args[0], v16f)

        return floats(x), codegen

    @intrinsic
    def halves(typingctx, a, i):
        if not array_of(a, types.uint16, types.float32) or not isinstance(i, types.Integer):
            return None
        wide = a.dtype == types.float32  # q4_1f's scales: float32 already, a plain load

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = builder.gep(ary.data, [args[1]], inbounds=True)
            if wide:
                return builder.load(builder.bitcast(ptr, v16f.as_pointer()), align=4)
            vector = ir.VectorType(ir.HalfType(), 16)
            return builder.fpext(builder.load(builder.bitcast(ptr, vector.as_pointer()),
                                              align=2), v16f)

        return floats(a, i), codegen

    @intrinsic
    def store(typingctx, a, i, v):
        if not array_of(a, types.float32) or not isinstance(i, types.Integer) or v != floats:
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = builder.gep(ary.data, [args[1]], inbounds=True)
            builder.store(args[2], builder.bitcast(ptr, v16f.as_pointer()), align=4)
            return context.get_dummy_value()

        return types.none(a, i, v), codegen

    @intrinsic
    def prefetch(typingctx, a, off):
        """A hint to bring the cache line at byte `off` of a byte array in (`llvm.prefetch`);
        it reads nothing into a value and cannot fault."""
        if not array_of(a, types.uint8) or not isinstance(off, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = builder.gep(ary.data, [args[1]], inbounds=False)
            i8p = i8.as_pointer()
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                "llvm.prefetch.p0")
            builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
            return context.get_dummy_value()

        return types.none(a, off), codegen

    return dict(codes_raw=codes_raw, codes_low=make_nibbles(False),
                codes_high=make_nibbles(True), dot4=dot4, isplat=isplat,
                izero=constant(v16i32, ints), iadd=binary(ints, lambda b: b.add),
                tofloat=tofloat, fsplat=fsplat, fzero=constant(v16f, floats),
                fmul=binary(floats, lambda b: b.fmul), fadd=binary(floats, lambda b: b.fadd),
                halves=halves, store=store, prefetch=prefetch)


def quantize_ops() -> dict[str, object]:
    """`quantize_block(x, first, xq, at) -> (dx, total)`: the activation scheme of
    int8_kernel.py for the 32 float32 x[first .. first + 31], the whole block at once in vector
    registers: amax = the largest |x_j| (NaN ignored), dx = amax / 127, q_j = rint(x_j * (127 /
    amax)) clamped to [-127, 127], written to the int8 xq[at .. at + 31], and total = sum q_j
    (exact). A block whose 127 / amax is not a finite float32 (amax 0, or below about 3.7e-37)
    goes in as zeros with dx = 0; a NaN element as 0. The largest of a set and each element's
    rounding do not depend on the order they are taken in, so the bits are those of the same
    scheme taken element by element (tests/forward/test_int8_kernel.py); the scalar loop it
    replaced cost about 0.25 ms a row of a SmolLM2 forward."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    f32, i8, i32, i64 = ir.FloatType(), ir.IntType(8), ir.IntType(32), ir.IntType(64)
    v32f, v32i8 = ir.VectorType(f32, 32), ir.VectorType(i8, 32)

    def pointer(context, builder, arr_type, arr, index, element_vector):
        ary = context.make_array(arr_type)(context, builder, arr)
        ptr = builder.gep(ary.data, [index], inbounds=True)
        return builder.bitcast(ptr, element_vector.as_pointer())

    def intrinsic_call(builder, name, vector, *args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector, [vector] * len(args)), name)
        return builder.call(fn, list(args))

    def splat(value, n=32):
        return ir.Constant(ir.VectorType(value.type, n), [value.constant] * n)

    def largest(builder, v):
        """The largest lane of non-negative, NaN-free float lanes, by halving (exact)."""
        n = v.type.count
        while n > 1:
            n //= 2
            lo = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, n), list(range(n))))
            hi = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(i32, n),
                                                          list(range(n, 2 * n))))
            v = builder.select(builder.fcmp_ordered(">", hi, lo), hi, lo)
        return builder.extract_element(v, i32(0))

    @intrinsic
    def quantize_block(typingctx, x, first, xq, at):
        if not (isinstance(x, types.Array) and x.ndim == 1 and x.layout == "C"
                and x.dtype == types.float32 and isinstance(first, types.Integer)
                and isinstance(xq, types.Array) and xq.ndim == 1 and xq.dtype == types.int8
                and isinstance(at, types.Integer)):
            return None
        result = types.Tuple((types.float32, types.int64))

        def codegen(context, builder, sig, args):
            v = builder.load(pointer(context, builder, sig.args[0], args[0], args[1], v32f),
                             align=4)
            zero = ir.Constant(f32, 0.0)
            a = intrinsic_call(builder, "llvm.fabs.v32f32", v32f, v)
            a = builder.select(builder.fcmp_ordered(">", a, splat(zero)), a, splat(zero))
            amax = largest(builder, a)
            # 127 / amax overflows below amax ~ 3.7e-37: such a block (its dx would be 0 or
            # subnormal anyway) goes in as zeros, as an all-zero block does
            scale = builder.fdiv(ir.Constant(f32, 127.0), amax)
            usable = builder.and_(builder.fcmp_ordered(">", amax, zero),
                                  builder.fcmp_ordered("<", scale, ir.Constant(f32, float("inf"))))
            inv = builder.select(usable, scale, zero)
            d = builder.select(usable, builder.fdiv(amax, ir.Constant(f32, 127.0)), zero)
            inv_lanes = builder.shuffle_vector(
                builder.insert_element(ir.Constant(v32f, None), inv, i32(0)),
                ir.Constant(v32f, None), ir.Constant(ir.VectorType(i32, 32), [0] * 32))
            q = intrinsic_call(builder, "llvm.rint.v32f32", v32f, builder.fmul(v, inv_lanes))
            low, high = splat(ir.Constant(f32, -127.0)), splat(ir.Constant(f32, 127.0))
            q = builder.select(builder.fcmp_unordered("uno", q, q), splat(zero), q)  # NaN: 0
            q = builder.select(builder.fcmp_ordered(">", q, low), q, low)
            q = builder.select(builder.fcmp_ordered("<", q, high), q, high)
            qi = builder.fptosi(q, v32i8)
            builder.store(qi, pointer(context, builder, sig.args[2], args[2], args[3], v32i8),
                          align=1)
            wide = builder.sext(qi, ir.VectorType(i32, 32))
            n = 32
            while n > 1:
                n //= 2
                pick = ir.Constant(ir.VectorType(i32, n), list(range(n)))
                rest = ir.Constant(ir.VectorType(i32, n), list(range(n, 2 * n)))
                wide = builder.add(builder.shuffle_vector(wide, wide, pick),
                                   builder.shuffle_vector(wide, wide, rest))
            total = builder.sext(builder.extract_element(wide, i32(0)), i64)
            return context.make_tuple(builder, sig.return_type, [d, total])

        return result(x, first, xq, at), codegen

    return dict(quantize_block=quantize_block)
