"""Backends for the forward's heavy products (docs/device.md): chosen at load with
`onebit.load_model(path, backend="host" | "torch" | "cuda" | "npu")`, or a `Backend` object.

Each module imports its runtime (torch, pyxrt) only when that backend is built.
"""

from __future__ import annotations

from onebit.backends.base import Backend
from onebit.backends.errors import BackendError, BackendUnavailableError, DeviceRunError

BACKENDS = ("host", "torch", "cuda", "npu")


def make_backend(backend: str | Backend = "host", *, kernel: str = "auto",
                 resident: bool = True) -> Backend:
    """The backend named `backend` (a `Backend` is returned as it is). `kernel` is the host
    kernel ("auto", "numba", "numba-float", "numpy") for "host", and "rows" or "matmul" for
    torch/cuda ("auto" means "rows"). The NPU backend reads its kernels from $ONEBIT_KERNEL_DIR."""
    if isinstance(backend, Backend):
        return backend
    if backend == "host":
        from onebit.backends.host import HostBackend

        return HostBackend(kernel, resident=resident)
    if backend in ("torch", "cuda"):
        from onebit.backends.torch_backend import TorchBackend

        return TorchBackend("cuda" if backend == "cuda" else "cpu",
                            "rows" if kernel == "auto" else kernel, resident=resident)
    if backend == "npu":
        from onebit.backends.npu import NpuBackend

        return NpuBackend(resident=resident)
    raise BackendError(f"backend must be one of {BACKENDS} or a Backend, got {backend!r}")


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "BackendUnavailableError",
    "DeviceRunError",
    "make_backend",
]
