"""What a verify of k rows costs against a step on SmolLM2, and a 128-token prefill (issue 33).

    .venv/bin/python benchmarks/verify_cost.py [--model FILE.gguf] [--rounds 5]
                                               [--kernel int8] [--threads 2]
                                               [--against DIR] [--json]

After a 128-token prompt (committed in two batches of 64, as the loop prefills it), each
sample times 5 calls at positions 128 .. 132 of:
- a step (`step`), the unit;
- a verify of k = 1..8 rows (`verify` of k tokens, then `commit_verify(1)`, as a decode
  round that accepts one token does), printed as ms and as verify(k) / step;
- the prefill: `reset`, then the 128 prompt tokens as `verify_last` of 64 + `commit_verify`
  twice (one sample, one call).
A round times every arm once, in order; the table prints each arm's median [min .. max] over
the rounds (verify(k) / step taken round by round, each against its own round's step).

`--against DIR` compares this checkout (arm B) with another checkout of onebit at DIR (arm A,
say a `git worktree` of the commit before a change): each round runs one fresh process per
arm, A then B, alternating (A B A B ..), each process loading the model once and timing one
round; the table then shows both arms and B / A. The two checkouts' kernels compile into
their own folders of the kernel cache (its key is the sources), so the first round of each
pays no compile inside the timings (a warm-up pass runs first in every process).

The box this runs on is shared: figures move between runs; read the ratios within one run.
The llama.cpp side of issue 33's comparison (llama-cpp-python) is not installed here and is
not run by this script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROWS = tuple(range(1, 9))
PROMPT_TEXT = "Write a long explanation of how photosynthesis works in plants. " * 12
CALLS = 5  # calls a sample


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


def measure(model_path: str | None, kernel: str | None, rounds: int) -> list[dict[str, float]]:
    """`rounds` rounds of every arm, in this process: a dict per round, ms."""
    from onebit.text.load import load_text_model

    options = {} if kernel is None else {"kernel": kernel}
    m = load_text_model(model_path, progress=False, **options)
    ids = m.tokenizer.encode(PROMPT_TEXT)[:128]
    if len(ids) < 128:
        raise SystemExit(f"verify_cost: the prompt makes {len(ids)} tokens, not 128")

    def prefill() -> None:
        m.reset()
        for i in range(0, 128, 64):
            m.verify_last(ids[i:i + 64], i)
            m.commit_verify(64)

    prefill()  # warm-up: compiles (or loads) every kernel and tile size
    for k in ROWS:
        m.verify(ids[:k], 128)
        m.commit_verify(0)
    m.step(ids[0], 128)
    out = []
    for _ in range(rounds):
        got: dict[str, float] = {}
        for k in (0, *ROWS):
            prefill()
            t = time.perf_counter()
            for j in range(CALLS):
                if k == 0:
                    m.step(ids[j], 128 + j)
                else:
                    m.verify(ids[:k], 128 + j)
                    m.commit_verify(1)
            got["step" if k == 0 else f"verify{k}"] = (time.perf_counter() - t) / CALLS * 1e3
        t = time.perf_counter()
        prefill()
        got["prefill128"] = (time.perf_counter() - t) * 1e3
        out.append(got)
    return out


def one_round(checkout: Path, args) -> dict[str, float]:
    """One round measured by a fresh process running `checkout`'s onebit."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--rounds", "1", "--json",
           "--threads", str(args.threads)]
    if args.model:
        cmd += ["--model", args.model]
    if args.kernel:
        cmd += ["--kernel", args.kernel]
    env = dict(os.environ, PYTHONPATH=str(checkout))
    done = subprocess.run(cmd, env=env, cwd=checkout, capture_output=True, text=True,
                          check=False)
    if done.returncode:
        raise SystemExit(f"verify_cost: the round in {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])[0]


def table(arms: dict[str, list[dict[str, float]]]) -> None:
    names = list(arms)
    print("arm".ljust(12) + "".join(f"{n:>28}" for n in names)
          + ("" if len(names) < 2 else f"{names[1] + ' / ' + names[0]:>24}"))

    def row(label: str, per_arm: list[list[float]], fmt: str) -> None:
        line = label.ljust(12) + "".join(f"{spread(v, fmt):>28}" for v in per_arm)
        if len(per_arm) == 2:
            line += f"{spread([b / a for a, b in zip(*per_arm, strict=True)], '{:.3f}'):>24}"
        print(line)

    row("step ms", [[r["step"] for r in arms[n]] for n in names], "{:.2f}")
    for k in ROWS:
        row(f"verify({k})/st", [[r[f"verify{k}"] / r["step"] for r in arms[n]] for n in names],
            "{:.2f}")
    for k in ROWS:
        row(f"verify({k}) ms", [[r[f"verify{k}"] for r in arms[n]] for n in names], "{:.2f}")
    row("prefill ms", [[r["prefill128"] for r in arms[n]] for n in names], "{:.1f}")
    print("verify(k)/st: verify(k) / step, each round against its own round's step; "
          "median [min .. max] over the rounds; the B / A column: the two arms' figures "
          "divided round by round")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a SmolLM2 GGUF (default: the hub's)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kernel", default=None,
                        help="load_model's kernel= (default: load_model's own default)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--against", type=Path, default=None,
                        help="another onebit checkout: arm A, this one arm B, alternated")
    parser.add_argument("--json", action="store_true", help="print the rounds as JSON")
    args = parser.parse_args()
    if args.against is None:
        import numba

        numba.set_num_threads(args.threads)
        rounds = measure(args.model, args.kernel, args.rounds)
        if args.json:
            print(json.dumps(rounds))
            return
        print(f"SmolLM2, {args.threads} threads, kernel {args.kernel or 'default'}, "
              f"after a 128-token prompt, {CALLS} calls a sample, {args.rounds} rounds:")
        table({"this": rounds})
        return
    here = Path(__file__).resolve().parents[1]
    arms: dict[str, list[dict[str, float]]] = {"A (against)": [], "B (this)": []}
    for _ in range(args.rounds):
        arms["A (against)"].append(one_round(args.against.resolve(), args))
        arms["B (this)"].append(one_round(here, args))
    print(f"SmolLM2, {args.threads} threads, kernel {args.kernel or 'default'}, A = "
          f"{args.against}, B = {here}, one process a round, A B A B, {args.rounds} rounds:")
    table(arms)


if __name__ == "__main__":
    main()
