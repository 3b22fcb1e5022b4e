"""The device probe checks cheapest first and says what is missing."""

import types

from pytest_onebit.device.probe import probe_npu, skip_reason


def no_pyxrt(name):
    raise ImportError(f"No module named {name!r}")


def test_probe_stops_at_the_missing_node(tmp_path):
    """No /dev/accel node: step 1 fails, and nothing further is tried (pyxrt never imported)."""
    result = probe_npu(dev_glob=str(tmp_path / "accel*"), import_module=no_pyxrt)
    assert (result.ok, result.step) == (False, 1)
    assert "matches nothing" in result.reason


def test_probe_order_driver_then_access_then_pyxrt(tmp_path):
    """With a node present the probe next wants the driver, then access, then pyxrt."""
    node = tmp_path / "accel0"
    node.write_text("")
    driver = tmp_path / "amdxdna"
    result = probe_npu(dev_glob=str(tmp_path / "accel*"), driver=str(driver))
    assert result.step == 2 and "amdxdna driver" in result.reason
    driver.mkdir()
    node.chmod(0o000)
    # root may read anything; only check the access step where it can fail
    result = probe_npu(dev_glob=str(tmp_path / "accel*"), driver=str(driver),
                       import_module=no_pyxrt)
    assert result.step in (3, 4)
    node.chmod(0o600)
    result = probe_npu(dev_glob=str(tmp_path / "accel*"), driver=str(driver),
                       import_module=no_pyxrt)
    assert result.step == 4 and "pyxrt does not import" in result.reason


def test_probe_rejects_a_non_npu_device_and_missing_kernels(tmp_path):
    """A pyxrt that sees a non-NPU device fails step 5; an NPU without kernel artefacts fails
    step 6; with an xclbin and instructions the probe passes."""
    node = tmp_path / "accel0"
    node.write_text("")
    (tmp_path / "amdxdna").mkdir()

    def fake_pyxrt(device_name):
        device = types.SimpleNamespace(get_info=lambda key: device_name)
        return types.SimpleNamespace(
            enumerate_devices=lambda: 1, device=lambda i: device,
            xrt_info_device=types.SimpleNamespace(name="name"),
        )

    common = {"dev_glob": str(tmp_path / "accel*"), "driver": str(tmp_path / "amdxdna")}
    result = probe_npu(**common, import_module=lambda n: fake_pyxrt("Some GPU"))
    assert result.step == 5 and "not an NPU" in result.reason
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    result = probe_npu(**common, kernel_dir=str(kernels),
                       import_module=lambda n: fake_pyxrt("NPU Strix"))
    assert result.step == 6
    (kernels / "gemm.xclbin").write_bytes(b"")
    (kernels / "insts.bin").write_bytes(b"")
    result = probe_npu(**common, kernel_dir=str(kernels),
                       import_module=lambda n: fake_pyxrt("NPU Strix"))
    assert result.ok and "NPU Strix" in result.reason


def test_skip_reason_names_backend_problems():
    """An unknown backend is named; here, auto falls to the probe's reason."""
    assert "unknown --onebit-device" in skip_reason("tpu")
    assert skip_reason("auto").startswith("no NPU: ")
