"""The integer kernel's range function as generated Python source, for numba to compile:
`range_source(kind)` returns the text of `product_range(codes, d16, m16, table, xq, dx, sx,
corr, out, t_lo, t_hi)`, which computes out[r, o] = W[o] . X[r] by int8_kernel.py's formula
for every row r and for the outputs o of tasks t_lo .. t_hi - 1 (a task is one group of
GROUP outputs). Only text is made here: its names (dot4, fma, halves, GROUP, ...) are bound by
the driver (int8_kernel._range_kernel), which execs, compiles and calls it; this module
imports nothing.

Why it is laid out this way:
- a group's 16 outputs are the 16 lanes of one vector (int8_ir.py), so one `dot4` serves 16
  outputs, a block's scale multiplies 16 outputs at once, and an output needs no horizontal
  sum: a row's 16 results are one store;
- the rows of a verify go by tiles of up to 8 that share each block's codes while they sit in
  registers (one load and nibble split of 256 or 512 bytes, then 8 `dot4` a row); each row
  keeps its own accumulators (one, and one for q4_1's min term), so 8 rows hold 16 of the 32
  vector registers, and every tile size 1..8 is written out so a verify of any width decodes a
  block once per 8 rows;
- a row's eight `dot4` of a block run as two chains (even and odd chunks) joined by one
  integer add, so a single row (a decode step) keeps two products in flight;
- each tile of k rows is written out in full, its accumulators named variables: numba keeps
  them in registers only then, and a helper taking the arrays would count references on every
  call;
- the outputs past the last whole group (n_out % 16 of them) keep the file's row order and go
  one at a time, scalar: the same integers and the same float operations in the same order.

Exactness: every (row, output) gets the same float operations in the same order whatever tile,
task or thread it lands in, and nothing of one row enters another's: a row's bits do not
depend on the batch (tests/forward/test_int8_kernel.py, 1..16 rows, every form).
"""

from __future__ import annotations

_RANGE = """
def product_range(codes, d16, m16, table, xq, dx, sx, corr, out, t_lo, t_hi):
{shape}
    n_rows, n_in = out.shape[0], nb * 32
    width = codes.shape[1]  # code bytes of one output: nb * 32 (q8_0) or nb * 16 (q4)
    flat = codes.reshape(-1)
    d_flat = d16.reshape(-1)
    m_flat = m16.reshape(-1)
    out_flat = out.reshape(-1)
    corr_flat = corr.reshape(-1)
    groups = n_out // GROUP
    for g in range(t_lo, min(t_hi, groups)):
        first = g * GROUP * width  # the group's codes: block by block, GROUP * width / nb each
        scales = g * GROUP * {scale_cols}
        r = 0
        while r < n_rows:
            left = n_rows - r
{tiles}
    if t_hi > groups:  # the outputs past the last whole group, in the file's row order
        for o in range(groups * GROUP, n_out):
            w0 = o * width
            for r in range(n_rows):
                acc = np.float32(0)
                m = np.float32(0)
                for b in range(nb):
{block_sum}
                out[r, o] = acc + m
"""

# A block of the scalar tail: its exact integer sum, then the fma (and q4_1's min term)
_BLOCK_SUM = """                    v = np.int32(0)
{scalar}
                    acc = fma(np.float32(v), {d_scalar} * dx[r, b], acc)
                    if WITH_MIN:
                        m = fma({m_scalar}, sx[r, b], m)"""

# q8_16f's: each half of the block its own integer sum and its own scale, the halves in order
_HALF_BLOCK_SUM = """                    for h in range(2):
                        v = np.int32(0)
                        for j in range(16):
                            x0 = r * n_in + b * 32 + h * 16 + j
                            v += (np.int32(flat[w0 + b * 32 + h * 16 + j]) - 128) * np.int32(xq[x0])
                        acc = fma(np.float32(v), d16[o, 2 * b + h] * dx[r, b], acc)"""

_TILE = """
            {test}:
{zeros}
                for b in range(nb):
                    at = first + b * GROUP * (width // nb)
{prefetch}
{codes}
{scale_loads}
{mins}
{rows}
{store}
                r += {k}
"""

# The scalar tail's exact block sum: q8_0 codes are stored plus 128, q4 codes as nibbles
# (q4_0's value plus 8); the integer is the same sum of code times activation either way.
_SCALAR = {
    "q8_0": """\
                    for j in range(32):
                        x0 = r * n_in + b * 32 + j
                        v += (np.int32(flat[w0 + b * 32 + j]) - 128) * np.int32(xq[x0])""",
    "q4": """\
                    for j in range(16):
                        byte = np.int32(flat[w0 + b * 16 + j])
                        x0 = r * n_in + b * 32 + j
                        v += ((byte & 15) - OFFSET) * np.int32(xq[x0])
                        v += ((byte >> 4) - OFFSET) * np.int32(xq[x0 + 16])""",
}


