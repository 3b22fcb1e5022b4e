"""What a verify of k rows costs against a step on SmolLM2, and a 128-token prefill (issue 33).

    .venv/bin/python benchmarks/verify_cost.py [--model FILE.gguf] [--rounds 5]
                                               [--kernel int8] [--threads 2]
                                               [--against DIR | --llama] [--json]

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

`--llama` compares llama.cpp (arm A, through llama-cpp-python, the `bench` extra) on the same
file with this checkout (arm B), one fresh process a round each, A B A B, the same calls at
the same positions: a step is `eval` of one token at 128 + j; verify(k) is `eval` of k tokens
there with every row's logits (`logits_all`, as a verify needs them; llama-cpp-python copies
them into its `scores`, a few hundred microseconds at 8 rows), the cache cut back to one
token past the start before the next call (`n_tokens`, which `eval` trims the cache to); the
prefill is the 128 tokens as two `eval`s of 64 with the last row's logits only (the
private `_logits_all` switched off for it, as onebit's `verify_last` computes one row).
The ids are llama.cpp's tokenizer's, the same 128 positions. Under the table, issue 33's
targets: onebit's step at most 0.5x llama.cpp's (decode 2.0x), verify(8) at most 0.35x,
the 128-token prefill at most 0.5x.

The box this runs on is shared: figures move between runs; read the ratios within one run.
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


def parse_rows(text: str) -> tuple[int, ...]:
    """`1-8` or `1,2,4,16`: the verify widths, each 1..128 (the prompt's 128 ids)."""
    try:
        if "-" in text:
            low, high = (int(x) for x in text.split("-"))
            rows = tuple(range(low, high + 1))
        else:
            rows = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise SystemExit(f"verify_cost: --rows wants 1-8 or 1,2,4; got {text!r}") from None
    if not rows or min(rows) < 1 or max(rows) > 128:
        raise SystemExit(f"verify_cost: --rows must be widths from 1 to 128; got {text!r}")
    return rows


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


def measure(model_path: str | None, kernel: str | None, rounds: int) -> list[dict[str, float]]:
    """`rounds` rounds of every arm, in this process: a dict per round, ms."""
    from onebit.text.load import load_text_model

    options = {} if kernel is None else {"kernel": kernel}
    if max(ROWS) > 8:  # the forward's default verify width is 8 rows
        options["max_batch_rows"] = max(ROWS)
    m = load_text_model(model_path, progress=False, **options)
    ids = m.tokenizer.encode(PROMPT_TEXT)[:128]
    if len(ids) < 128:
        raise SystemExit(f"verify_cost: the prompt makes {len(ids)} tokens, not 128")

    # the loop's prefill width: 64 rows on the llama family, the verify width where a
    # family's cache holds no more (Gemma's sliding ring)
    width = min(64, getattr(m, "max_prefill_rows", m.max_batch_rows)())

    def prefill() -> None:
        m.reset()
        for i in range(0, 128, width):
            m.verify_last(ids[i:i + width], i)
            m.commit_verify(len(ids[i:i + width]))

    prefill()  # warm-up: compiles (or loads) every kernel and tile size
    for k in ROWS:
        m.verify(ids[:k], 128)
        m.commit_verify(0)
    m.step(ids[0], 128)

    def call(k: int, j: int) -> None:
        if k == 0:
            m.step(ids[j], 128 + j)
        else:
            m.verify(ids[:k], 128 + j)
            m.commit_verify(1)

    return timed_rounds(prefill, call, rounds)


def timed_rounds(prefill, call, rounds: int) -> list[dict[str, float]]:
    """`rounds` rounds, ms: for each k in 0 (a step) and ROWS, the prefill, then CALLS calls
    `call(k, j)` at positions 128 + j timed together; then the prefill itself, timed."""
    out = []
    for _ in range(rounds):
        got: dict[str, float] = {}
        for k in (0, *ROWS):
            prefill()
            t = time.perf_counter()
            for j in range(CALLS):
                call(k, j)
            got["step" if k == 0 else f"verify{k}"] = (time.perf_counter() - t) / CALLS * 1e3
        t = time.perf_counter()
        prefill()
        got["prefill128"] = (time.perf_counter() - t) * 1e3
        out.append(got)
    return out


def measure_llama(model_path: str | None, threads: int, rounds: int) -> list[dict[str, float]]:
    """As `measure`, on llama.cpp through llama-cpp-python (the module docstring says how
    each call maps)."""
    from llama_cpp import Llama

    from onebit.hub import cached

    path = model_path or cached("smollm2")
    if path is None:
        raise SystemExit("verify_cost: SmolLM2 is not cached (`onebit pull smollm2`)")
    llm = Llama(model_path=str(path), n_ctx=512, n_batch=128, n_threads=threads,
                n_threads_batch=threads, logits_all=True, verbose=False)
    ids = llm.tokenize(PROMPT_TEXT.encode(), add_bos=False)[:128]
    if len(ids) < 128:
        raise SystemExit(f"verify_cost: the prompt makes {len(ids)} tokens, not 128")

    def prefill() -> None:
        llm.n_tokens = 0
        llm._logits_all = False  # the last row's logits only, as verify_last
        try:
            llm.eval(ids[:64])
            llm.eval(ids[64:128])
        finally:
            llm._logits_all = True

    def call(k: int, j: int) -> None:
        llm.n_tokens = 128 + j  # eval trims the cache to this first
        llm.eval(ids[j:j + 1] if k == 0 else ids[:k])

    prefill()  # warm-up
    for k in (0, *ROWS):
        call(k, 0)
    return timed_rounds(prefill, call, rounds)


def one_round(checkout: Path, args, engine: str = "onebit") -> dict[str, float]:
    """One round measured by a fresh process running `checkout`'s onebit (or llama.cpp)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--rounds", "1", "--json",
           "--threads", str(args.threads), "--engine", engine, "--rows", args.rows]
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


def targets(llama: list[dict[str, float]], onebit: list[dict[str, float]]) -> None:
    """Issue 33's three targets, onebit / llama.cpp round by round (median [min .. max])."""
    for key, bound, what in (("step", 0.5, "step (decode 2.0x)"),
                             ("verify8", 0.35, "verify(8)"), ("prefill128", 0.5, "prefill 128")):
        ratios = [b[key] / a[key] for a, b in zip(llama, onebit, strict=True)]
        met = "met" if statistics.median(ratios) <= bound else "not met"
        print(f"target {what}: onebit / llama.cpp {spread(ratios, '{:.3f}')}, at most "
              f"{bound}: {met}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a SmolLM2 GGUF (default: the hub's)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kernel", default=None,
                        help="load_model's kernel= (default: load_model's own default)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--against", type=Path, default=None,
                        help="another onebit checkout: arm A, this one arm B, alternated")
    parser.add_argument("--llama", action="store_true",
                        help="llama.cpp (llama-cpp-python) as arm A, this checkout as B")
    parser.add_argument("--engine", choices=("onebit", "llama"), default="onebit",
                        help=argparse.SUPPRESS)  # a round's process: which engine it times
    parser.add_argument("--json", action="store_true", help="print the rounds as JSON")
    parser.add_argument("--rows", default="1-8",
                        help="the verify widths: `1-8` (default) or a list, `1,2,4,8,16,32`; "
                        "past 8 the model is loaded with that many batch rows")
    args = parser.parse_args()
    global ROWS
    ROWS = parse_rows(args.rows)
    if args.engine == "llama":
        print(json.dumps(measure_llama(args.model, args.threads, args.rounds)))
        return
    here = Path(__file__).resolve().parents[1]
    if args.llama:
        arms = {"A llama.cpp": [], "B onebit": []}
        for _ in range(args.rounds):
            arms["A llama.cpp"].append(one_round(here, args, engine="llama"))
            arms["B onebit"].append(one_round(here, args))
        import llama_cpp

        print(f"SmolLM2, {args.threads} threads, onebit kernel {args.kernel or 'default'} "
              f"against llama.cpp (llama-cpp-python {llama_cpp.__version__}), one process a "
              f"round, A B A B, {args.rounds} rounds:")
        table(arms)
        targets(arms["A llama.cpp"], arms["B onebit"])
        return
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
    arms: dict[str, list[dict[str, float]]] = {"A (against)": [], "B (this)": []}
    for _ in range(args.rounds):
        arms["A (against)"].append(one_round(args.against.resolve(), args))
        arms["B (this)"].append(one_round(here, args))
    print(f"SmolLM2, {args.threads} threads, kernel {args.kernel or 'default'}, A = "
          f"{args.against}, B = {here}, one process a round, A B A B, {args.rounds} rounds:")
    table(arms)


if __name__ == "__main__":
    main()
