"""The NPU kernel manifest: which compiled GEMM design serves which weight shape.

`$ONEBIT_KERNEL_DIR/kernels.json` lists the designs (docs/device.md):

    {"kernels": [{"xclbin": "gemm_16x64x128.xclbin", "insts": "insts_16x64x128.bin",
                  "kernel": "MLIR_AIE", "op": "gemm", "M": 16, "K": 64, "N": 128,
                  "tile": [16, 64, 64], "dtype": {"a": "bf16", "b": "bf16", "c": "f32"}}]}

A design computes `C[M, N] = A[M, K] @ W[N, K]^T` (row-major A and W, `b_col_maj`), for
exactly its shape: M rows, K inputs, N outputs, each a multiple of the tile (m, k, n). A weight
`[out, in]` uses the design whose K and N are `in` and `out` rounded up to its tile; rows are
padded to M, inputs and outputs with zeros.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from onebit.backends.errors import BackendError

MANIFEST = "kernels.json"
OPS = ("gemm",)
# a, b: the operands' element types; c: the result's. Integer designs take activations
# quantised per row (and weights per output row), and accumulate exactly in int32.
DTYPES = {("f32", "f32", "f32"), ("bf16", "bf16", "f32"), ("i8", "i8", "i32")}


class ManifestError(BackendError):
    """kernels.json is missing or malformed; the message names the file, kernel and field."""


@dataclass(frozen=True)
class KernelSpec:
    xclbin: Path
    insts: Path
    kernel: str | None  # None: the xclbin's first kernel
    M: int
    K: int
    N: int
    tile: tuple[int, int, int]
    dtype: tuple[str, str, str]  # (a, b, c)

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.M, self.K, self.N)

    def serves(self, out_features: int, in_features: int) -> bool:
        """True when this design is the one built for a weight `[out, in]`."""
        _, tk, tn = self.tile
        return _round_up(in_features, tk) == self.K and _round_up(out_features, tn) == self.N


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _field(entry: dict, name: str, where: str, kind: type):
    if name not in entry:
        raise ManifestError(f"{where}: missing field {name!r}")
    value = entry[name]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ManifestError(f"{where}: {name} must be a positive integer, got {value!r}")
    if kind is str and (not isinstance(value, str) or not value):
        raise ManifestError(f"{where}: {name} must be a non-empty string, got {value!r}")
    return value


def parse_kernel(entry: object, folder: Path, where: str) -> KernelSpec:
    """One manifest entry, checked: files present, shape a multiple of the tile, dtypes known."""
    if not isinstance(entry, dict):
        raise ManifestError(f"{where}: a kernel entry must be an object, got {entry!r}")
    op = entry.get("op", "gemm")
    if op not in OPS:
        raise ManifestError(f"{where}: op {op!r} is not one of {OPS}")
    files = {}
    for name in ("xclbin", "insts"):
        path = folder / _field(entry, name, where, str)
        if not path.is_file():
            raise ManifestError(f"{where}: {name} file {path} does not exist")
        files[name] = path
    M, K, N = (_field(entry, d, where, int) for d in ("M", "K", "N"))
    tile = entry.get("tile", [M, K, N])
    if (not isinstance(tile, list) or len(tile) != 3
            or not all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in tile)):
        raise ManifestError(
            f"{where}: tile must be three positive integers [m, k, n], got {tile!r}"
        )
    for dim, size, t in zip("MKN", (M, K, N), tile, strict=True):
        if size % t:
            raise ManifestError(f"{where}: {dim}={size} is not a multiple of its tile {t}")
    dtype = entry.get("dtype", {"a": "f32", "b": "f32", "c": "f32"})
    types = tuple(dtype.get(x) for x in "abc") if isinstance(dtype, dict) else None
    if types not in DTYPES:
        raise ManifestError(f"{where}: dtype {dtype!r} is not one of {sorted(DTYPES)} (a, b, c)")
    kernel = entry.get("kernel")
    if kernel is not None and (not isinstance(kernel, str) or not kernel):
        raise ManifestError(f"{where}: kernel must be a name, got {kernel!r}")
    return KernelSpec(files["xclbin"], files["insts"], kernel, M, K, N, tuple(tile), types)


def load_manifest(folder: str | Path) -> list[KernelSpec]:
    """The designs listed in `folder`/kernels.json."""
    folder = Path(folder)
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"no kernel manifest: {path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ManifestError(f"{path}: not a readable JSON manifest ({error})") from None
    entries = data.get("kernels") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ManifestError(f"{path}: needs a non-empty list under 'kernels'")
    return [parse_kernel(e, folder, f"{path} kernel {i}") for i, e in enumerate(entries)]


def kernel_for(specs: list[KernelSpec], out_features: int, in_features: int) -> KernelSpec:
    """The design built for a weight `[out, in]`, or ManifestError listing what there is."""
    for spec in specs:
        if spec.serves(out_features, in_features):
            return spec
    have = ", ".join(f"{s.M}x{s.K}x{s.N}" for s in specs)
    raise ManifestError(
        f"no NPU kernel for a weight [{out_features}, {in_features}] (out, in); the manifest "
        f"has M x K x N: {have}"
    )
