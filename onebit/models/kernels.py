"""The one product the forward spends its time in: `Y[r] = W @ X[r]` for a few rows.

Batch invariance (docs/forward.md) needs each row's result to be independent of how many
rows share the call: a verify batch of 8 rows must give, row for row, the bits a 1-row step
gives. numpy's `X @ W.T` does not (BLAS picks a different blocking for 1 and 8 rows), so the
kernels here compute each (row, output) dot product by one fixed formula whatever the batch:

- "numba": a register-tiled compiled kernel (below), parallel over blocks of output features
  for large weights (smaller ones run on one thread, where threads cost more than they
  save). A tile holds rows x outputs vector accumulators (8 x 3 with AVX-512, 2 x 2 with
  AVX2: `host_tile`), so each weight vector loaded feeds one FMA per row of the tile and each
  row vector one per output: a verify batch reads the weights once instead of once per row.
  Tiles of 2 rows or more also prefetch the next tile's weight rows,
  since in the model every weight comes from memory; a hint changes no value. The price is
  compile time on first use, per dtype. `benchmarks/kernel_ab.py` and `forward_ab.py`
  measure what this buys; docs/forward.md quotes their figures.
- "numpy": one BLAS gemv per row, `W @ X[r]` (no extra dependency; verify costs n steps).

"auto" is numba when it imports, else numpy. On a Q4NX weight, "numba" does not use the float
kernels at all: the host backend hands it to the packed kernel of `q4nx_kernel.py`, which reads
the 4-bit blocks and dequantises in registers (its own fixed formula, documented there).
"numba-float" is the tiled kernel over the dequantised float cache (the A/B baseline). The
kernels differ from each other in the last bits; a model uses one kernel for both its step and
its verify, which is what matters.

How the tiled kernel stays batch-invariant. The result for (row r, output o) is, exactly:

    V = 64 bytes / itemsize lanes (16 for float32, 8 for float64), n_main = n_in - n_in % V
    acc[l] = fma(W[o, i+l], X[r, i+l], acc[l])   for i = 0, V, 2V, .. < n_main, all l at once
    s = tree(acc)            halve the vector and add the halves lane by lane until one lane
    s = fma(W[o, j], X[r, j], s)   for j = n_main .. n_in-1, in order

The code spells this out with LLVM vector types and the `llvm.fma` intrinsic, and it is
compiled WITHOUT fastmath, so LLVM may not reassociate, contract or reorder any of it: the
value is fixed by the IR, not by how a particular loop happens to be vectorised. Every tile
shape (the host's tile, the remainder tiles with fewer rows, the clamped outputs at a block's
edge, and the other machine's tile) runs the
same formula per (row, output), so the tile a row lands in, and therefore R, cannot change its
bits. Parallelism splits the outputs, never an (row, output) sum.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from onebit.models import kernel_cache

KERNELS = ("auto", "numba", "numba-float", "numpy", "int8")
# kernels that read Q4NX weights packed (q4nx_kernel.py) instead of their float32 cache
PACKED_KERNELS = ("numba",)
# kernels that multiply ggml block weights (blocks.py), Q4NX ones read as the same values in
# q4_1 / q4_0 blocks, by integer dot products (int8_kernel.py); every other weight goes to the
# tiled float kernel
BLOCK_KERNELS = ("int8",)

Linear = Callable[[np.ndarray, np.ndarray], np.ndarray]


def numpy_rows(weight: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`[R, out]`: one gemv per row."""
    out = np.empty((rows.shape[0], weight.shape[0]), dtype=weight.dtype)
    for r in range(rows.shape[0]):
        np.matmul(weight, rows[r], out=out[r])
    return out


# Below this many weights a product is too small to share among threads: the threads' start
# and stop cost more than the product (and on a busy 2-core box much more). The choice depends
# only on the weight's size, never on the number of rows, so each weight always runs the same
# compiled loop and batch invariance holds.
PARALLEL_MIN_WEIGHTS = 1 << 20

