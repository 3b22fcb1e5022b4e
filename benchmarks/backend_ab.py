"""The torch backend's two kernels, side by side (A B A B): batch invariance and cost.

    .venv/bin/python benchmarks/backend_ab.py [--backend torch|cuda] [--rounds 5]

For weights of a model's shapes, float32, and batches of 1, 8 and 16 rows:
- invariance: of rows 0..R-1 of each batch R = 1..16, how many differ (in any bit) from the
  same row computed alone, per kernel: "rows" (one mv per row, the backend's default) and
  "matmul" (one X @ W.T);
- cost: milliseconds per product, median [min .. max] over the rounds, the kernels
  alternating, and rows / matmul.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from onebit.backends.torch_backend import TorchBackend

SHAPES = [(1024, 1024), (3072, 1024), (1024, 3072), (8192, 1024)]


def spread(values: list[float], fmt: str = "{:.3f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


def differing_rows(backend: TorchBackend, rows: np.ndarray) -> int:
    alone = [backend.linear("w", None, rows[r : r + 1])[0] for r in range(len(rows))]
    bad = 0
    for n in range(1, len(rows) + 1):
        batch = backend.linear("w", None, rows[:n])
        bad += sum(not np.array_equal(batch[r], alone[r]) for r in range(n))
    return bad


def timed_ms(backend: TorchBackend, rows: np.ndarray, repeats: int) -> float:
    backend.linear("w", None, rows)  # warm
    if backend.device == "cuda":
        backend._torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        backend.linear("w", None, rows)  # returns to the host: synchronised
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="torch", choices=("torch", "cuda"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    device = "cuda" if args.backend == "cuda" else "cpu"
    rng = np.random.default_rng(0)
    print(f"{TorchBackend(device).describe()}; float32; A B A B over {args.rounds} rounds")
    print("| weight [out, in] | kernel | rows differing, R = 1..16 | ms R=1 | ms R=8 | ms R=16 |")
    print("|---|---|---|---|---|---|")
    for shape in SHAPES:
        weight = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        rows = rng.standard_normal((16, shape[1])).astype(np.float32)
        kernels = {k: TorchBackend(device, k) for k in ("rows", "matmul")}
        for backend in kernels.values():
            backend.linear("w", lambda key, w=weight: w, rows[:1])  # prepare (upload) once
        bad = {k: differing_rows(b, rows) for k, b in kernels.items()}
        times = {(k, r): [] for k in kernels for r in (1, 8, 16)}
        for _ in range(args.rounds):
            for r in (1, 8, 16):
                for k, backend in kernels.items():
                    times[k, r].append(timed_ms(backend, rows[:r], args.repeats))
        for k in kernels:
            cells = " | ".join(spread(times[k, r]) for r in (1, 8, 16))
            print(f"| {shape[0]} x {shape[1]} | {k} | {bad[k]} of 136 | {cells} |")
        ratio = [a / b for a, b in zip(times["rows", 8], times["matmul", 8], strict=True)]
        print(f"| | rows / matmul at R=8 | | | {spread(ratio, '{:.2f}')} | |")


if __name__ == "__main__":
    main()
