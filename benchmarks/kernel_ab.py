"""The multi-row product, old (simple per-row numba kernel) against new (register-tiled),
alternated A B A B in one process.

    .venv/bin/python benchmarks/kernel_ab.py [--repeats 41] [--parallel]

For each weight (4096 x 1024, 1024 x 4096, 8192 x 1024, float32) and R = 1, 2, 4, 8, 16 rows it
prints the median [min..max] milliseconds of each kernel and the ratio of the median to that
kernel's one-row median. Single-threaded by default (the serial builds, as the forward runs
weights under 1M entries); --parallel times the builds that larger weights use. The box is
shared and its CPU comes in scheduler slices, so read medians and minima, not single runs.
Before timing, each R checks that new's rows are bit-identical to new's one-row products.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from onebit.models import kernels

SHAPES = [(4096, 1024), (1024, 4096), (8192, 1024)]
ROWS = [1, 2, 4, 8, 16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=41)
    parser.add_argument("--parallel", action="store_true")
    args = parser.parse_args()
    arms = {
        "old": kernels._numba_kernel(args.parallel),
        "new": kernels._tiled_kernel(args.parallel),
    }
    rng = np.random.default_rng(0)
    mode = "parallel" if args.parallel else "single-threaded"
    print(f"float32, {mode}, {args.repeats} alternated repeats; ms median [min..max] (x 1 row)")
    for shape in SHAPES:
        weight = rng.standard_normal(shape).astype(np.float32)
        print(f"\nweight {shape[0]} x {shape[1]}")
        print(f"{'R':>3}  {'old':<30} {'new':<30} new/old")
        one: dict[str, float] = {}
        for n_rows in ROWS:
            rows = rng.standard_normal((n_rows, shape[1])).astype(np.float32)
            outs = {arm: np.empty((n_rows, shape[0]), np.float32) for arm in arms}
            for arm, kernel in arms.items():
                kernel(weight, rows, outs[arm])  # compile and warm
            for r in range(n_rows):
                single = np.empty((1, shape[0]), np.float32)
                arms["new"](weight, rows[r : r + 1], single)
                assert np.array_equal(single[0], outs["new"][r]), "new kernel not row-invariant"
            times: dict[str, list[float]] = {arm: [] for arm in arms}
            for _ in range(args.repeats):
                for arm, kernel in arms.items():
                    start = time.perf_counter()
                    kernel(weight, rows, outs[arm])
                    times[arm].append((time.perf_counter() - start) * 1e3)
            cells = []
            for arm in arms:
                med = statistics.median(times[arm])
                if n_rows == 1:
                    one[arm] = med
                cell = f"{med:.3f} [{min(times[arm]):.3f}..{max(times[arm]):.3f}]"
                cells.append(f"{cell} ({med / one[arm]:.2f}x)")
            ratio = statistics.median(times["new"]) / statistics.median(times["old"])
            print(f"{n_rows:>3}  {cells[0]:<30} {cells[1]:<30} {ratio:.2f}")


if __name__ == "__main__":
    main()