# The tiled kernel's shape, (rows, outputs) of accumulators per tile, chosen by the vector
# registers the host has; it changes speed only, never bits (see the module docstring), so one
# machine's text is another's. An accumulator is one 64-byte vector: one AVX-512 register, two
# AVX2 ones. AVX-512's 32 registers hold an 8 x 3 tile (24 accumulators); AVX2's 16 hold a 2 x 2
# tile (8 registers) plus the weight and row vectors it streams; the 8 x 3 tile there spills and
# runs at about 0.55x (benchmarks/kernel_ab.py, docs/forward.md). Row counts are powers of two:
# the rows left over after the full tiles run by tiles of half, a quarter, .., one row.
TILES = {"avx512": (8, 3), "avx2": (2, 2)}
# Outputs per parallel task: a multiple of every tile's outputs.
BLOCK_OUTS = 24
# Tiles of this many rows or more prefetch the next tile's weight rows while they compute.
# With several rows a tile computes long enough that, without the hint, the weight stream from
# memory apparently stalls at each new tile (likely the hardware prefetcher restarting on each
# row's 4 KiB page; measured, not proven); a 1-row tile (a step) runs unchanged.
PREFETCH_MIN_ROWS = 2
VECTOR_BYTES = 64
TILED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

_numba_kernels: dict[bool, Callable] = {}


