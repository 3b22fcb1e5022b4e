"""Wall and CPU time of the README's two commands, each against its slower form, alternated
A B A B (the machine's load moves; CPU time, user + sys of the command and its children, moves
less).

    .venv/bin/python benchmarks/suite_time.py prove [--rounds 2]   # README line 1's prove
    .venv/bin/python benchmarks/suite_time.py tests [--rounds 2]   # README line 2

`prove`: `onebit prove` as the README runs it (each mutant's run forked from a warm pytest and
stopped at its first kill) against `onebit prove --stop never --no-fork` (a fresh
`python -m pytest` per mutant running the whole suite, as before). `tests`: README line 2 (the
suite on every core) against the same selection run serially.

Target (issue 19): on two cores, README line 1 (install included) within 3 minutes, README
line 2 within 4.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]


def readme_tests() -> list[str]:
    """README line 2's arguments after the interpreter (`-m pytest -m "not device" ...`)."""
    line = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[1]
    return shlex.split(line)[1:]


def serial(args: list[str]) -> list[str]:
    """The same selection without pytest-xdist's options."""
    out, skip = [], 0
    for arg in args:
        if skip:
            skip -= 1
        elif arg in ("-n", "--dist"):
            skip = 1
        else:
            out.append(arg)
    return out


README_TESTS = readme_tests()
ARMS = {
    "prove": {
        "prove (README)": ["-m", "onebit.cli", "prove"],
        "prove --stop never --no-fork": ["-m", "onebit.cli", "prove", "--stop", "never",
                                         "--no-fork"],
    },
    "tests": {
        "README line 2": README_TESTS,
        "serial": serial(README_TESTS),
    },
}


def timed(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and everything it started)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([PY, *args, "-p", "no:cacheprovider"] if args[1] == "pytest" else
                   [PY, *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def spread(values: list[float]) -> str:
    return (f"median {statistics.median(values):6.1f} s  [{min(values):.1f} .. "
            f"{max(values):.1f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=sorted(ARMS))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    arms = ARMS[args.what]
    walls: dict[str, list[float]] = {arm: [] for arm in arms}
    cpus: dict[str, list[float]] = {arm: [] for arm in arms}
    print(f"{os.cpu_count()} cores; {args.rounds} rounds, arms alternated")
    for _ in range(args.rounds):
        for arm, command in arms.items():
            wall, cpu = timed(command)
            walls[arm].append(wall)
            cpus[arm].append(cpu)
            print(f"  {arm:<30} wall {wall:6.1f} s  cpu {cpu:6.1f} s", flush=True)
    for arm in arms:
        print(f"{arm:<30} wall {spread(walls[arm])}  cpu {spread(cpus[arm])}")
    fast, slow = arms
    ratio = [s / f for s, f in zip(walls[slow], walls[fast], strict=True)]
    cpu_ratio = [s / f for s, f in zip(cpus[slow], cpus[fast], strict=True)]
    print(f"{slow} / {fast}: wall {statistics.median(ratio):.2f} [{min(ratio):.2f} .. "
          f"{max(ratio):.2f}], cpu {statistics.median(cpu_ratio):.2f} "
          f"[{min(cpu_ratio):.2f} .. {max(cpu_ratio):.2f}]")


if __name__ == "__main__":
    main()
