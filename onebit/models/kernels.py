"""The one product the forward spends its time in: `Y[r] = W @ X[r]` for a few rows.

Batch invariance (design/forward.md) needs each row's result to be independent of how many
rows share the call: a verify batch of 8 rows must give, row for row, the bits a 1-row step
gives. numpy's `X @ W.T` does not (BLAS picks a different blocking for 1 and 8 rows), so both
kernels here compute each row with the same code whatever the batch:

- "numba": a compiled kernel, parallel over blocks of output features (for weights of 1M
  entries or more; smaller ones run on one thread); for each output feature it runs the same
  dot-product loop over every row, so a row's bits cannot depend on the others, and the weight
  row is read from memory once for all rows. Measured on the 2-core box (float32, quiet
  moments; the box is shared and timings swing by 10x under load): at 4096 x 4096 one row
  1.2-1.5 ms like BLAS gemv, 8 rows 5.5-7.4 ms, where 8 gemv calls cost 9.8 ms; at
  8192 x 1024, 8 rows 2.4 ms against 4.7 ms.
- "numpy": one BLAS gemv per row, `W @ X[r]` (no extra dependency; verify costs n steps).

"auto" is numba when it imports, else numpy. The two kernels differ from each other in the
last bits; a model uses one kernel for both its step and its verify, which is what matters.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

KERNELS = ("auto", "numba", "numpy")

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

_numba_kernels: dict[bool, Callable] = {}


def _numba_kernel(parallel: bool) -> Callable:
    """The compiled kernel (built on first use; not cached on disk, where numba would not
    tell the parallel and the serial build of one closure apart)."""
    kernel = _numba_kernels.get(parallel)
    if kernel is not None:
        return kernel
    from numba import njit, prange

    # For each output feature the same dot-product loop runs over every row; fastmath lets
    # LLVM vectorise that loop with a fixed, compile-time reduction order, so a row's bits do
    # not depend on the other rows.
    @njit(parallel=parallel, fastmath=True)
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

    _numba_kernels[parallel] = rows_kernel
    return rows_kernel


def numba_rows(weight: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`[R, out]` from the compiled per-row kernel."""
    rows = np.ascontiguousarray(rows, dtype=weight.dtype)
    out = np.empty((rows.shape[0], weight.shape[0]), dtype=weight.dtype)
    _numba_kernel(weight.size >= PARALLEL_MIN_WEIGHTS)(weight, rows, out)
    return out


def numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def choose(kind: str = "auto") -> tuple[str, Linear]:
    """The kernel named `kind` ("auto", "numba", "numpy") as `(name, function)`."""
    if kind not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kind!r}")
    if kind == "auto":
        kind = "numba" if numba_available() else "numpy"
    if kind == "numba":
        if not numba_available():
            raise ValueError("kernel='numba' needs the numba package (pip install numba)")
        return "numba", numba_rows
    return "numpy", numpy_rows
