"""The 4-bit-native product: `Y[r] = W @ X[r]` straight from Q4NX blocks, dequantised in
registers (docs/forward.md, "The packed kernel").

A Q4NX model on the numba kernel keeps its weights as they are stored: 4-bit codes plus a bf16
scale and min per 32-column group, 5120 bytes per 32 x 256 block, 20 bytes per 32 weights
(`PackedWeight`). The block layout already suits a vector kernel: within a block, one input
column of a 16-row lane is 8 consecutive bytes holding that column's 16 weights, and the scales
(and mins) of a lane's 16 rows for one group are 16 consecutive bf16. So the kernel vectorises
over a lane's 16 outputs: it loads a column's 8 bytes, splits the nibbles, interleaves them
into 16 codes in row order and converts them to floats; broadcasts that column's input; and
multiply-adds. It never writes a float weight anywhere.

The formula, for row r and output o, in the compute dtype (float32 or float64), exactly:

    for each group G (32 input columns 32G .. 32G+31), G = 0, 1, .. in order:
        sx[G] = ((x[32G] + x[32G+1]) + x[32G+2]) + .. + x[32G+31]      (one per row, in order)
        a     = fma(code[o, 32G+c], x[32G+c], a)   for c = 0 .. 31 in order, from a = 0
        y     = fma(scale[o, G], a, y)
        y     = fma(min[o, G], sx[G], y)                               (y starts at 0)

with `code` the nibble as a float (0..15 "unsigned", -8..7 "signed") and `scale`, `min` the
bf16 values widened exactly. So `y = sum_G scale * sum_c code * x + min * sum_c x`: the
dequantised product, with the group's min factored out. It is written with LLVM vector types
and the `llvm.fma` intrinsic and compiled WITHOUT fastmath, so LLVM cannot reassociate it.

The tiles differ only in how many independent (row, lane, group) chains run side by side, for
latency and for reuse of a decoded column: 8 rows x 1 lane (a decoded column feeds 8 rows),
4 rows x 1 lane x 2 groups, 2 rows x 2 lanes x 2 groups, 1 row x 2 lanes x 4 groups (a step:
8 chains). Every tile runs the formula above per (row, output), so the tile a row lands in, and
therefore the batch size, cannot change its bits. Weights of PARALLEL_MIN_WEIGHTS or more are
split over threads by block rows of 32 outputs (by the weight's size only, never by R), and no
(row, output) sum is ever split.

This kernel and the float kernels differ in the last bits (the float kernels multiply by the
dequantised weight rounded to the compute dtype; this one factors the scale and min out of each
group); a model uses one kernel for its steps and its verifies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onebit.models import kernel_cache, kernels, q4nx

LANES = 2  # 16-row lanes per 32-row block
# (rows, lanes, groups) side by side in a tile: one straight-line body per tile shape. The
# first is used while at least its row count is left, then the others once each, in order.
TILES = ((4, 1, 1), (2, 1, 2), (1, 2, 2))


@dataclass(frozen=True)
class PackedWeight:
    """A Q4NX weight `[out, in]` in the form the packed kernel reads: its blocks, flat and
    contiguous (`[(out/32) * (in/256) * 5120]` uint8), and the code convention."""

    blocks: np.ndarray
    shape: tuple[int, int]
    convention: str
    packed = True  # what a backend checks to pass it to `prepare` as it is

    @classmethod
    def from_blocks(cls, blocks: np.ndarray, shape: tuple[int, int],
                    convention: str) -> PackedWeight:
        """Check `blocks` hold a `shape` weight and copy them into the kernel's form."""
        grid = q4nx.as_grid(blocks, *shape)
        if convention not in q4nx.CONVENTIONS:
            raise q4nx.Q4NXError(
                f"Q4NX convention must be one of {q4nx.CONVENTIONS}, got {convention!r}"
            )
        flat = np.array(grid, dtype=np.uint8, order="C").reshape(-1)
        flat.flags.writeable = False
        return cls(flat, (int(shape[0]), int(shape[1])), convention)

    @property
    def nbytes(self) -> int:
        return self.blocks.nbytes

    @property
    def ndim(self) -> int:
        return 2


_parts: dict[str, object] = {}
_kernels: dict[object, Callable] = {}


