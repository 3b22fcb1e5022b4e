"""An emulation of pyxrt's object model, for the NPU backend's tests (no NPU here).

It mirrors the calls onebit makes (device, xclbin, hw_context, kernel, bo with write / sync /
read / map, run.wait) and computes each run on the host, so a product comes back with values.
Along the way it checks the choreography a real NPU would punish: sync directions (no run on
buffers written but not synced to the device, no read of a result not synced back), argument
group ids, buffer flags and sizes, the opcode and the instruction word count. Violations raise
`ChoreographyError`. It proves the sequence of calls, not the hardware.

An emulated `.xclbin` is a JSON file naming its kernel and its design: M, K, N, the dtypes and
the instruction stream's word count (`write_design` writes one).
"""

from __future__ import annotations

import enum
import itertools
import json
import types
import uuid as uuidlib
from pathlib import Path

import numpy as np

ITEMSIZE = {"f32": 4, "bf16": 2, "i8": 1, "i32": 4}
GROUP_BASE = 100  # group_id(i) is GROUP_BASE + i, so a raw argument index is caught


class ChoreographyError(AssertionError):
    """The backend called pyxrt in an order or with arguments the hardware would reject."""


class xclBOSyncDirection(enum.Enum):  # noqa: N801 - pyxrt's spelling
    XCL_BO_SYNC_BO_TO_DEVICE = 0
    XCL_BO_SYNC_BO_FROM_DEVICE = 1


class ert_cmd_state(enum.Enum):  # noqa: N801
    ERT_CMD_STATE_COMPLETED = 4
    ERT_CMD_STATE_ERROR = 5
    ERT_CMD_STATE_TIMEOUT = 10


class xrt_info_device(enum.Enum):  # noqa: N801
    name = 1


class Emulator:
    """One emulated machine: what was opened and run, for the tests to inspect."""

    def __init__(self, device_name: str = "NPU Strix (emulated)", fail_state=None) -> None:
        self.device_name = device_name
        self.fail_state = fail_state  # a run ends in this state instead of COMPLETED
        self.opens = 0
        self.contexts = 0
        self.runs: list[dict] = []
        self.buffers: list[Bo] = []
        self.module = self._module()

    def _module(self) -> types.ModuleType:
        emu = self
        m = types.ModuleType("pyxrt")
        m.xclBOSyncDirection, m.ert_cmd_state = xclBOSyncDirection, ert_cmd_state
        m.xrt_info_device = xrt_info_device
        m.enumerate_devices = lambda: 1

        def device(index):
            if index != 0:
                raise RuntimeError(f"no device {index}")
            emu.opens += 1
            return Device(emu)

        def bo(dev, nbytes, flags, group):
            buffer = Bo(emu, dev, nbytes, flags, group)
            emu.buffers.append(buffer)
            return buffer

        bo.cacheable, bo.host_only = "cacheable", "host_only"
        m.device, m.xclbin, m.bo = device, Xclbin, bo
        m.hw_context = lambda dev, uuid: HwContext(emu, dev, uuid)
        m.kernel = lambda ctx, name: Kernel(emu, ctx, name)
        return m


class Device:
    def __init__(self, emu: Emulator) -> None:
        self.emu, self.registered = emu, {}

    def register_xclbin(self, xb: Xclbin) -> None:
        self.registered[xb.get_uuid()] = xb

    def get_info(self, key):
        if key is not xrt_info_device.name:
            raise ChoreographyError(f"get_info({key!r}) is not emulated")
        return self.emu.device_name


class Xclbin:
    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.design = json.loads(self.path.read_text())
        self._uuid = self.design["uuid"]

    def get_uuid(self) -> str:
        return self._uuid

    def get_kernels(self):
        return [types.SimpleNamespace(get_name=lambda: self.design["kernel"])]


class HwContext:
    def __init__(self, emu: Emulator, dev: Device, uuid: str) -> None:
        if uuid not in dev.registered:
            raise ChoreographyError(f"hw_context for uuid {uuid} before register_xclbin")
        emu.contexts += 1
        self.device, self.xclbin = dev, dev.registered[uuid]


class Bo:
    """A buffer with a host copy and a device copy; `sync` moves bytes between them."""

    def __init__(self, emu, dev, nbytes, flags, group) -> None:
        if not isinstance(dev, Device) or nbytes <= 0:
            raise ChoreographyError(f"bo({dev!r}, {nbytes}) needs a device and a positive size")
        self.emu, self.flags, self.group, self.nbytes = emu, flags, group, int(nbytes)
        self.host, self.device = bytearray(nbytes), bytearray(nbytes)
        self.host_newer = self.device_newer = False
        self.syncs: list[xclBOSyncDirection] = []

    def write(self, data, offset: int) -> None:
        data = bytes(data)
        if offset < 0 or offset + len(data) > self.nbytes:
            raise ChoreographyError(f"write of {len(data)} bytes at {offset} into {self.nbytes}")
        self.host[offset : offset + len(data)] = data
        self.host_newer = True

    def map(self) -> memoryview:
        self.host_newer = True  # whoever maps may write
        return memoryview(self.host)

    def sync(self, direction) -> None:
        self.syncs.append(direction)
        if direction is xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE:
            self.device[:], self.host_newer = self.host, False
        elif direction is xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE:
            self.host[:], self.device_newer = self.device, False
        else:
            raise ChoreographyError(f"sync({direction!r}): not an xclBOSyncDirection")

    def read(self, size: int, offset: int) -> np.ndarray:
        if self.device_newer:
            raise ChoreographyError("read of a result not synced back (XCL_BO_SYNC_BO_FROM_DEVICE)")
        if offset < 0 or offset + size > self.nbytes:
            raise ChoreographyError(f"read of {size} bytes at {offset} from {self.nbytes}")
        return np.frombuffer(bytes(self.host[offset : offset + size]), dtype=np.int8)


