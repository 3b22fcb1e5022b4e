"""Backends under test, built fresh per test: every one this machine can run (the NPU through
the pyxrt emulation, in three operand types)."""

from __future__ import annotations

import pytest
from backend_cases import NPU_DTYPES
from pyxrt_emulation import Emulator, write_kernel_dir

from onebit.backends import BackendUnavailableError, make_backend
from onebit.backends.npu import NpuBackend


@pytest.fixture
def make(tmp_path):
    """`make(id, shapes)`: a fresh backend by id; the NPU ones get kernels for `shapes`."""

    def build(backend_id: str, shapes=()):
        if backend_id in NPU_DTYPES:
            folder = write_kernel_dir(tmp_path / backend_id, shapes, M=16,
                                      dtype=NPU_DTYPES[backend_id])
            return NpuBackend(str(folder), pyxrt=Emulator().module)
        name, _, kernel = backend_id.partition("-")
        try:
            if name == "host":
                return make_backend("host", kernel=kernel)
            return make_backend(name)
        except BackendUnavailableError as error:
            pytest.skip(str(error))

    return build
