"""`exp` in float32 that a compiled loop vectorises, for the compiled stack's SiLU and softmax.

numba lowers `np.exp` on a float32 to a call of the C library's `expf`, and a loop holding a
call is not vectorised: on SmolLM2 a token's SiLUs and softmaxes are about 130 thousand such
calls, a fifth of a step, and as much again for every further row of a verify. The same
function written in arithmetic (Cody and Waite's reduction, the Cephes `expf` polynomial) is
a dozen vector instructions for 16 lanes at once:

    n = floor(x log2(e) + 1/2);  r = (x - n c1) - n c2          (c1 + c2 = ln 2, c1 exact)
    exp(x) = 2^n (1 + r + r^2 P(r)),  P of degree 5

Each lane computes its own element, in the same operations, whatever the loop around it, so a
row's values never depend on its neighbours or on the vector width (the base contract's
B-checks keep holding bit for bit). Against exp computed exactly, the error is under one unit
in the last place over the whole normal range (tests/forward/test_vexp.py sweeps it).
At the edges: results below the smallest normal float32 (x < -87.33) are 0 (they are at most
1.2e-38 and only ever added to larger terms here), x above 88.72 gives inf, NaN stays NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: below this, exp(x) is under the smallest normal float32: the result is 0
LOWEST = np.float32(-87.33654)
#: above this, exp(x) overflows float32: the result is inf
HIGHEST = np.float32(88.72283)

_built: dict[str, Callable] = {}


def _bits_to_float():
    """An intrinsic: the float32 whose bits are an integer's low 32 (one `bitcast`, which
    vectorises)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def bits_to_float(typingctx, bits):
        if not isinstance(bits, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            # numba widens int32 arithmetic to int64: the low 32 bits are the float's
            low = builder.trunc(args[0], ir.IntType(32)) if bits.bitwidth > 32 else args[0]
            return builder.bitcast(low, context.get_value_type(types.float32))

        return types.float32(bits), codegen

    return bits_to_float


def exp_kernel() -> Callable:
    """`exp32(x: float32) -> float32`, compiled inline into its caller (built once)."""
    got = _built.get("exp32")
    if got is not None:
        return got
    from numba import njit

    bits_to_float = _bits_to_float()
    f32 = np.float32
    log2e, half = f32(1.44269504088896341), f32(0.5)
    c1, c2 = f32(0.693359375), f32(-2.12194440e-4)
    p0, p1, p2 = f32(1.9875691500e-4), f32(1.3981999507e-3), f32(8.3334519073e-3)
    p3, p4, p5 = f32(4.1665795894e-2), f32(1.6666665459e-1), f32(5.0000001201e-1)
    one, zero, inf = f32(1.0), f32(0.0), f32(np.inf)
    lowest, highest = LOWEST, HIGHEST

    @njit(nogil=True, inline="always")
    def exp32(x):  # pragma: no cover - compiled
        xc = x if x > lowest else lowest  # NaN takes the bound here and is restored below
        xc = xc if xc < highest else highest
        n = np.floor(xc * log2e + half)
        r = xc - n * c1
        r = r - n * c2
        p = p0 * r + p1
        p = p * r + p2
        p = p * r + p3
        p = p * r + p4
        p = p * r + p5
        y = p * (r * r) + r + one
        # 2^n in two factors, each a normal float for every n in [-126, 128]
        k = np.int32(n)
        k1 = k >> np.int32(1)
        s1 = bits_to_float((k1 + np.int32(127)) << np.int32(23))
        s2 = bits_to_float((k - k1 + np.int32(127)) << np.int32(23))
        y = y * s1 * s2
        y = zero if x < lowest else y
        y = inf if x > highest else y
        return x if x != x else y

    _built["exp32"] = exp32
    return exp32
