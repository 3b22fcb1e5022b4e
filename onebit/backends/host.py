"""The host backend: today's kernels (onebit.models.kernels) on NumPy arrays."""

from __future__ import annotations

import numpy as np

from onebit.backends.base import Backend
from onebit.backends.errors import BackendError
from onebit.models import kernels
from onebit.models.blocks import BlockWeight


class HostBackend(Backend):
    """Products on the CPU by the batch-invariant kernels of `kernels.py`. The prepared form
    is what the weight store handed out: a float array, or, on the "numba" kernel, a Q4NX
    weight's `PackedWeight` (its blocks, read by the packed kernel of `q4nx_kernel.py`)."""

    name = "host"

    def __init__(self, kernel: str = "auto", *, resident: bool = True) -> None:
        super().__init__(resident=resident)
        try:
            self.kernel, self._rows = kernels.choose(kernel)
        except ValueError as error:
            raise BackendError(f"host backend: {error}") from None
        # the model hands this backend Q4NX weights packed when it can read them so
        self.reads_q4nx = kernels.reads_q4nx(self.kernel)
        self.reads_blocks = kernels.reads_blocks(self.kernel)

    def prepare(self, key: str, weight):
        return weight

    def product(self, handle, rows: np.ndarray) -> np.ndarray:
        if isinstance(handle, BlockWeight):  # a ggml block weight: the integer kernel
            from onebit.models.int8_kernel import block_rows

            return block_rows(handle, rows)
        if getattr(handle, "packed", False):
            from onebit.models.q4nx_kernel import packed_rows

            return packed_rows(handle, rows)
        return self._rows(handle, rows.astype(handle.dtype, copy=False))

    def products_of(self, handles: list, rows: np.ndarray) -> list[np.ndarray]:
        """Block weights share the rows' quantisation (int8_kernel.quantize_rows, the same bits
        every time): made once for a layer's q / k / v or gate / up instead of once a product."""
        if len(handles) < 2 or not all(isinstance(h, BlockWeight) for h in handles):
            return super().products_of(handles, rows)
        from onebit.models.int8_kernel import block_rows, quantize_rows

        quantized = quantize_rows(rows)
        return [block_rows(h, rows, quantized=quantized) for h in handles]

    def describe(self) -> str:
        return f"host ({self.kernel} kernel)"
