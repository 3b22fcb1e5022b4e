"""Choosing a backend at load: `onebit.load_model(path, backend=...)`, with bad choices named,
and the forward unchanged by the choice (the same tokens on host, torch and an emulated NPU)."""

from __future__ import annotations

import numpy as np
import pytest
from pyxrt_emulation import Emulator, write_kernel_dir

import onebit
from onebit.backends import BackendError, BackendUnavailableError
from onebit.backends.npu import NpuBackend
from onebit.models import fabricate_model
from pytest_onebit.device.probe import matrix_shapes


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return fabricate_model(tmp_path_factory.mktemp("select"), "qwen3_5")


def test_unknown_backend_and_missing_runtimes_are_named(model_dir, monkeypatch):
    """A name that is no backend lists the choices; a backend whose runtime is missing says
    what is missing; the NPU without $ONEBIT_KERNEL_DIR names the variable."""
    with pytest.raises(BackendError, match=r"backend must be one of \('host', 'torch', 'cuda', "
                                           r"'npu'\) or a Backend, got 'tpu'"):
        onebit.load_model(model_dir, backend="tpu")
    with pytest.raises(BackendError, match="host backend: kernel must be one of"):
        onebit.load_model(model_dir, kernel="cuda")
    monkeypatch.delenv("ONEBIT_KERNEL_DIR", raising=False)
    with pytest.raises(BackendError, match="the npu backend needs ONEBIT_KERNEL_DIR"):
        onebit.load_model(model_dir, backend="npu")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        with pytest.raises(BackendUnavailableError, match="the cuda backend cannot run here"):
            onebit.load_model(model_dir, backend="cuda")


def test_the_same_greedy_text_on_every_backend(model_dir, tmp_path):
    """Plain decode of 16 tokens gives the same tokens on host, CPU torch and the emulated NPU
    (float32 designs): the seam changes where products run, not what the forward does."""
    pytest.importorskip("torch")
    kernels = write_kernel_dir(tmp_path, matrix_shapes(model_dir))
    npu = NpuBackend(str(kernels), pyxrt=Emulator().module)
    texts = {}
    for name, backend in (("host", "host"), ("torch", "torch"), ("npu", npu)):
        model = onebit.load_model(model_dir, backend=backend)
        texts[name] = onebit.greedy(model, [5, 4, 3, 2], max_tokens=16).tokens
        assert model.backend.prepares == model.backend.prepared_weights > 0
    assert texts["torch"] == texts["host"] == texts["npu"]
    assert len(set(np.asarray(texts["host"]).tolist())) > 1  # not a degenerate reply


def test_a_backend_serves_one_model(model_dir):
    """Prepared weights are kept by name, so a backend object given to a second model is
    refused (it would hand the second model the first one's weights)."""
    from onebit.backends import make_backend

    backend = make_backend("host")
    first = onebit.load_model(model_dir, backend=backend)
    with pytest.raises(BackendError, match="already serves another model; make one per model"):
        onebit.load_model(model_dir, backend=backend)
    assert first.backend is backend
