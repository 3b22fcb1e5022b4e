"""The pyxrt choreography of docs/device.md: one device per process, one hardware context per
design, the instruction stream in a buffer once, weights in device buffers once.

`pyxrt` is passed in as a module object. `import_pyxrt()` finds the real one (XRT ships it
outside PyPI); the tests pass an emulation of its object model instead, which checks this
sequence (tests/backends/pyxrt_emulation.py).
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

import numpy as np

from onebit.backends.errors import BackendUnavailableError, DeviceRunError
from onebit.backends.npu.manifest import KernelSpec
from onebit.backends.npu.packing import ITEMSIZE, STORAGE, read_instructions

XRT_PYTHON = "/opt/xilinx/xrt/python"
OPCODE = 3  # the mlir-aie runtime sequence's opcode for "run with instructions"
INSTS_GROUP, FIRST_ARG_GROUP = 1, 3  # kernel argument groups: instructions, then A, B, C

# (id(pyxrt), index) -> (pyxrt, device): opened once; the module is held so its id stays its own
_devices: dict[tuple[int, int], tuple[object, object]] = {}


def import_pyxrt():
    """The real pyxrt (adding XRT's python folder to the path when it exists)."""
    if os.path.isdir(XRT_PYTHON) and XRT_PYTHON not in sys.path:
        sys.path.append(XRT_PYTHON)
    try:
        return importlib.import_module("pyxrt")
    except ImportError as error:
        raise BackendUnavailableError(
            f"the npu backend needs pyxrt ({error}); source /opt/xilinx/xrt/setup.sh"
        ) from None


def open_device(pyxrt, index: int = 0):
    """Device `index`, opened once per process (reopening can fail)."""
    key = (id(pyxrt), index)
    if key not in _devices:
        _devices[key] = (pyxrt, pyxrt.device(index))
    return _devices[key][1]


@dataclass
class Design:
    """A loaded design: its context, kernel, instruction buffer and reusable A / C buffers."""

    spec: KernelSpec
    context: object
    kernel: object
    insts: object
    n_words: int
    a: object
    c: object


class XrtRuntime:
    """Runs GEMM designs through `pyxrt`; each design is loaded on first use and kept."""

    def __init__(self, pyxrt, device_index: int = 0) -> None:
        self.pyxrt = pyxrt
        self.device = open_device(pyxrt, device_index)
        self._designs: dict[KernelSpec, Design] = {}

    def _sync(self, bo, direction: str) -> None:
        bo.sync(getattr(self.pyxrt.xclBOSyncDirection, direction))

    def design(self, spec: KernelSpec) -> Design:
        if spec in self._designs:
            return self._designs[spec]
        x, dev = self.pyxrt, self.device
        xclbin = x.xclbin(str(spec.xclbin))
        dev.register_xclbin(xclbin)
        context = x.hw_context(dev, xclbin.get_uuid())
        name = spec.kernel or xclbin.get_kernels()[0].get_name()
        kernel = x.kernel(context, name)
        words = read_instructions(spec.insts)
        insts = x.bo(dev, words.nbytes, x.bo.cacheable, kernel.group_id(INSTS_GROUP))
        insts.write(words.tobytes(), 0)
        self._sync(insts, "XCL_BO_SYNC_BO_TO_DEVICE")
        a_type, _, c_type = spec.dtype
        a = self._buffer(kernel, spec.M * spec.K * ITEMSIZE[a_type], 0)
        c = self._buffer(kernel, spec.M * spec.N * ITEMSIZE[c_type], 2)
        design = Design(spec, context, kernel, insts, int(words.size), a, c)
        self._designs[spec] = design
        return design

    def _buffer(self, kernel, nbytes: int, arg: int):
        x = self.pyxrt
        return x.bo(self.device, nbytes, x.bo.host_only, kernel.group_id(FIRST_ARG_GROUP + arg))

    def upload_weight(self, spec: KernelSpec, packed: np.ndarray):
        """`packed` (`[N, K]` in the design's b type) in a device buffer, synced once."""
        design = self.design(spec)
        bo = self._buffer(design.kernel, packed.nbytes, 1)
        bo.write(packed.tobytes(), 0)
        self._sync(bo, "XCL_BO_SYNC_BO_TO_DEVICE")
        return bo

    def gemm(self, spec: KernelSpec, packed_rows: np.ndarray, weight_bo) -> np.ndarray:
        """`C[M, N]` of the design for `packed_rows` (`[M, K]`) and a resident weight."""
        design = self.design(spec)
        design.a.write(packed_rows.tobytes(), 0)
        self._sync(design.a, "XCL_BO_SYNC_BO_TO_DEVICE")
        run = design.kernel(OPCODE, design.insts, design.n_words, design.a, weight_bo, design.c)
        state = run.wait()
        if state != self.pyxrt.ert_cmd_state.ERT_CMD_STATE_COMPLETED:
            raise DeviceRunError(
                f"NPU kernel {spec.xclbin.name} ({spec.M}x{spec.K}x{spec.N}) ended in state "
                f"{state}, not ERT_CMD_STATE_COMPLETED"
            )
        self._sync(design.c, "XCL_BO_SYNC_BO_FROM_DEVICE")
        c_type = spec.dtype[2]
        raw = design.c.read(spec.M * spec.N * ITEMSIZE[c_type], 0)
        return np.frombuffer(bytes(raw), dtype=STORAGE[c_type]).reshape(spec.M, spec.N)
