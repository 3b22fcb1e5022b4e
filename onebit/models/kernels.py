"""The one product the forward spends its time in: `Y[r] = W @ X[r]` for a few rows.

Batch invariance (design/forward.md) needs each row's result to be independent of how many
rows share the call: a verify batch of 8 rows must give, row for row, the bits a 1-row step
gives. numpy's `X @ W.T` does not (BLAS picks a different blocking for 1 and 8 rows), so both
kernels here compute each row with the same code whatever the batch:

- "numba": a compiled kernel, parallel over blocks of output features (for weights of 1M
  entries or more; smaller ones run on one thread); for each output feature
  it runs the same dot-product loop over every row, so a row's bits cannot depend on the others,
  and the weight row is read from memory once for all rows (measured on the 2-core box at
  4096 x 4096 float32: one row as fast as BLAS gemv, 8 rows about 4.5x one row, where a loop of
  gemv calls costs 8x).
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


_numba_kernels: dict[tuple[np.dtype, bool], Callable] = {}

# Below this many weights a product is too small to share among threads: the threads' start
# and stop cost more than the product (and on a busy 2-core box much more). The choice depends
# only on the weight's size, never on the number of rows, so each weight always runs the same
# compiled loop and batch invariance holds.
PARALLEL_MIN_WEIGHTS = 1 << 20


def _numba_kernel(dtype: np.dtype, parallel: bool) -> Callable:
    kernel = _numba_kernels.get((dtype, parallel))
    if kernel is not None:
        return kernel
    from numba import njit, prange

    zero = dtype.type(0)
    block = 8  # output features per parallel task

    # fastmath lets LLVM vectorise the dot product (a fixed, compile-time reduction order: the
    # same machine code runs for every (feature, row), so rows stay independent).
    @njit(parallel=parallel, fastmath=True, cache=True)
    def rows_kernel(weight, rows, out):  # pragma: no cover - compiled
        n_out, n_in = weight.shape
        n_rows = rows.shape[0]
        for b in prange((n_out + block - 1) // block):
            for o in range(b * block, min(n_out, b * block + block)):
                w = weight[o]
                for r in range(n_rows):
                    x = rows[r]
                    acc = zero
                    for i in range(n_in):
                        acc += w[i] * x[i]
                    out[r, o] = acc

    _numba_kernels[dtype, parallel] = rows_kernel
    return rows_kernel


def numba_rows(weight: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`[R, out]` from the compiled per-row kernel."""
    rows = np.ascontiguousarray(rows, dtype=weight.dtype)
    out = np.empty((rows.shape[0], weight.shape[0]), dtype=weight.dtype)
    _numba_kernel(weight.dtype, weight.size >= PARALLEL_MIN_WEIGHTS)(weight, rows, out)
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