def range_source(kind: str) -> str:
    """The source of `product_range` (the module docstring's computation) for weights of
    `kind` ("q8_0", "q4_0", "q4_1"; "q4_1f", q4_1 with float32 scales, which the scalar tail
    reads as they are instead of through the float16 table; "q8_16f", q8_0's codes with a
    float32 scale per half block, whose two chains are the halves, each from its own correction
    and times its own scale): tiles of 8, 7, .., 2 rows and 1 over each group, and the scalar
    tail. The same text for the same argument, every call.

    A block of a group: q8_0's 8 chunks of 64 bytes (chunk t: codes 4t .. 4t + 3 of each
    output), or q4's 4 chunks whose low nibbles are chunks 0..3 and high nibbles chunks 4..7
    (codes 16 + 4t ..); chunk t meets the row's activations at 4t within the block."""
    q8 = kind in ("q8_0", "q8_16f")
    with_min = kind in ("q4_1", "q4_1f")
    float_scales = kind in ("q4_1f", "q8_16f")
    half_scales = kind == "q8_16f"
    if q8:
        codes = [f"                    c{t} = codes_raw(flat, at + {64 * t})" for t in range(8)]
    else:
        codes = [f"                    c{t} = codes_low(flat, at + {64 * t})\n"
                 f"                    c{t + 4} = codes_high(flat, at + {64 * t})"
                 for t in range(4)]

    def rows(k: int) -> str:
        if half_scales:
            return half_rows(k)
        lines = []
        for i in range(k):
            # q8_0 / q4_0 codes go in as unsigned (plus 128 / plus 8): the row's block starts
            # from minus that times its activations' sum (corr), so the integer is sum c q
            start = "izero()" if with_min else f"isplat(corr_flat[(r + {i}) * nb + b])"
            lines += [f"                    x{i} = (r + {i}) * n_in + b * 32",
                      f"                    even = dot4({start}, c0, xq, x{i})",
                      f"                    odd = dot4(izero(), c1, xq, x{i} + 4)"]
            lines += [f"                    {'odd' if t % 2 else 'even'} = dot4("
                      f"{'odd' if t % 2 else 'even'}, c{t}, xq, x{i} + {4 * t})"
                      for t in range(2, 8)]
            lines.append(f"                    acc{i} = fma(tofloat(iadd(even, odd)), "
                         f"fmul(dw, fsplat(dx[r + {i}, b])), acc{i})")
            if with_min:
                lines.append(f"                    min{i} = fma(mw, fsplat(sx[r + {i}, b]), "
                             f"min{i})")
        return "\n".join(lines)

    def half_rows(k: int) -> str:
        # q8_16f: chunks 0..3 (codes 0..15) and 4..7 (16..31) are the two chains, each from its
        # half's correction, each times its own scale; the first half's fma first
        lines = []
        for i in range(k):
            corr = f"corr_flat[(r + {i}) * n_scales + 2 * b"
            lines += [f"                    x{i} = (r + {i}) * n_in + b * 32",
                      f"                    even = dot4(isplat({corr}]), c0, xq, x{i})",
                      f"                    odd = dot4(isplat({corr} + 1]), c4, xq, x{i} + 16)"]
            for t in (1, 2, 3):
                lines += [f"                    even = dot4(even, c{t}, xq, x{i} + {4 * t})",
                          f"                    odd = dot4(odd, c{t + 4}, xq, x{i} + {16 + 4 * t})"]
            lines += [f"                    acc{i} = fma(tofloat({chain}), fmul({scale}, "
                      f"fsplat(dx[r + {i}, b])), acc{i})"
                      for chain, scale in (("even", "dw"), ("odd", "dw1"))]
        return "\n".join(lines)

    def zeros(k: int) -> str:
        return "\n".join(f"                acc{i} = fzero()"
                         + (f"\n                min{i} = fzero()" if with_min else "")
                         for i in range(k))

    def store(k: int) -> str:
        return "\n".join(f"                store(out_flat, (r + {i}) * n_out + g * GROUP, "
                         + (f"fadd(acc{i}, min{i}))" if with_min else f"acc{i})")
                         for i in range(k))

    if half_scales:  # the block's two halves' scales, 16 outputs each
        scale_loads = ("                    dw = halves(d_flat, scales + 2 * b * GROUP)\n"
                       "                    dw1 = halves(d_flat, scales + (2 * b + 1) * GROUP)")
    else:
        scale_loads = "                    dw = halves(d_flat, scales + b * GROUP)"
    tiles = []
    sizes = ((8, "if left >= 8"), *((k, f"elif left == {k}") for k in (7, 6, 5, 4, 3, 2)),
             (1, "else"))
    for k, test in sizes:
        tiles.append(_TILE.format(
            test=test, k=k, zeros=zeros(k), codes="\n".join(codes), rows=rows(k), store=store(k),
            prefetch="\n".join(f"                    prefetch(flat, at + AHEAD + {64 * t})"
                                for t in range(8 if q8 else 4)),
            mins="                    mw = halves(m_flat, scales + b * GROUP)" if with_min
            else "", scale_loads=scale_loads))
    if half_scales:
        block_sum = _HALF_BLOCK_SUM
    else:
        block_sum = _BLOCK_SUM.format(
            scalar=_SCALAR["q8_0" if q8 else "q4"],
            d_scalar="d16[o, b]" if float_scales else "table[d16[o, b]]",
            m_scalar="m16[o, b]" if float_scales else "table[m16[o, b]]")
    return _RANGE.format(tiles="".join(tiles), block_sum=block_sum,
                         shape=("    n_out, n_scales = d16.shape\n    nb = n_scales // 2"
                                if half_scales else "    n_out, nb = d16.shape"),
                         scale_cols="n_scales" if half_scales else "nb")
