"""The NPU backend: GEMM designs on an AMD XDNA NPU through pyxrt (docs/device.md).

Per weight `[out, in]`: the design built for its shape (manifest.py), the weight packed in the
design's b type and padded to `[N, K]`, in a device buffer once. Per product: rows packed in
the design's a type (quantised per row for int8 designs), padded to M rows and K inputs, run
in chunks of M rows; the `[rows, out]` corner of each result kept. A row's result depends only
on that row (the design computes every row by the same program, whatever the padding holds),
so the backend is batch-invariant where the design is.
"""

from __future__ import annotations

import os

import numpy as np

from onebit.backends.base import Backend
from onebit.backends.errors import BackendError
from onebit.backends.npu.manifest import KernelSpec, kernel_for, load_manifest
from onebit.backends.npu.packing import pack, unpack_result
from onebit.backends.npu.runtime import XrtRuntime, import_pyxrt

KERNEL_DIR_ENV = "ONEBIT_KERNEL_DIR"


class NpuBackend(Backend):
    """Products on the NPU. `kernel_dir` defaults to $ONEBIT_KERNEL_DIR; `pyxrt` to the real
    module (tests pass an emulation of its objects)."""

    name = "npu"

    def __init__(self, kernel_dir: str | None = None, *, pyxrt=None, resident: bool = True):
        super().__init__(resident=resident)
        folder = kernel_dir or os.environ.get(KERNEL_DIR_ENV)
        if not folder:
            raise BackendError(
                f"the npu backend needs {KERNEL_DIR_ENV} (the folder of kernels.json)"
            )
        self.kernel_dir = folder
        self.specs = load_manifest(folder)
        self.runtime = XrtRuntime(import_pyxrt() if pyxrt is None else pyxrt)

    def prepare(self, key: str, weight: np.ndarray):
        out_features, in_features = weight.shape
        spec = kernel_for(self.specs, out_features, in_features)
        packed, scale = pack(weight, spec.dtype[1], spec.N, spec.K)
        bo = self.runtime.upload_weight(spec, packed)
        return _Resident(spec, bo, scale, out_features, in_features)

    def product(self, handle, rows: np.ndarray) -> np.ndarray:
        spec: KernelSpec = handle.spec
        if rows.shape[1] != handle.in_features:
            raise BackendError(
                f"npu: rows have {rows.shape[1]} inputs, the weight takes {handle.in_features}"
            )
        out = np.empty((rows.shape[0], handle.out_features), dtype=rows.dtype)
        for start in range(0, rows.shape[0], spec.M):  # chunks of M rows, each padded to M
            chunk = rows[start : start + spec.M]
            packed, scale = pack(chunk, spec.dtype[0], spec.M, spec.K)
            c = self.runtime.gemm(spec, packed, handle.bo)
            out[start : start + len(chunk)] = unpack_result(
                c, spec.dtype[2], len(chunk), handle.out_features, scale, handle.scale, rows.dtype
            )
        return out

    def describe(self) -> str:
        return f"npu ({len(self.specs)} kernels from {self.kernel_dir})"


class _Resident:
    """A weight in a device buffer, with the design that serves it."""

    __slots__ = ("spec", "bo", "scale", "out_features", "in_features")

    def __init__(self, spec, bo, scale, out_features, in_features):
        self.spec, self.bo, self.scale = spec, bo, scale
        self.out_features, self.in_features = out_features, in_features