def _intrinsics() -> dict[str, object]:
    """The operations the packed tiles are written in, on 16-lane vectors (built once)."""
    if _parts:
        return _parts
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    base = kernels._tiled_intrinsics()
    Vec = base["Vec"]
    i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)

    def lane_vec(like):
        """The 16-lane vector of a float row array's dtype (None if `like` is not one)."""
        if (isinstance(like, types.Array) and like.ndim == 1 and like.layout == "C"
                and like.dtype in (types.float32, types.float64)):
            return Vec(like.dtype, 16)
        return None

    def is_bytes(arr):
        return (isinstance(arr, types.Array) and arr.ndim == 1 and arr.layout == "C"
                and arr.dtype == types.uint8)

    def pointer_at(context, builder, arrty, arr, idx, element):
        ary = context.make_array(arrty)(context, builder, arr)
        ptr = builder.gep(ary.data, [idx], inbounds=True)
        return builder.bitcast(ptr, element.as_pointer())

    def splat_const(ty, value, n=16):
        return ir.Constant(ir.VectorType(ty, n), [value] * n)

    def make_decode(which: int, signed: bool):
        # columns c (which 0) and c + 1 (which 1) share one 16-byte load; LLVM merges the two
        # calls' identical loads and nibble splits
        mask = [v for j in range(8) for v in (8 * which + j, 16 + 8 * which + j)]

        @intrinsic
        def decode(typingctx, blk, off, like):
            """The 16 codes (rows 0..15 of a lane) of the column whose 8 bytes start at
            `blk[off + 8 * which]`, as floats: low nibble of byte j is row 2j, high is 2j+1."""
            vt = lane_vec(like)
            if vt is None or not is_bytes(blk) or not isinstance(off, types.Integer):
                return None

            def codegen(context, builder, sig, args):
                ptr = pointer_at(context, builder, sig.args[0], args[0], args[1],
                                 ir.VectorType(i8, 16))
                v = builder.load(ptr, align=1)
                four = splat_const(i8, 4)
                if signed:  # two's-complement nibbles: shift each to the top, then back
                    lo = builder.ashr(builder.shl(v, four), four)
                    hi = builder.ashr(v, four)
                else:
                    lo = builder.and_(v, splat_const(i8, 15))
                    hi = builder.lshr(v, four)
                codes = builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(i32, 16), mask))
                element = context.get_value_type(vt.dtype)
                return builder.sitofp(codes, ir.VectorType(element, 16))

            return vt(blk, off, like), codegen

        return decode

    @intrinsic
    def bf16(typingctx, blk, off, like):
        """16 consecutive little-endian bf16 at `blk[off]`, widened exactly to `like`'s dtype."""
        vt = lane_vec(like)
        if vt is None or not is_bytes(blk) or not isinstance(off, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ptr = pointer_at(context, builder, sig.args[0], args[0], args[1],
                             ir.VectorType(i16, 16))
            bits = builder.shl(builder.zext(builder.load(ptr, align=1), ir.VectorType(i32, 16)),
                               splat_const(i32, 16))
            value = builder.bitcast(bits, ir.VectorType(ir.FloatType(), 16))
            element = context.get_value_type(vt.dtype)
            if element != ir.FloatType():
                value = builder.fpext(value, ir.VectorType(element, 16))
            return value

        return vt(blk, off, like), codegen

    @intrinsic
    def splat(typingctx, value, like):
        """`value` in all 16 lanes."""
        vt = lane_vec(like)
        if vt is None or value != vt.dtype:
            return None

        def codegen(context, builder, sig, args):
            ty = context.get_value_type(sig.return_type)
            one = builder.insert_element(ir.Constant(ty, None), args[0], ir.Constant(i32, 0))
            return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(i32, 16), None))

        return vt(value, like), codegen

    @intrinsic
    def zero16(typingctx, like):
        """A zero 16-lane vector of `like`'s dtype."""
        vt = lane_vec(like)
        if vt is None:
            return None

        def codegen(context, builder, sig, args):
            return ir.Constant(context.get_value_type(sig.return_type), None)

        return vt(like), codegen

    @intrinsic
    def store16(typingctx, arr, idx, v):
        """`arr[idx : idx + 16] = v` (the caller keeps it in range)."""
        vt = lane_vec(arr)
        if vt is None or v != vt or not isinstance(idx, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ptr = pointer_at(context, builder, sig.args[0], args[0], args[1],
                             context.get_value_type(vt))
            builder.store(args[2], ptr, align=1)
            return context.get_dummy_value()

        return types.none(arr, idx, v), codegen

    @intrinsic
    def load16(typingctx, arr, idx):
        """`arr[idx : idx + 16]` as a vector (the caller keeps it in range)."""
        vt = lane_vec(arr)
        if vt is None or not isinstance(idx, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ptr = pointer_at(context, builder, sig.args[0], args[0], args[1],
                             context.get_value_type(vt))
            return builder.load(ptr, align=1)

        return vt(arr, idx), codegen

    _parts.update(fma=base["fma"], bf16=bf16, splat=splat, zero16=zero16, store16=store16,
                  load16=load16,
                  even_u=make_decode(0, False), odd_u=make_decode(1, False),
                  even_s=make_decode(0, True), odd_s=make_decode(1, True))
    return _parts


def _tile_lines(rows: int, lanes: int, groups: int, indent: str) -> list[str]:
    """One tile: `rows` rows from r, `lanes` lanes (both, or the loop's `ln`), `groups` groups
    side by side, over all of block row `rb`; each (row, output) by the docstring's formula.
    The group chains `a` live in registers; the running `y` lives in `out` (one load and store
    per group, against 32 columns of work)."""
    lane_ids = ["0", "1"] if lanes == 2 else ["ln"]
    rs, ls, ks = range(rows), range(len(lane_ids)), range(groups)
    s = [f"x{r} = rows[r + {r}]" for r in rs] + [f"q{r} = sx[r + {r}]" for r in rs]
    s += [f"o{r} = out[r + {r}]" for r in rs]
    s += [f"store16(o{r}, rb * 32 + {lane} * 16, zero16(x0))" for r in rs for lane in lane_ids]
    s += ["for cb in range(ncb):",
          "    base = (rb * ncb + cb) * BLOCK",
          f"    for g0 in range(0, GROUPS, {groups}):"]
    body = [f"a{r}_{li}_{k} = zero16(x0)" for r in rs for li in ls for k in ks]
    body += ["for c in range(0, GROUP, 2):"]
    for li, lane in enumerate(lane_ids):
        for k in ks:
            off = f"base + CODES + {lane} * LANE_BYTES + ((g0 + {k}) * GROUP + c) * 8"
            col = f"cb * COLS + (g0 + {k}) * GROUP + c"
            body += [f"    e = even(blk, {off}, x0)", f"    o = odd(blk, {off}, x0)"]
            for r in rs:
                a = f"a{r}_{li}_{k}"
                body += [f"    {a} = fma(e, splat(x{r}[{col}], x0), {a})",
                         f"    {a} = fma(o, splat(x{r}[{col} + 1], x0), {a})"]
    for k in ks:  # groups in order: the y chain is the formula's
        for li, lane in enumerate(lane_ids):
            body += [f"sc = bf16(blk, base + (g0 + {k}) * 64 + {lane} * 32, x0)",
                     f"mn = bf16(blk, base + MINS + (g0 + {k}) * 64 + {lane} * 32, x0)"]
            for r in rs:
                at = f"rb * 32 + {lane} * 16"
                body += [f"y = fma(sc, a{r}_{li}_{k}, load16(o{r}, {at}))",
                         f"store16(o{r}, {at}, "
                         f"fma(mn, splat(q{r}[cb * GROUPS + g0 + {k}], x0), y))"]
    s += ["        " + line for line in body]
    if lanes == 1:
        s = ["for ln in range(2):"] + ["    " + line for line in s]
    return [indent + line for line in s]


def _block_source() -> str:
    """`packed_block(blk, ncb, rows, sx, out, rb)`: all rows for block row `rb`'s 32 outputs."""
    s = ["def packed_block(blk, ncb, rows, sx, out, rb):",
         "    n_rows = rows.shape[0]",
         "    r = 0"]
    first = TILES[0]
    s += [f"    while r + {first[0]} <= n_rows:"]
    s += _tile_lines(*first, " " * 8)
    s += [f"        r += {first[0]}"]
    for tile in TILES[1:]:
        s += [f"    if r + {tile[0]} <= n_rows:"]
        s += _tile_lines(*tile, " " * 8)
        s += [f"        r += {tile[0]}"]
    return "\n".join(s)


def _packed_kernel(signed: bool, parallel: bool) -> Callable:
    """The compiled kernel `(blk, ncb, rows, sx, out)` for one convention (built on first use;
    each dtype compiles on its first call)."""
    kernel = _kernels.get((signed, parallel))
    if kernel is not None:
        return kernel
    from numba import prange

    block = _kernels.get(("block", signed))
    if block is None:
        parts = _intrinsics()
        suffix = "s" if signed else "u"
        # __name__: numba's on-disk cache rebuilds a kernel's environment from its module's name
        namespace: dict[str, object] = {
            "__name__": __name__,
            "fma": parts["fma"], "bf16": parts["bf16"], "splat": parts["splat"],
            "zero16": parts["zero16"], "store16": parts["store16"], "load16": parts["load16"],
            "even": parts["even_" + suffix], "odd": parts["odd_" + suffix],
            "BLOCK": q4nx.BLOCK_BYTES, "CODES": q4nx.CODES_AT, "MINS": q4nx.MINS_AT,
            "LANE_BYTES": q4nx.BLOCK_COLS * 8, "COLS": q4nx.BLOCK_COLS, "GROUP": q4nx.GROUP,
            "GROUPS": q4nx.GROUPS,
        }
        exec(_block_source(), namespace)  # noqa: S102 - our own generated source
        # fastmath stays off: the formula must be the IR's, not LLVM's choice.
        block = _kernels[("block", signed)] = kernel_cache.jit(namespace["packed_block"],
                                                                (signed,), nogil=True)

    if parallel:

        def packed_kernel(blk, ncb, rows, sx, out):  # pragma: no cover - compiled
            for rb in prange(out.shape[1] // 32):
                block(blk, ncb, rows, sx, out, rb)

    else:

        def packed_kernel(blk, ncb, rows, sx, out):  # pragma: no cover - compiled
            for rb in range(out.shape[1] // 32):
                block(blk, ncb, rows, sx, out, rb)

    packed_kernel = kernel_cache.jit(packed_kernel, (signed, parallel), parallel=parallel)
    _kernels[(signed, parallel)] = packed_kernel
    return packed_kernel


def _group_sums_kernel() -> Callable:
    kernel = _kernels.get("sums")
    if kernel is None:

        def group_sums(rows, sx):  # pragma: no cover - compiled
            for r in range(rows.shape[0]):
                for g in range(sx.shape[1]):
                    s = rows[r, g * 32]
                    for c in range(1, 32):
                        s += rows[r, g * 32 + c]
                    sx[r, g] = s

        kernel = _kernels["sums"] = kernel_cache.jit(group_sums, ())
    return kernel


def group_sums(rows: np.ndarray) -> np.ndarray:
    """`[R, in/32]`: each row's sum over each 32-column group, added left to right."""
    sx = np.empty((rows.shape[0], rows.shape[1] // q4nx.GROUP), dtype=rows.dtype)
    _group_sums_kernel()(rows, sx)
    return sx


def packed_rows(weight: PackedWeight, rows: np.ndarray, *,
                parallel: bool | None = None) -> np.ndarray:
    """`[R, out]`: rows `[R, in]` (float32 or float64) times the packed weight, by the module
    docstring's formula. `parallel` overrides the size rule (for tests; the same bits)."""
    n_out, n_in = weight.shape
    if rows.dtype not in kernels.TILED_DTYPES:
        raise TypeError(f"the packed kernel computes in float32 or float64, got {rows.dtype}")
    rows = np.ascontiguousarray(rows)
    if rows.ndim != 2 or rows.shape[1] != n_in:
        raise ValueError(f"rows of shape {rows.shape} do not meet a [{n_out}, {n_in}] weight")
    out = np.empty((rows.shape[0], n_out), dtype=rows.dtype)
    if parallel is None:
        parallel = n_out * n_in >= kernels.PARALLEL_MIN_WEIGHTS
    kernel = _packed_kernel(weight.convention == "signed", parallel)
    kernel(weight.blocks, n_in // q4nx.BLOCK_COLS, rows, group_sums(rows), out)
    return out