def _numba_kernel(parallel: bool) -> Callable:
    """The simple per-row kernel (the earlier "numba"; kept as the benchmark's baseline and for
    dtypes the tiled kernel does not handle). Built on first use, cached on disk as its
    variant (kernel_cache.py)."""
    kernel = _numba_kernels.get(parallel)
    if kernel is not None:
        return kernel
    from numba import prange


    # For each output feature the same dot-product loop runs over every row; fastmath lets
    # LLVM vectorise that loop with a fixed, compile-time reduction order, so a row's bits do
    # not depend on the other rows.
    def rows_kernel(weight, rows, out):  # pragma: no cover - compiled
        n_out, n_in = weight.shape
        n_rows = rows.shape[0]
        zero = np.zeros(1, dtype=out.dtype)[0]
        for b in prange((n_out + 7) // 8):  # 8 output features per parallel task
            for o in range(b * 8, min(n_out, b * 8 + 8)):
                w = weight[o]
                for r in range(n_rows):
                    x = rows[r]
                    acc = zero
                    for i in range(n_in):
                        acc += w[i] * x[i]
                    out[r, o] = acc

    rows_kernel = kernel_cache.jit(rows_kernel, (parallel,), parallel=parallel, fastmath=True)
    _numba_kernels[parallel] = rows_kernel
    return rows_kernel


def numba_simple_rows(weight: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`[R, out]` from the simple per-row kernel (baseline; batch-invariant but slower)."""
    rows = np.ascontiguousarray(rows, dtype=weight.dtype)
    out = np.empty((rows.shape[0], weight.shape[0]), dtype=weight.dtype)
    _numba_kernel(weight.size >= PARALLEL_MIN_WEIGHTS)(weight, rows, out)
    return out


# -- the tiled kernel --------------------------------------------------------------------------

_tiled_kernels: dict[object, Callable] = {}
_tiled_parts: dict[str, object] = {}


def _tiled_intrinsics() -> dict[str, object]:
    """The vector type and the four operations the tiles are written in (built once)."""
    if _tiled_parts:
        return _tiled_parts
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic, models, register_model

    class Vec(types.Type):
        """An LLVM vector of `n` floats: one accumulator of the tiled kernel."""

        def __init__(self, dtype, n):
            self.dtype, self.n = dtype, n
            super().__init__(name=f"onebit.Vec{n}x{dtype}")

    @register_model(Vec)
    class VecModel(models.PrimitiveModel):
        def __init__(self, dmm, fe_type):
            element = dmm.lookup(fe_type.dtype).get_value_type()
            super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.n))

    def vec_of(arr):
        if not (
            isinstance(arr, types.Array)
            and arr.ndim == 1
            and arr.layout == "C"
            and arr.dtype in (types.float32, types.float64)
        ):
            return None
        return Vec(arr.dtype, VECTOR_BYTES * 8 // arr.dtype.bitwidth)

    @intrinsic
    def vload(typingctx, arr, idx):
        """`arr[idx : idx + n]` as one vector (unaligned load; the caller keeps it in range)."""
        vt = vec_of(arr)
        if vt is None or not isinstance(idx, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = builder.gep(ary.data, [args[1]], inbounds=True)
            vptr = builder.bitcast(ptr, context.get_value_type(sig.return_type).as_pointer())
            return builder.load(vptr, align=sig.args[0].dtype.bitwidth // 8)

        return vt(arr, idx), codegen

    @intrinsic
    def prefetch(typingctx, arr, idx):
        """A hint to bring the cache line of `arr[idx]` into L2 (`llvm.prefetch`, locality 2:
        prefetcht1 on x86). It reads nothing into a value and cannot fault."""
        if vec_of(arr) is None or not isinstance(idx, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ary = context.make_array(sig.args[0])(context, builder, args[0])
            ptr = builder.gep(ary.data, [args[1]], inbounds=True)
            i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
            # read, locality 2 (L2: the L1 keeps the rows' vectors), data cache
            builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(2), i32(1)])
            return context.get_dummy_value()

        return types.none(arr, idx), codegen

    @intrinsic
    def vzero(typingctx, arr):
        """A zero vector of `arr`'s element type."""
        vt = vec_of(arr)
        if vt is None:
            return None

        def codegen(context, builder, sig, args):
            return ir.Constant(context.get_value_type(sig.return_type), None)

        return vt(arr), codegen

    @intrinsic
    def fma(typingctx, a, b, c):
        """`a * b + c` rounded once (`llvm.fma`), lane by lane for vectors."""
        if not (a == b == c):
            return None

        def codegen(context, builder, sig, args):
            ty = args[0].type
            if isinstance(ty, ir.VectorType):
                name = f"llvm.fma.v{ty.count}{ty.element.intrinsic_name}"
            else:
                name = f"llvm.fma.{ty.intrinsic_name}"
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty] * 3), name)
            return builder.call(fn, args)

        return a(a, b, c), codegen

    @intrinsic
    def vsum(typingctx, v):
        """The lanes' sum by a fixed tree: add the upper half to the lower half, repeat."""
        if not isinstance(v, Vec):
            return None

        def codegen(context, builder, sig, args):
            x, n = args[0], sig.args[0].n
            i32 = ir.IntType(32)
            while n > 1:
                h = n // 2
                lo = builder.shuffle_vector(
                    x, x, ir.Constant(ir.VectorType(i32, h), list(range(h)))
                )
                hi = builder.shuffle_vector(
                    x, x, ir.Constant(ir.VectorType(i32, h), list(range(h, n)))
                )
                x, n = builder.fadd(lo, hi), h
            return builder.extract_element(x, ir.Constant(i32, 0))

        return v.dtype(v), codegen

    _tiled_parts.update(prefetch=prefetch, vload=vload, vzero=vzero, fma=fma, vsum=vsum, Vec=Vec)
    return _tiled_parts


@functools.cache
def host_isa() -> str:
    """"avx512" or "avx2": the vector registers numba compiles for here. Asked once: llvmlite's
    CPU query costs about a third of a millisecond, and every product picks its kernel."""
    import llvmlite.binding as llvm

    return "avx512" if llvm.get_host_cpu_features().get("avx512f") else "avx2"


def host_tile() -> tuple[int, int]:
    """The (rows, outputs) tile for this machine's vector registers."""
    return TILES[host_isa()]


