"""Which backend the device tests get, and the reason they skip where it cannot run."""

from __future__ import annotations

import sys

import pytest

from pytest_onebit.device.probe import missing_npu_kernels, resolve


def test_torch_missing_is_the_skip_reason(monkeypatch):
    """Without torch, --onebit-device=torch and cuda skip saying torch does not import."""
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    for backend in ("torch", "cuda"):
        name, reason = resolve(backend)
        assert name is None and reason.startswith("torch does not import")
        assert "pip install 'onebit[peer]'" in reason


def test_auto_names_both_accelerators_it_looked_for():
    """auto on a machine with neither an NPU nor CUDA skips naming both probes' reasons;
    host and torch always resolve where their parts import."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    name, reason = resolve("auto")
    assert name is None
    assert reason.startswith("no NPU: no NPU device node") and "; no CUDA: " in reason
    assert resolve("cuda") == (None, f"no CUDA: torch {torch.__version__} is a build without CUDA")
    assert resolve("torch") == ("torch", None) and resolve("host") == ("host", None)


def test_missing_npu_kernels_name_the_shape(tmp_path):
    """Probe step 6 for a model: kernels that do not serve one of its weights name it."""
    from onebit.models import fabricate_model

    model = fabricate_model(tmp_path / "m", "qwen3")
    assert "no kernel manifest" in missing_npu_kernels(model, str(tmp_path))
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "backends"))
    from pyxrt_emulation import write_kernel_dir

    write_kernel_dir(tmp_path / "k", [(256, 256)])
    reason = missing_npu_kernels(model, str(tmp_path / "k"))
    assert reason.startswith("no kernel artefacts for the model: no NPU kernel for a weight")


@pytest.mark.slow  # a pytest subprocess that imports torch, 6-9 s
def test_device_tests_skip_with_the_backends_reason(pytester):
    """In a fresh project, a device test on --onebit-device=cuda without CUDA skips with the
    reason; on torch it runs the fabricated model."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.device
        def test_on_device(onebit_device_model, onebit_device):
            model = onebit_device_model("qwen3")
            assert model.backend.name == onebit_device
            assert model.step(1, 0).shape == (model.vocab_size,)
        """
    )
    rig = ("-p", "pytest_onebit.device")
    cuda = pytester.runpytest_subprocess(*rig, "-m", "device", "--onebit-device=cuda", "-rs")
    cuda.assert_outcomes(skipped=1)
    cuda.stdout.fnmatch_lines(["*SKIPPED*no CUDA: torch * is a build without CUDA*"])
    pytester.runpytest_subprocess(*rig, "-m", "device", "--onebit-device=torch").assert_outcomes(
        passed=1)
