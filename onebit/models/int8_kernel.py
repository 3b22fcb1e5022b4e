"""The integer kernel: `Y[r] = W @ X[r]` for weights in ggml blocks (blocks.py), by 8-bit dot
products, the way llama.cpp multiplies its Q4_0 / Q4_1 / Q8_0 weights. This module is the
driver: it says which form of the kernel this process uses (`lanes_form`), compiles each
variant once (numba, on-disk through kernel_cache.py) and calls it (`block_rows`); the code it
compiles is generated below it, and neither generator imports this module:

- int8_ir.py: the vector operations as LLVM IR (numba intrinsics), per lanes form;
- int8_source.py: the source of the range function written in them (the tiles of rows).

Each activation row is first quantised to 8 bits per block of 32 columns (`quantize_rows`),
a scheme of the Q8_0 / Q8_1 kind, in float32:

    amax = max |x_j| over the block;  dx = amax / 127;  q_j = rint(x_j * (127 / amax))
    clamped to [-127, 127];  sx = dx * sum_j q_j   (the block sum, for q4_1)
    (q = 0 and dx = 0 for a block whose 127 / amax is not a finite float32: all zeros, or
    amax below about 3.7e-37, where float32 cannot hold the scale; error_bound counts them)

Then for row r and output o, with the weight block b holding codes c_j and scales dw (, mw):

    v_b = sum_j c_j q_j     an exact int32, taken to float32 exactly (|v_b| <= 32 * 128 * 127)
          (q8_0: c = q; q4_0: c = nibble - 8; q4_1 and q4_1f: c = nibble)
    acc = fma(v_b, dw_b * dx_b, acc)       for b = 0, 1, .., nb - 1 in order, from acc = 0
          (q8_16f: v_b0 and v_b1 over the block's two halves of 16, each with its own scale:
          acc = fma(v_b0, dw_b0 * dx_b, acc), then fma(v_b1, dw_b1 * dx_b, acc))
    m   = fma(mw_b, sx_b, m)               likewise (q4_1, q4_1f; m = 0 otherwise)
    y   = acc + m
    all in float32 (dw_b * dx_b rounded to float32, fma rounded once).

The integer sums are exact whatever instruction computes them, and the float steps run in one
fixed order per (row, output), compiled without fastmath; nothing of one row enters another
row's result. So a row's bits do not depend on the batch: a verify of 8 rows gives, row for
row, what 8 steps give (tests/forward/test_int8_kernel.py proves it for 1..16 rows), and they
do not depend on the machine either: with AVX-512 VNNI a 512-bit `vpdpbusd` computes four
products for 16 outputs at once, with AVX-VNNI two 256-bit ones, and elsewhere LLVM's portable
form computes the same integers (`lanes_form()` says which; int8_ir.py says how; the three are
compared bit for bit in the tests).

The weights are laid out for that at load (`grouped`): outputs in groups of GROUP = 16, a
group's blocks one after another, and in each block the 16 outputs' codes interleaved four at
a time (llama.cpp repacks its Q4_0 weights the same way for its own kernels), so one 64-byte
load brings four codes of each of 16 outputs, a block's 16 scales are one load, and a
group's bytes are one contiguous run. q8_0 codes are stored plus 128 (unsigned, as the
instruction needs); q4 nibbles stay as the file has them. The outputs past the last whole
group keep the file's rows and go one at a time, by the same formula.

Against the float path (the weight dequantised, times the unquantised row) the only new error is
the activation's rounding, at most dx_b / 2 per element: |Y_int - Y_float| is bounded by
`error_bound` (that per-block sum, plus float32 rounding that grows with the row's length).

How it runs: the groups are split over threads, a parallel product's groups in a few
contiguous spans a thread (spans_kernel); within a group, the rows go by tiles of up to 8 that
share each block's codes while they sit in registers (int8_source.py says why). What every
product needs once per call, not once per group, is made here before the range runs: each
row's block corrections (`block_corrections_kernel`) for the codes stored unsigned.

The compiled kernels' on-disk names change with every edit of the files kernel_cache.SOURCES
lists, this driver and both generators among them: an edit to the generated code renames every
cached kernel.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from onebit.models import int8_ir, int8_source, kernel_cache, kernels
from onebit.models.blocks import BLOCK, BlockWeight, aligned_empty

# outputs per group: the 16 lanes of one vector (int8_ir.py), and one parallel task
GROUP = 16
# contiguous spans of tasks a parallel product makes per thread (spans_kernel): a few, so a
# thread that started late can still take another, and few calls
SPANS_PER_THREAD = 4
KIND_IDS = {"q8_0": 0, "q4_0": 1, "q4_1": 2, "q4_1f": 3, "q8_16f": 4}
# the kinds with one scale and one correction a block of 32, which compiled callers that build
# their own corrections (the fused stack, the draft head's chain) can run; q8_16f has two
PER_BLOCK_KINDS = ("q8_0", "q4_0", "q4_1", "q4_1f")
# how many bytes ahead of the block it multiplies a tile asks for its group's codes: a hint
# for a decode step, whose weights come from memory (against no prefetch, an A/B on SmolLM2
# moved within its noise: 0.87 [0.66 .. 1.43] a step, 1.19 [0.75 .. 1.35] a verify of 8)
PREFETCH_AHEAD = 1024
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
    """How this process computes a group's four products a lane (int8_ir.py): "vnni512" (one
    512-bit `vpdpbusd`), "vnni" (two 256-bit ones) or "portable"; the best the CPU has unless
    `ONEBIT_INT8_LANES` names a lesser one. All three give the same bits."""
    wanted = os.environ.get(LANES_ENV, "").strip().lower()
    if wanted not in ("", *FORMS):
        raise ValueError(f"{LANES_ENV}={wanted!r}: expected one of {FORMS}")
    for form in FORMS[FORMS.index(wanted) if wanted else 0:]:
        if form == "portable" or host_has_vnni(wide=form == "vnni512"):
            return form
    return "portable"


def block_ops(form: str) -> dict[str, object]:
    """The numba intrinsics the kernel is written in, for lanes `form` (int8_ir.block_ops
    lists them), made once per process and form."""
    got = _compiled.get(("ops", form))
    if got is None:
        got = _compiled[("ops", form)] = int8_ir.block_ops(form)
    return got


def _quantize_kernel(one_row: bool = False) -> Callable:
    """Both quantisers (the scheme of the module docstring), compiled together once; the one
    `one_row` asks for. Each block goes through int8_ir's `quantize_block` (the same bits as
    the scheme's scalar loop, a block in vector registers)."""
    got = _compiled.get(("quantize", one_row))
    if got is None:
        quantize_block = int8_ir.quantize_ops()["quantize_block"]

        def quantize_row(x, xq, at, dx, sx):  # pragma: no cover - compiled
            """Row x [n] into xq[at .. at + n), its block scales into dx [n / 32], sx."""
            for b in range(x.shape[0] // 32):
                d, total = quantize_block(x, b * 32, xq, at + b * 32)
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


def aligned_bytes_kernel() -> Callable:
    """The compiled, inlined `aligned_bytes(n) -> int8 [n]` starting on a cache line
    (blocks.ALIGN), for compiled callers' quantised rows (the fused stack, the draft head's
    chain): the products' 64-byte loads of such a row then never cross one."""
    got = _compiled.get("aligned_bytes")
    if got is None:
        from numba import njit

        from onebit.models.blocks import ALIGN

        @njit(nogil=True, inline="always")
        def aligned_bytes(n):  # pragma: no cover - compiled
            buf = np.empty(n + ALIGN, np.int8)
            at = (-buf.ctypes.data) % ALIGN
            return buf[at:at + n]

        got = _compiled["aligned_bytes"] = aligned_bytes
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


def _range_kernel(kind: int, form: str) -> Callable:
    """The compiled `product_range` for weights of `kind` (KIND_IDS) in lanes `form`: it binds
    int8_source's range function for this kind to `form`'s operations (int8_ir). One per (kind,
    form), shared by the serial and the parallel product and by the fused stack."""
    key = ("range", kind, form)
    got = _compiled.get(key)
    if got is not None:
        return got
    name = tuple(KIND_IDS)[kind]
    namespace = dict(block_ops(form), fma=kernels._tiled_intrinsics()["fma"])
    # __name__: numba's on-disk cache rebuilds a kernel's environment from its module's name
    namespace.update(__name__=__name__, np=np, GROUP=GROUP, WITH_MIN=name in ("q4_1", "q4_1f"),
                     OFFSET=8 if name == "q4_0" else 0, AHEAD=PREFETCH_AHEAD)
    exec(int8_source.range_source(name), namespace)  # noqa: S102 - our own template, no outside input
    # fastmath stays off: the float order is the docstring's, not LLVM's choice
    got = _compiled[key] = kernel_cache.jit(namespace["product_range"], key, nogil=True)
    return got


def _product_kernel(kind: int, parallel: bool, form: str | None = None) -> Callable:
    """The compiled `product(codes, d16, m16, table, xq, dx, sx, out)` for grouped weights of
    `kind` (KIND_IDS, `grouped`): out[r, o] by the module docstring's formula. It wraps the
    range of this kind and form (`_range_kernel`): the rows' block corrections, then one call
    for all groups, or with `parallel` one call per span of groups over numba's threads.
    Cached per (kind, parallel, form)."""
    form = form or lanes_form()
    key = ("product", kind, parallel, form)
    got = _compiled.get(key)
    if got is not None:
        return got
    from numba import njit, prange

    tasks_of = njit(inline="always")(tasks)
    ranged = _range_kernel(kind, form)
    corrections = block_corrections_kernel(half=kind == KIND_IDS["q8_16f"])
    factor = correction_factor(kind)

    if parallel:
        spans = spans_kernel()

        def product(codes, d16, m16, table, xq, dx, sx, out):  # pragma: no cover - compiled
            corr = corrections(xq, dx, factor)
            n_t = tasks_of(d16.shape[0])
            n_s = spans(n_t)
            for p in prange(n_s):
                ranged(codes, d16, m16, table, xq, dx, sx, corr, out, p * n_t // n_s,
                       (p + 1) * n_t // n_s)

        product = kernel_cache.jit(product, key, parallel=True)
    else:
        def product(codes, d16, m16, table, xq, dx, sx, out):  # pragma: no cover - compiled
            # np.int64(0), not 0: a literal 0 types as Literal[int](0), and numba would compile
            # the range a second time beside the int64 one the stack and the parallel product call
            ranged(codes, d16, m16, table, xq, dx, sx, corrections(xq, dx, factor), out,
                   np.int64(0), tasks_of(d16.shape[0]))

        product = kernel_cache.jit(product, key, nogil=True)

    got = _compiled[key] = product
    return got


def correction_factor(kind: int) -> int:
    """What a row's block starts from, per activation sum: q8_0's codes are stored plus 128 and
    q4_0's as nibbles (their value plus 8), so their blocks start at -128 and -8 times the
    block's activation sum; 0 for q4_1, whose nibbles are the values."""
    return (128, 8, 0, 0, 128)[kind]


def block_corrections_kernel(half: bool = False) -> Callable:
    """The compiled `block_corrections(xq, dx [R, nb], factor) -> int32 [R, nb]`: -factor
    times each row's block sum of int8 activations (made once per product). With factor 0
    (q4_1, which never reads it) it is an empty [R, 0]: nothing to fill on every product.
    With `half`, `-> int32 [R, 2 nb]`: the sums of each block's two halves of 16 (q8_16f, a
    scale per half)."""
    if half:
        got = _compiled.get("half corrections")
        if got is None:
            def half_corrections(xq, dx, factor):  # pragma: no cover - compiled
                rows, nb = dx.shape
                out = np.zeros((rows, 2 * nb), np.int32)
                for r in range(rows):
                    for h in range(2 * nb):
                        total = np.int32(0)
                        for j in range(16):
                            total += np.int32(xq[(r * nb * 2 + h) * 16 + j])
                        out[r, h] = -factor * total
                return out

            got = _compiled["half corrections"] = kernel_cache.jit(half_corrections, ("half",),
                                                                   nogil=True)
        return got
    got = _compiled.get("corrections")
    if got is None:
        def block_corrections(xq, dx, factor):  # pragma: no cover - compiled
            rows, nb = dx.shape
            out = np.zeros((rows, nb if factor else 0), np.int32)
            if factor:
                for r in range(rows):
                    for b in range(nb):
                        total = np.int32(0)
                        for j in range(32):
                            total += np.int32(xq[(r * nb + b) * 32 + j])
                        out[r, b] = -factor * total
            return out

        got = _compiled["corrections"] = kernel_cache.jit(block_corrections, (), nogil=True)
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
    """The compiled, inlined `spans(n_tasks) -> n`: how many contiguous spans of tasks (groups)
    a parallel product splits its tasks into, SPANS_PER_THREAD a thread (at most n_tasks); span
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
    """How many tasks `n_out` outputs make: one a group of GROUP, the last one short."""
    return (n_out + GROUP - 1) // GROUP


def grouped_arrays(kind: str, codes: np.ndarray, d: np.ndarray,
                   m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(codes uint8, d, m)` of a block weight's arrays (BlockWeight's: `codes` [out, bytes] in
    the file's rows, `d` / `m` [out, nb]) in the kernel's layout, each the same shape as given:
    outputs in groups of GROUP, a group's blocks one after another, each block's codes four
    bytes of each output in turn (int8_source.py), its scales the 16 outputs' side by side.
    q8_0 codes are stored plus 128. The rows past the last whole group stay as they are
    (q8_0's plus 128 too). The codes start on a cache line (blocks.ALIGN)."""
    out, width = codes.shape
    nb = d.shape[1]
    step = width // nb if nb else 0
    whole = out // GROUP * GROUP
    raw = np.asarray(codes)
    if kind in ("q8_0", "q8_16f"):
        raw = (raw.view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    raw = raw.view(np.uint8)
    packed = aligned_empty((out, width), np.uint8)
    packed[whole:] = raw[whole:]
    packed[:whole] = (raw[:whole].reshape(out // GROUP, GROUP, nb, step // 4, 4)
                      .transpose(0, 2, 3, 1, 4).reshape(whole, width))

    def scales(s: np.ndarray) -> np.ndarray:
        if not s.size:
            return np.ascontiguousarray(s)
        result = np.array(s, dtype=s.dtype, order="C")
        result[:whole] = (s[:whole].reshape(out // GROUP, GROUP, nb).transpose(0, 2, 1)
                          .reshape(whole, nb))
        return result

    return packed, scales(np.asarray(d)), scales(np.asarray(m))


def grouped(weight: BlockWeight) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`grouped_arrays` of `weight`, made on first use and kept with it."""
    got = weight.__dict__.get("_grouped")
    if got is None:
        got = grouped_arrays(weight.kind, weight.codes, weight.d, weight.m)
        object.__setattr__(weight, "_grouped", got)
    return got


def range_kernel(kind: str) -> Callable:
    """The compiled `product_range(codes, d16, m16, table, xq, dx, sx, corr, out, t_lo, t_hi)`
    (the weight's arrays as `grouped_arrays` lays them out; corr: `block_corrections_kernel()(xq,
    dx, correction_factor(KIND_IDS[kind]))`) for weights of `kind` ("q8_0" / "q4_0" /
    "q4_1"), in this process's lanes form: the outputs of tasks t_lo .. t_hi - 1 (`tasks(n_out)`
    in all), for a compiled caller that splits the tasks over threads itself (the fused
    stack)."""
    return _range_kernel(KIND_IDS[kind], lanes_form())


def block_rows(weight: BlockWeight, rows: np.ndarray, *,
               parallel: bool | None = None, form: str | None = None,
               quantized: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """`[R, out]` in rows' dtype (float32 or float64): rows `[R, in]` times the block weight,
    by the module docstring's formula. `parallel` overrides the size rule and `form` the lanes
    form (`lanes_form()`); neither changes a bit. `quantized`: `quantize_rows(rows)` made
    already (several weights times the same rows), used as it is."""
    n_out, n_in = weight.shape
    rows = np.asarray(rows)
    if rows.ndim != 2 or rows.shape[1] != n_in:
        raise ValueError(f"rows of shape {rows.shape} do not meet a [{n_out}, {n_in}] weight")
    if rows.dtype not in kernels.TILED_DTYPES:
        raise TypeError(f"the integer kernel takes float32 or float64 rows, got {rows.dtype}")
    xq, dx, sx = quantize_rows(rows) if quantized is None else quantized
    result = np.empty((rows.shape[0], n_out), dtype=np.float32)
    if parallel is None:
        parallel = n_out * n_in >= kernels.PARALLEL_MIN_WEIGHTS
    codes, d, m = grouped(weight)
    _product_kernel(KIND_IDS[weight.kind], parallel, form)(
        codes, d, m, f16_table(), xq, dx, sx, result)
    return result.astype(rows.dtype, copy=False)


def error_bound(weight_float: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`[R, out]`: a bound on |block_rows - rows @ W.T| given the dequantised weight `W`:
    the activation rounding, sum over blocks of (dx_b / 2) * sum_j |w_j|, plus float32
    rounding of the n-term sums, 2 * n * 2^-24 * sum_j |w_j x_j| (with n the row's length:
    the budget grows with the reduction), plus sum_j |w_j x_j| over the blocks that went in as
    zeros though not all zero (amax below about 3.7e-37), computed in float64."""
    w = np.abs(np.asarray(weight_float, np.float64))
    x = np.asarray(rows, np.float32).astype(np.float64)
    n = w.shape[1]
    _, dx, _ = quantize_rows(rows)
    blocks_w = w.reshape(w.shape[0], n // BLOCK, BLOCK).sum(axis=2)  # [out, nb]
    rounding = 0.5 * dx.astype(np.float64) @ blocks_w.T  # [R, out]
    magnitude = np.abs(x) @ w.T
    dropped = np.abs(x) * np.repeat(dx == 0, BLOCK, axis=1)
    return (rounding * (1 + 2.0**-10) + 2.0 * n * 2.0**-24 * (magnitude + rounding)
            + dropped @ w.T)
