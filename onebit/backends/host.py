"""The host backend: today's kernels (onebit.models.kernels) on NumPy arrays."""

from __future__ import annotations

import numpy as np

from onebit.backends.base import Backend
from onebit.backends.errors import BackendError
from onebit.models import kernels


class HostBackend(Backend):
    """Products on the CPU by the batch-invariant kernels of `kernels.py`. The prepared form
    is the weight array itself: the weight store already unpacked it once."""

    name = "host"

    def __init__(self, kernel: str = "auto", *, resident: bool = True) -> None:
        super().__init__(resident=resident)
        try:
            self.kernel, self._rows = kernels.choose(kernel)
        except ValueError as error:
            raise BackendError(f"host backend: {error}") from None

    def prepare(self, key: str, weight: np.ndarray) -> np.ndarray:
        return weight

    def product(self, handle: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self._rows(handle, rows.astype(handle.dtype, copy=False))

    def describe(self) -> str:
        return f"host ({self.kernel} kernel)"
