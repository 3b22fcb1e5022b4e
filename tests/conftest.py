"""The project's own tests: the onebit plugin is loaded by its entry point (pip install -e);
the device rig (`pytest_onebit.device`: --onebit-device, the `device` marker and its fixtures)
is opt-in for users, and onebit's own suite opts in here."""

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from pytest_onebit.contract import profiles


def _share_the_cores_between_workers() -> None:
    """Under xdist, give each worker's numba its share of the cores (NUMBA_NUM_THREADS, read
    when numba launches its threads, which no test has done yet; the processes a test starts
    inherit it). Otherwise every worker launches a thread per core: two workers on two cores
    run four OpenMP threads, and each of the stack's parallel loops waits at its barrier for a
    thread the other worker has descheduled. Measured on two cores, a tiny model's base
    contract took 1 s alone and 20-46 s in the suite; a value the user set is kept."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "NUMBA_NUM_THREADS" not in os.environ:
        affinity = getattr(os, "sched_getaffinity", None)
        cores = len(affinity(0)) if affinity else os.cpu_count()
        os.environ["NUMBA_NUM_THREADS"] = str(max(1, (cores or 1) // workers))


_share_the_cores_between_workers()

# pytester: the plugin's own tests run it in fresh projects
pytest_plugins = ["pytester", "pytest_onebit.device"]

# The plugin registers the profiles lazily (in pytest_configure, once Hypothesis is in use);
# this conftest is imported before that, so it registers them itself.
profiles.register()
settings.load_profile("onebit")


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (README line 2): the cores and two workers more. A worker often waits: on
    another's compile of the same kernel (the kernel cache's machine-wide lock, 15-50 s a
    variant on an empty cache), or on a server or a subprocess it started. With a worker a core
    one core then idles; two more keep both busy. Measured on two cores, cold: 322 s with two
    workers, 298 s with four."""
    cores = os.cpu_count() or 1
    return cores + min(cores, 2)


def pytest_addoption(parser):
    parser.addoption(
        "--emulate-npu",
        action="store_true",
        help="run --onebit-device=npu against the pyxrt emulation of tests/backends (it proves "
        "the backend's choreography, not the hardware)",
    )


@pytest.fixture(scope="session")
def onebit_npu_emulation(request, tmp_path_factory):
    """With --emulate-npu: the pyxrt emulation and kernel folders written for each model's
    shapes; otherwise the plugin's default (the real pyxrt)."""
    if not request.config.getoption("emulate_npu"):
        return None
    sys.path.insert(0, str(Path(__file__).parent / "backends"))  # as its own tests import it
    from pyxrt_emulation import Emulator, write_kernel_dir

    class Emulation:
        pyxrt = Emulator().module

        @staticmethod
        def kernel_dir(shapes):
            return write_kernel_dir(tmp_path_factory.mktemp("npu-kernels"), shapes)

    return Emulation()
