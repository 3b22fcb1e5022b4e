"""Which accelerator a device test can use, and if none, the first reason why not.

The probe runs cheapest check first and stops at the first failure (docs/device.md), so a
skipped device test says exactly what is missing on this machine. pyxrt is imported here and
only here, and only after the cheaper checks pass.
"""

from __future__ import annotations

import glob
import importlib
import os
import sys
from dataclasses import dataclass
from functools import cache

XRT_PYTHON = "/opt/xilinx/xrt/python"
NPU_NAMES = ("npu", "ryzen ai", "xdna", "phoenix", "strix", "krackan", "hawk")
KERNEL_DIR_ENV = "ONEBIT_KERNEL_DIR"
# auto: the NPU if the probe passes; npu: the same, by name; host: the NumPy reference forward
# on a fabricated model, so the device tests themselves can be run (and trusted) anywhere.
BACKENDS = ("auto", "npu", "host")


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    reason: str  # what is missing (or what was found)
    step: int  # 1..6, the check that failed; 0 when all passed


def _fail(step: int, reason: str) -> ProbeResult:
    return ProbeResult(False, reason, step)


def probe_npu(
    *,
    dev_glob: str = "/dev/accel/accel*",
    driver: str = "/sys/module/amdxdna",
    kernel_dir: str | None = None,
    import_module=importlib.import_module,
) -> ProbeResult:
    """The NPU probe of docs/device.md, steps 1..6."""
    nodes = sorted(glob.glob(dev_glob))
    if not nodes:
        return _fail(1, f"no NPU device node: {dev_glob} matches nothing")
    if not os.path.exists(driver):
        return _fail(2, f"the amdxdna driver is not loaded ({driver} is missing)")
    if not os.access(nodes[0], os.R_OK | os.W_OK):
        return _fail(3, f"no read/write access to {nodes[0]} (join the 'render' group)")
    if os.path.isdir(XRT_PYTHON) and XRT_PYTHON not in sys.path:
        sys.path.append(XRT_PYTHON)
    try:
        pyxrt = import_module("pyxrt")
    except ImportError as error:
        return _fail(4, f"pyxrt does not import ({error}); source /opt/xilinx/xrt/setup.sh")
    try:
        count = pyxrt.enumerate_devices()
        name = pyxrt.device(0).get_info(pyxrt.xrt_info_device.name) if count else ""
    except Exception as error:  # pyxrt raises RuntimeError subclasses of its own
        return _fail(5, f"pyxrt cannot open device 0: {error}")
    if not count:
        return _fail(5, "pyxrt enumerates no devices")
    if not any(word in str(name).lower() for word in NPU_NAMES):
        return _fail(5, f"device 0 is {name!r}, not an NPU")
    folder = kernel_dir or os.environ.get(KERNEL_DIR_ENV)
    if not folder:
        return _fail(6, f"no kernel artefacts: set {KERNEL_DIR_ENV} to the xclbin folder")
    has_xclbin = bool(glob.glob(os.path.join(folder, "*.xclbin")))
    has_insts = any(glob.glob(os.path.join(folder, f"insts*.{ext}")) for ext in ("bin", "txt"))
    if not (has_xclbin and has_insts):
        return _fail(6, f"no *.xclbin with insts.bin/insts.txt in {folder}")
    return ProbeResult(True, f"NPU {name} at {nodes[0]}", 0)


@cache
def cached_probe() -> ProbeResult:
    return probe_npu()


def skip_reason(backend: str) -> str | None:
    """Why device tests cannot run on `backend` here, or None when they can."""
    if backend not in BACKENDS:
        return f"unknown --onebit-device {backend!r}; choose one of {BACKENDS}"
    if backend == "host":
        try:
            import onebit.models  # noqa: F401
        except ImportError as error:
            return f"--onebit-device=host: the NumPy forward does not import ({error})"
        return None
    result = cached_probe()
    if result.ok:
        return "the NPU probe passed, but onebit has no NPU forward yet"
    return f"no NPU: {result.reason}"
