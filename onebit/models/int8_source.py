"""The integer kernel's range function as generated Python source, for numba to compile:
`range_source(wide_form)` returns the text of `product_range(codes, d16, m16, table, xq, dx,
dxx, sx, corr, out, t_lo, t_hi)`, which computes out[r, o] = W[o] . X[r] by int8_kernel.py's
formula for every row r and for the outputs o of tasks t_lo .. t_hi - 1 (TASK_OUTS outputs a
task). Only text is made here: its names (load_codes, dot, fma, TASK_OUTS, WITH_MIN, ...) are
bound by the driver (int8_kernel._product_kernel), which execs, compiles and calls it; this
module imports nothing.

Why it is laid out this way:
- for each output o, the rows go by tiles that share each weight block's load and nibble split
  while it sits in registers: up to 8 rows in the 512-bit form (32 vector registers hold 8
  accumulators, the codes and the scales), up to 4 in the 256-bit ones (two accumulators a
  row, even and odd blocks, in 16 registers). A verify of R rows so reads each weight from
  memory once and decodes it R / 8 (R / 4) times; the 512-bit form has a tile for every size
  3..8, so 3, 5, 6 or 7 rows decode each block pair once, not once per tile of 4, 2 and 1.
- each tile of k rows is written out in full, its accumulators named variables: numba keeps
  them in registers only then, and a helper taking the arrays would count references on every
  call (measured 1.5x slower for one row).
- the 256-bit forms keep two FMA chains in flight (even blocks b = 0, 2, .. into e, odd into
  o); the 512-bit form one 16-lane chain a row (its halves are e and o), the tile's rows in
  flight, and for one row (a decode step) it goes two outputs at a time (`_DUAL`), two chains
  in flight, each output's block scales multiplied by the row's once.
- the 512-bit tiles of 2..8 rows take q4_1's min term for all their rows at once, row i in
  lane i of 8 (`_WIDE_SETUP`'s transposed sx), the one-row formula's operations per lane.

Exactness: every (row, output) gets the same float operations in the same order whatever tile,
task or thread it lands in, and nothing of one row enters another's: a row's bits do not
depend on the batch (tests/forward/test_int8_kernel.py, 1..16 rows, every form).
"""

from __future__ import annotations

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


def range_source(wide_form: bool = False) -> str:
    """The source of `product_range` (the module docstring's computation): for the 512-bit
    form with `wide_form` (tiles of 8, 7, .., 3, 2, 1 rows over block pairs, the one-row path
    two outputs at a time), else for the 256-bit and portable forms (tiles of 4, 2, 1 rows,
    even and odd blocks apart). The same text for the same argument, every call.

    Per tile of k rows: `lines` is one block's fma into each row's accumulator (the block's
    lanes times dw_b * dx_b), `wide` one block pair's, `store` the one-row ending (q4_1's min
    term over 16 lanes, the halving tree, the tail in order, then the output) and `rows_store`
    the 512-bit tiles' ending with the min term of all k rows in the lanes of one vector."""

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

