"""The torch backend: weights uploaded once as tensors on a torch device (the CPU, or CUDA).

Batch invariance is the point of care. A GEMM library picks its blocking, and so its order
of summation, from the problem's shape: `X @ W.T` for 8 rows need not give row 0 the bits it
gets alone (cuBLAS documents this; on the CPU it was measured, docs/device.md). So the default
kernel, "rows", computes each row by the same call whatever the batch: one matrix-vector
product (`torch.mv`) per row, on a copy of the row in storage of its own, the call a 1-row
step makes. "matmul" (one `X @ W.T` per batch)
is kept for measurement: tests/backends shows whether it holds the promise where it runs.
"""

from __future__ import annotations

import importlib

import numpy as np

from onebit.backends.base import Backend
from onebit.backends.errors import BackendError, BackendUnavailableError

TORCH_KERNELS = ("rows", "matmul")


def import_torch():
    """torch, or BackendUnavailableError saying how to get it."""
    try:
        return importlib.import_module("torch")
    except ImportError as error:
        raise BackendUnavailableError(
            f"the torch backend needs torch ({error}); pip install 'onebit[peer]'"
        ) from None


def cuda_missing(torch) -> str | None:
    """Why CUDA cannot be used here, or None when it can."""
    if getattr(torch.version, "cuda", None) is None:
        return f"torch {torch.__version__} is a build without CUDA"
    if not torch.cuda.is_available():
        return "torch has CUDA but sees no CUDA device"
    return None


class TorchBackend(Backend):
    """Products with torch on `device` ("cpu" or "cuda"); float32 or float64 as the rows."""

    def __init__(self, device: str = "cpu", kernel: str = "rows", *, resident: bool = True):
        super().__init__(resident=resident)
        if kernel not in TORCH_KERNELS:
            raise BackendError(
                f"torch backend: kernel must be one of {TORCH_KERNELS}, got {kernel!r}"
            )
        if device not in ("cpu", "cuda"):
            raise BackendError(f"torch backend: device must be 'cpu' or 'cuda', got {device!r}")
        torch = self._torch = import_torch()
        if device == "cuda":
            missing = cuda_missing(torch)
            if missing is not None:
                raise BackendUnavailableError(f"the cuda backend cannot run here: {missing}")
            # cuBLAS may pick split-K or atomics-based reductions; ask for the deterministic
            # ones (a fixed order per shape; the per-row kernel keeps the shape fixed).
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        self.device, self.kernel = device, kernel
        self.name = "cuda" if device == "cuda" else "torch"

    def prepare(self, key: str, weight: np.ndarray):
        # A copy: the weight store's arrays may be read-only views of the file.
        return self._torch.from_numpy(np.array(weight)).to(self.device)

    def product(self, handle, rows: np.ndarray) -> np.ndarray:
        torch = self._torch
        dtype = np.float64 if handle.dtype == torch.float64 else np.float32
        x = torch.from_numpy(np.array(rows, dtype=dtype)).to(self.device)
        with torch.inference_mode():
            if self.kernel == "matmul":
                y = x @ handle.T
            else:
                # Each row in storage of its own: a view into the batch starts at an address
                # that depends on r, and the gemv's vector path depends on the alignment (rows
                # of 50 float32 differed in the last bit at r = 3 when left as views).
                y = torch.stack([torch.mv(handle, x[r].clone()) for r in range(x.shape[0])])
        return y.cpu().numpy()

    def describe(self) -> str:
        torch = self._torch
        where = torch.cuda.get_device_name(0) if self.device == "cuda" else "CPU"
        return f"{self.name} (torch {torch.__version__}, {where}, {self.kernel} kernel)"
