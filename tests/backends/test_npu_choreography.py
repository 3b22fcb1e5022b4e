"""The NPU backend's pyxrt calls, against the emulation of pyxrt's objects (pyxrt_emulation):
the order docs/device.md gives, the argument groups, flags, sizes, opcode and word count, the
syncs, and the run state. This proves the choreography, not the hardware."""

from __future__ import annotations

import numpy as np
import pytest
from pyxrt_emulation import (
    GROUP_BASE,
    ChoreographyError,
    Emulator,
    ert_cmd_state,
    write_design,
    write_kernel_dir,
)

from onebit.backends import DeviceRunError
from onebit.backends.npu import NpuBackend
from onebit.backends.npu import runtime as npu_runtime

TO, FROM = "XCL_BO_SYNC_BO_TO_DEVICE", "XCL_BO_SYNC_BO_FROM_DEVICE"


def backend_on(tmp_path, shapes, **emulator):
    emu = Emulator(**emulator)
    return emu, NpuBackend(str(write_kernel_dir(tmp_path, shapes, M=4)), pyxrt=emu.module)


def test_one_device_one_context_per_design_weights_uploaded_once(tmp_path):
    """Two weights of one shape share a design (one hw_context, one instruction buffer); each
    weight goes to its own buffer once, synced to the device once, however many products."""
    emu, backend = backend_on(tmp_path, [(8, 32), (40, 32)])
    rng = np.random.default_rng(0)
    weights = {"a": rng.standard_normal((8, 32)), "b": rng.standard_normal((8, 32)),
               "c": rng.standard_normal((40, 32))}
    rows = rng.standard_normal((3, 32)).astype(np.float32)
    for _ in range(5):
        for key in weights:
            backend.linear(key, lambda k: weights[k].astype(np.float32), rows)
    assert emu.opens == 1 and emu.contexts == 2 and len(emu.runs) == 15
    weight_bos = [bo for bo in emu.buffers if bo.group == GROUP_BASE + 4]
    assert len(weight_bos) == 3 and all(len(bo.syncs) == 1 for bo in weight_bos)
    assert all(bo.syncs[0].name == TO for bo in weight_bos)
    insts = [bo for bo in emu.buffers if bo.group == GROUP_BASE + 1]
    assert len(insts) == 2 and all(bo.flags == "cacheable" for bo in insts)


def test_each_run_syncs_a_in_and_c_out(tmp_path):
    """Per run: A written and synced to the device before it, C synced from the device after
    it, opcode 3 and the stream's word count (not its bytes)."""
    emu, backend = backend_on(tmp_path, [(8, 32)])
    weight = np.ones((8, 32), np.float32)
    backend.linear("w", lambda k: weight, np.ones((10, 32), np.float32))  # 3 chunks of M = 4
    assert len(emu.runs) == 3
    assert all(r["opcode"] == 3 and r["n_words"] == 24 for r in emu.runs)
    a = next(bo for bo in emu.buffers if bo.group == GROUP_BASE + 3)
    c = next(bo for bo in emu.buffers if bo.group == GROUP_BASE + 5)
    assert [s.name for s in a.syncs] == [TO] * 3 and [s.name for s in c.syncs] == [FROM] * 3
    assert a.nbytes == 4 * 32 * 4 and c.nbytes == 4 * 32 * 4  # M x K and M x N float32


def test_a_text_instruction_stream_passes_its_word_count(tmp_path):
    """insts.txt of 7 words: the run gets 7, as the emulated design requires."""
    entry = write_design(tmp_path, 4, 32, 32, insts_words=7, text=True)
    (tmp_path / "kernels.json").write_text(__import__("json").dumps({"kernels": [entry]}))
    emu = Emulator()
    backend = NpuBackend(str(tmp_path), pyxrt=emu.module)
    backend.linear("w", lambda k: np.eye(32, dtype=np.float32), np.ones((1, 32), np.float32))
    assert emu.runs[0]["n_words"] == 7


def test_a_run_that_does_not_complete_is_an_error_naming_the_state(tmp_path):
    """A run state other than COMPLETED raises DeviceRunError naming the design and state."""
    emu, backend = backend_on(tmp_path, [(8, 32)], fail_state=ert_cmd_state.ERT_CMD_STATE_TIMEOUT)
    with pytest.raises(DeviceRunError, match=r"4x32x32\) ended in state .*TIMEOUT"):
        backend.linear("w", lambda k: np.ones((8, 32), np.float32), np.ones((1, 32), np.float32))


class Forgetful(npu_runtime.XrtRuntime):
    """A runtime that forgets to sync A to the device: the emulation must catch it."""

    def _sync(self, bo, direction):
        if bo.group == GROUP_BASE + 3:
            return
        super()._sync(bo, direction)


class ByteCount(npu_runtime.XrtRuntime):
    """A runtime that passes the stream's byte count, the classic mistake."""

    def design(self, spec):
        if spec in self._designs:
            return self._designs[spec]
        design = super().design(spec)
        design.n_words *= 4
        return design


class NoReadback(npu_runtime.XrtRuntime):
    """A runtime that reads C without syncing it back."""

    def _sync(self, bo, direction):
        if direction == "XCL_BO_SYNC_BO_FROM_DEVICE":
            return
        super()._sync(bo, direction)


@pytest.mark.parametrize(
    ("runtime", "message"),
    [(Forgetful, "A: written but not synced"), (ByteCount, "96 instruction words.*byte count"),
     (NoReadback, "read of a result not synced back")],
)
def test_the_emulation_rejects_a_wrong_choreography(tmp_path, runtime, message):
    """The emulation is not a yes-man: a missing sync, a byte count for the word count, or a
    read before the sync back each fail, naming the mistake."""
    emu, backend = backend_on(tmp_path, [(8, 32)])
    backend.runtime = runtime(emu.module)
    with pytest.raises(ChoreographyError, match=message):
        backend.linear("w", lambda k: np.ones((8, 32), np.float32), np.ones((2, 32), np.float32))


def test_the_device_is_opened_once_per_process(tmp_path):
    """Two backends on the same pyxrt share the device: it is opened once."""
    emu = Emulator()
    folder = str(write_kernel_dir(tmp_path, [(8, 32)], M=4))
    first, second = NpuBackend(folder, pyxrt=emu.module), NpuBackend(folder, pyxrt=emu.module)
    assert first.runtime.device is second.runtime.device and emu.opens == 1