def _tile_lines(n_rows: int, n_outs: int, indent: str, prefetch: bool) -> list[str]:
    """Source lines of one tile: rows r..r+n_rows-1 times outputs o..o+n_outs-1, each (row,
    output) by the module docstring's formula. Output indices past the last output are clamped
    to it: that output is then computed twice, by the same formula, and written twice with the
    same bits. With `prefetch` (and at least PREFETCH_MIN_ROWS rows), each step along the
    inputs also hints the same cache line of the next tile's weight rows (`n0..`; a 1-row tile,
    a step's, is the code it was before the hints)."""
    pairs = [(r, o) for r in range(n_rows) for o in range(n_outs)]
    t = f"_{n_rows}"  # names local to this tile; w0.. and p0.. are the driver's
    s = [f"x{r}{t} = rows[r + {r}]" for r in range(n_rows)]
    hint = prefetch and n_rows >= PREFETCH_MIN_ROWS
    s += [f"n{o}{t} = weight[min(o + {n_outs + o}, last)]" for o in range(n_outs) if hint]
    s += [f"a{r}_{o}{t} = vzero(w0)" for r, o in pairs]
    s += ["for i in range(0, n_main, step):"]
    s += [f"    v{o}{t} = vload(w{o}, i)" for o in range(n_outs)]
    s += [f"    prefetch(n{o}{t}, i)" for o in range(n_outs) if hint]
    for r in range(n_rows):
        s += [f"    y{r}{t} = vload(x{r}{t}, i)"]
        s += [f"    a{r}_{o}{t} = fma(v{o}{t}, y{r}{t}, a{r}_{o}{t})" for o in range(n_outs)]
    s += [f"s{r}_{o}{t} = vsum(a{r}_{o}{t})" for r, o in pairs]
    s += ["for j in range(n_main, n_in):"]
    s += [f"    s{r}_{o}{t} = fma(w{o}[j], x{r}{t}[j], s{r}_{o}{t})" for r, o in pairs]
    s += [f"out[r + {r}, p{o}] = s{r}_{o}{t}" for r, o in pairs]
    return [indent + line for line in s]


def _kernel_source(prefetch: bool, tile: tuple[int, int]) -> str:
    """Source of the kernel for outputs o_lo..o_hi-1: tiles of `tile` = (rows, outputs), then
    the remaining rows by tiles of half, a quarter, .., one row (one straight-line body per tile
    size, so LLVM keeps every accumulator in a register)."""
    tile_rows, tile_outs = tile
    if tile_rows & (tile_rows - 1) or BLOCK_OUTS % tile_outs:
        raise ValueError(f"a tile needs a power-of-two row count and outputs dividing "
                         f"{BLOCK_OUTS}, got {tile}")
    s = [
        "def tiled_block(weight, rows, out, o_lo, o_hi):",
        "    n_out, n_in = weight.shape",
        "    n_rows = rows.shape[0]",
        "    last = n_out - 1",
        f"    step = {VECTOR_BYTES} // weight.itemsize",
        "    n_main = n_in - n_in % step",
        f"    for o in range(o_lo, o_hi, {tile_outs}):",
        *[f"        p{k} = min(o + {k}, last)" for k in range(tile_outs)],
        *[f"        w{k} = weight[p{k}]" for k in range(tile_outs)],
        "        r = 0",
        f"        while r + {tile_rows} <= n_rows:",
    ]
    s += _tile_lines(tile_rows, tile_outs, " " * 12, prefetch)
    s += [f"            r += {tile_rows}"]
    k = tile_rows // 2
    while k >= 1:
        s += [f"        if r + {k} <= n_rows:"]
        s += _tile_lines(k, tile_outs, " " * 12, prefetch)
        s += [f"            r += {k}"]
        k //= 2
    return "\n".join(s)


