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
# auto: the NPU if its probe passes, else CUDA if torch sees a GPU (never a CPU backend);
# npu, cuda: that accelerator, by name; torch: CPU torch (a second implementation of the
# products, run in CI); host: the NumPy reference forward, so the device tests themselves can
# be run (and trusted) anywhere.
BACKENDS = ("auto", "host", "torch", "cuda", "npu")


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


def torch_missing(cuda: bool) -> str | None:
    """Why the torch (or, with `cuda`, the CUDA) backend cannot run here, or None."""
    try:
        import torch
    except ImportError as error:
        return f"torch does not import ({error}); pip install 'onebit[peer]'"
    if not cuda:
        return None
    from onebit.backends.torch_backend import cuda_missing

    missing = cuda_missing(torch)
    return None if missing is None else f"no CUDA: {missing}"


def resolve(backend: str) -> tuple[str | None, str | None]:
    """`(backend to use, None)` or `(None, why none can be used here)`; auto picks the NPU,
    then CUDA."""
    if backend not in BACKENDS:
        return None, f"unknown --onebit-device {backend!r}; choose one of {BACKENDS}"
    if backend == "host":
        try:
            import onebit.models  # noqa: F401
        except ImportError as error:
            return None, f"--onebit-device=host: the NumPy forward does not import ({error})"
        return "host", None
    if backend in ("torch", "cuda"):
        reason = torch_missing(cuda=backend == "cuda")
        return (backend, None) if reason is None else (None, reason)
    result = cached_probe()
    if result.ok:
        return "npu", None
    if backend == "npu":
        return None, f"no NPU: {result.reason}"
    cuda = torch_missing(cuda=True)
    if cuda is None:
        return "cuda", None
    return None, f"no NPU: {result.reason}; {cuda}"


def skip_reason(backend: str) -> str | None:
    """Why device tests cannot run on `backend` here, or None when they can."""
    return resolve(backend)[1]


# -- building the device forward (called by the plugin's fixtures) ---------------------------

FAMILIES = ("qwen3", "qwen3_5")


def matrix_shapes(model_dir) -> list[tuple[int, int]]:
    """The `[out, in]` shapes of every product the model in `model_dir` runs (the lm_head
    included: it has the embedding's shape)."""
    from onebit.models.config import ModelConfig
    from onebit.models.weights import CONFIG_FILE, expected_shapes

    config = ModelConfig.from_file(os.path.join(model_dir, CONFIG_FILE))
    return sorted({s for s in expected_shapes(config).values() if len(s) == 2})


def missing_npu_kernels(model_dir, kernel_dir: str) -> str | None:
    """Probe step 6 for one model: why the kernels in `kernel_dir` cannot serve it, or None."""
    from onebit.backends import BackendError
    from onebit.backends.npu.manifest import kernel_for, load_manifest

    try:
        specs = load_manifest(kernel_dir)
        for out_features, in_features in matrix_shapes(model_dir):
            kernel_for(specs, out_features, in_features)
    except BackendError as error:
        return f"no kernel artefacts for the model: {error}"
    return None


def make_backend(name: str, model_dir, *, resident: bool = True, emulation=None):
    """The backend `name` for the model in `model_dir`. For "npu", `emulation` (an object with
    `pyxrt` and `kernel_dir(shapes)`) replaces the real pyxrt and $ONEBIT_KERNEL_DIR."""
    from onebit.backends import make_backend as build

    if name != "npu":
        return build(name, resident=resident)
    from onebit.backends.npu import NpuBackend

    if emulation is not None:
        folder = str(emulation.kernel_dir(matrix_shapes(model_dir)))
        return NpuBackend(folder, pyxrt=emulation.pyxrt, resident=resident)
    folder = os.environ.get(KERNEL_DIR_ENV, "")
    missing = missing_npu_kernels(model_dir, folder)
    if missing is not None:
        import pytest

        pytest.skip(f"no NPU: {missing}")
    return NpuBackend(folder, resident=resident)