def _values(raw: bytes, dtype: str, shape) -> np.ndarray:
    if dtype == "bf16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64).reshape(shape)
    storage = {"f32": "<f4", "i8": "i1", "i32": "<i4"}[dtype]
    return np.frombuffer(raw, dtype=storage).astype(np.float64).reshape(shape)


class Kernel:
    def __init__(self, emu: Emulator, ctx: HwContext, name: str) -> None:
        if name != ctx.xclbin.design["kernel"]:
            raise ChoreographyError(f"kernel {name!r} is not in {ctx.xclbin.path.name}")
        self.emu, self.ctx, self.name = emu, ctx, name

    def group_id(self, index: int) -> int:
        return GROUP_BASE + index

    def _check_bo(self, bo, index: int, flags: str, nbytes: int, what: str) -> None:
        if not isinstance(bo, Bo):
            raise ChoreographyError(f"{what}: argument {index} is {bo!r}, not a bo")
        if bo.group != self.group_id(index):
            raise ChoreographyError(f"{what}: bo in group {bo.group}, wants group_id({index})")
        if bo.flags != flags:
            raise ChoreographyError(f"{what}: bo is {bo.flags}, wants {flags}")
        if bo.nbytes != nbytes:
            raise ChoreographyError(
                f"{what}: bo holds {bo.nbytes} bytes, the design needs {nbytes}"
            )
        if bo.host_newer:
            raise ChoreographyError(f"{what}: written but not synced to the device")

    def __call__(self, opcode, insts, n_words, a, b, c):
        d = self.ctx.xclbin.design
        M, K, N, (ta, tb, tc) = d["M"], d["K"], d["N"], d["dtype"]
        if opcode != 3:
            raise ChoreographyError(f"opcode {opcode}, the mlir-aie sequence runs with 3")
        self._check_bo(insts, 1, "cacheable", d["insts_words"] * 4, "instructions")
        if n_words != d["insts_words"]:
            raise ChoreographyError(f"run got {n_words} instruction words; the stream has "
                                    f"{d['insts_words']} (a byte count?)")
        self._check_bo(a, 3, "host_only", M * K * ITEMSIZE[ta], "A")
        self._check_bo(b, 4, "host_only", N * K * ITEMSIZE[tb], "B")
        self._check_bo(c, 5, "host_only", M * N * ITEMSIZE[tc], "C")
        A = _values(bytes(a.device), ta, (M, K))
        W = _values(bytes(b.device), tb, (N, K))
        C = np.stack([W @ A[r] for r in range(M)])  # each row alone, in float64
        out = C.astype(np.int32 if tc == "i32" else np.float32)
        c.device[:], c.device_newer = out.astype("<" + out.dtype.str[1:]).tobytes(), True
        self.emu.runs.append({"design": d, "n_words": n_words, "opcode": opcode})
        state = self.emu.fail_state or ert_cmd_state.ERT_CMD_STATE_COMPLETED
        return types.SimpleNamespace(wait=lambda: state)


_uuids = itertools.count()


def write_design(folder: Path, M: int, K: int, N: int, *, tile=None, dtype=("f32", "f32", "f32"),
                 insts_words: int = 24, text: bool = False, kernel: str = "MLIR_AIE") -> dict:
    """Write an emulated xclbin and an instruction file for one design; its manifest entry."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{M}x{K}x{N}_{'_'.join(dtype)}"
    design = {"kernel": kernel, "M": M, "K": K, "N": N, "dtype": list(dtype),
              "insts_words": insts_words, "uuid": str(uuidlib.UUID(int=next(_uuids) + 1))}
    (folder / f"gemm_{stem}.xclbin").write_text(json.dumps(design))
    words = np.arange(0x1000, 0x1000 + insts_words, dtype="<u4")
    if text:
        insts = f"insts_{stem}.txt"
        (folder / insts).write_text("\n".join(f"{w:08x}" for w in words) + "\n")
    else:
        insts = f"insts_{stem}.bin"
        (folder / insts).write_bytes(words.tobytes())
    return {"xclbin": f"gemm_{stem}.xclbin", "insts": insts, "kernel": kernel, "op": "gemm",
            "M": M, "K": K, "N": N, "tile": list(tile or (M, K, N)),
            "dtype": dict(zip("abc", dtype, strict=True))}


def write_kernel_dir(folder: Path, shapes, *, M: int = 16, tile_kn: int = 32,
                     dtype=("f32", "f32", "f32")) -> Path:
    """A kernel folder (designs + kernels.json) serving weights of `shapes` `[(out, in)]`:
    K and N rounded up to `tile_kn`, so the backend's padding is exercised."""
    up = lambda n: -(-n // tile_kn) * tile_kn  # noqa: E731
    entries, seen = [], set()
    for out_features, in_features in shapes:
        key = (up(in_features), up(out_features))
        if key not in seen:
            seen.add(key)
            entries.append(write_design(folder, M, key[0], key[1], dtype=dtype,
                                        tile=(M, tile_kn, tile_kn)))
    (folder / "kernels.json").write_text(json.dumps({"kernels": entries}, indent=1))
    return folder