def _tiled_kernel(
    parallel: bool, prefetch: bool = True, tile: tuple[int, int] | None = None
) -> Callable:
    """The compiled tiled kernel (built on first use, like `_numba_kernel`); `prefetch=False`
    builds it without the prefetch hints, and `tile` with another tile than the host's (for
    comparisons and tests; the same bits)."""
    tile = host_tile() if tile is None else tuple(tile)
    kernel = _tiled_kernels.get((parallel, prefetch, tile))
    if kernel is not None:
        return kernel
    from numba import prange


    block = _tiled_kernels.get(("block", prefetch, tile))
    if block is None:
        # __name__: numba's on-disk cache rebuilds a kernel's environment from its module's name
        namespace: dict[str, object] = dict(_tiled_intrinsics(), __name__=__name__)
        exec(_kernel_source(prefetch, tile), namespace)  # noqa: S102 - our own generated source
        # fastmath stays off: the formula must be the IR's, not LLVM's choice.
        block = kernel_cache.jit(namespace["tiled_block"], (prefetch, tile), nogil=True)
        _tiled_kernels[("block", prefetch, tile)] = block

    if parallel:

        def tiled_kernel(weight, rows, out):  # pragma: no cover - compiled
            n_out = weight.shape[0]
            for b in prange((n_out + BLOCK_OUTS - 1) // BLOCK_OUTS):
                block(weight, rows, out, b * BLOCK_OUTS, min(n_out, (b + 1) * BLOCK_OUTS))

    else:

        def tiled_kernel(weight, rows, out):  # pragma: no cover - compiled
            block(weight, rows, out, 0, weight.shape[0])

    kernel = kernel_cache.jit(tiled_kernel, (parallel, prefetch, tile), parallel=parallel)
    _tiled_kernels[(parallel, prefetch, tile)] = kernel
    return kernel


def numba_rows(weight: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`[R, out]` from the compiled tiled kernel (the simple one for other dtypes)."""
    if weight.dtype not in TILED_DTYPES:
        return numba_simple_rows(weight, rows)
    weight = read_only(np.ascontiguousarray(weight))
    rows = np.ascontiguousarray(rows, dtype=weight.dtype)
    out = np.empty((rows.shape[0], weight.shape[0]), dtype=weight.dtype)
    _tiled_kernel(weight.size >= PARALLEL_MIN_WEIGHTS)(weight, rows, out)
    return out


def read_only(weight: np.ndarray) -> np.ndarray:
    """`weight`, or a read-only view of it. numba compiles a kernel once per signature, and a
    read-only array is another type than a writeable one: a model's weights mapped from their
    file are read-only, weights made in memory (dequantised, converted to float64) are not,
    and each kind compiled its own copy of the kernel (2-4 s each). Handing the kernel only
    read-only weights makes it one."""
    if not weight.flags.writeable:
        return weight
    view = weight.view()
    view.flags.writeable = False
    return view


def numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def choose(kind: str = "auto") -> tuple[str, Linear]:
    """The kernel named `kind` as `(name, function)`: the float kernel it runs. "numba" and
    "numba-float" both run the tiled kernel on float weights; on a Q4NX weight "numba" runs the
    packed kernel (`reads_q4nx`), "numba-float" the tiled kernel on the dequantised cache."""
    if kind not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kind!r}")
    if kind == "auto":
        kind = "numba" if numba_available() else "numpy"
    if kind in ("numba", "numba-float", "int8"):
        if not numba_available():
            raise ValueError(f"kernel={kind!r} needs the numba package (pip install numba)")
        return kind, numba_rows
    return "numpy", numpy_rows


def reads_blocks(name: str) -> bool:
    """True when the kernel `name` multiplies Q8_0 / Q4_0 / Q4_1 block weights natively."""
    return name in BLOCK_KERNELS


def reads_q4nx(name: str) -> bool:
    """True when the kernel `name` (as `choose` returns it) multiplies Q4NX weights in their
    packed form; the others read the weight store's float cache."""
    return name in PACKED_KERNELS
