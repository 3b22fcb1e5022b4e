"""Where the time of one contract run goes: the toy base, the head, or the loop itself.

    .venv/bin/python benchmarks/loop_overhead.py [--tokens 256] [--k 7] [--repeats 30]

The toy and the head are timed from inside (their methods wrapped with a clock), so the
loop's own overhead is what is left of the wall time, measured in the same run. Prints the
median and the spread (min..max) over the repeats, and the overhead per round.
"""

from __future__ import annotations

import argparse
import statistics
import time

import onebit
from pytest_onebit import Oracle, ToyBase, perfect_head

PROMPT = [3, 1, 4, 1, 5]


class Clock:
    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, obj, names):
        for name in names:
            fn = getattr(obj, name)

            def timed(*args, _fn=fn, **kwargs):
                start = time.perf_counter()
                try:
                    return _fn(*args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - start

            setattr(obj, name, timed)


def one_run(tokens: int, k: int, flavour: str) -> dict[str, float]:
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, tokens + k + 2)
    base, head = ToyBase(), perfect_head(oracle, flavour)
    base_clock, head_clock = Clock(), Clock()
    base_clock.wrap(base, ["step", "verify", "commit_verify", "last_hidden",
                           "last_hidden_rows", "reset", "max_batch_rows"])
    head_clock.wrap(head, ["propose", "commit_rows", "reset", "needs_last_hidden"])
    start = time.perf_counter()
    result = onebit.run(base, head, PROMPT, max_tokens=tokens, k=k)
    total = time.perf_counter() - start
    loop = total - base_clock.seconds - head_clock.seconds
    return {"total_ms": total * 1e3, "toy_ms": base_clock.seconds * 1e3,
            "head_ms": head_clock.seconds * 1e3, "loop_ms": loop * 1e3,
            "loop_us_per_round": loop * 1e6 / result.stats.rounds,
            "loop_share": loop / total, "rounds": result.stats.rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--k", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"N = {args.tokens}, k = {args.k}, {args.repeats} repeats, median [min .. max]")
    print(f"{'round':<9} {'total ms':>20} {'toy ms':>20} {'head ms':>20} "
          f"{'loop ms':>20} {'loop us/round':>22} {'loop share':>10}")
    for flavour in ("one-pass", "two-pass"):
        one_run(args.tokens, args.k, flavour)  # warm-up
        runs = [one_run(args.tokens, args.k, flavour) for _ in range(args.repeats)]

        def cell(key, fmt="{:.2f}", runs=runs):
            values = [r[key] for r in runs]
            return (f"{fmt.format(statistics.median(values))} "
                    f"[{fmt.format(min(values))}..{fmt.format(max(values))}]")

        print(f"{flavour:<9} {cell('total_ms'):>20} {cell('toy_ms'):>20} {cell('head_ms'):>20} "
              f"{cell('loop_ms'):>20} {cell('loop_us_per_round', '{:.1f}'):>22} "
              f"{statistics.median(r['loop_share'] for r in runs):>10.0%}")


if __name__ == "__main__":
    main()
