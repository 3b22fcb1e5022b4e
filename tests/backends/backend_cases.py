"""The backends tests/backends runs, by id: each one this machine can run, the NPU through the
pyxrt emulation in its three operand types (the `make` fixture builds them)."""

NPU_DTYPES = {"npu-f32": ("f32", "f32", "f32"), "npu-bf16": ("bf16", "bf16", "f32"),
              "npu-i8": ("i8", "i8", "i32")}
BACKEND_IDS = ["host-numba", "host-numpy", "torch", "torch-float64", "cuda", *NPU_DTYPES]
