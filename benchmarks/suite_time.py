"""Wall time of the non-device test suite, serial and under pytest-xdist, alternated A B A B.

    .venv/bin/python benchmarks/suite_time.py [--rounds 2]

Target (issue 2): the whole non-device suite under 60 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ARMS = {"serial": [], "xdist -n 2": ["-n", "2"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    env = os.environ | {"CI": "true"}  # the CI profile: 2000 Hypothesis examples
    times: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for _ in range(args.rounds):
        for arm, extra in ARMS.items():
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pytest", "-m", "not device", "-q",
                            "-p", "no:cacheprovider", *extra], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            times[arm].append(time.perf_counter() - start)
    for arm, values in times.items():
        print(f"{arm:<12} median {statistics.median(values):6.1f} s  "
              f"[{min(values):.1f} .. {max(values):.1f}] over {len(values)} runs")
    ratio = [a / b for a, b in zip(times["serial"], times["xdist -n 2"], strict=True)]
    print(f"serial / xdist: {statistics.median(ratio):.2f} [{min(ratio):.2f} .. {max(ratio):.2f}]")


if __name__ == "__main__":
    main()
