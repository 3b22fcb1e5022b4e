"""Prefill of a 72-token prompt, batched against stepped, in one process (A B A B), with spreads.

    .venv/bin/python benchmarks/prefill_ab.py [--model DIR] [--rounds 5] [--float]
                                              [--kernel auto|numba|numpy]

Without --model it fabricates the 46 M-parameter Qwen3 of issue 12 (hidden 1024, 4 layers,
intermediate 2816, vocab 8192; Q4NX, or a float checkpoint with --float). Arms, each the whole
prefill through the loop (`onebit.run(..., max_tokens=0)`: reset, the prompt, t1's choice):
- stepped: `onebit.greedy(..., max_tokens=0)`, one `step` per prompt token (the reference);
- batched at 8, 16, 32 (the forward's default `max_prefill_rows()`) and 72 rows (the whole
  prompt in one batch): `verify` + `commit_verify` per batch.
Every round runs every arm once, in the same order. Prints each arm's prefill time as a median
[min .. max] over the rounds and its speed-up over stepping (per round, then median [min ..
max]), and checks that every arm leaves the model where stepping does: the next step's logits
are bit-identical (their sha256 is printed). Target (issue 12): no slower than transformers'
108 ms on this checkpoint.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import onebit
from onebit.models import fabricate_model, load_model

PROMPT = [(37 * i + 11) % 8192 for i in range(72)]
WIDTHS = (8, 16, 32, 72)


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


class Width:
    """The model, declaring a prefill batch of `rows` (the model itself takes up to 72)."""

    def __init__(self, model, rows: int) -> None:
        self._model, self._rows = model, rows

    def __getattr__(self, name):
        return getattr(self._model, name)

    @property
    def vocab_size(self) -> int:
        return self._model.vocab_size

    def max_prefill_rows(self) -> int:
        return self._rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--float", action="store_true", help="a float checkpoint, not Q4NX")
    parser.add_argument("--kernel", default="auto")
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    path = args.model or fabricate_model(Path(tmp.name) / "m", "qwen3", hidden_size=1024,
                                         num_hidden_layers=4, intermediate_size=2816,
                                         vocab_size=8192, quantized=not args.float)
    model = load_model(path, kernel=args.kernel, max_prefill_rows=max(WIDTHS))
    print(f"model {path}: {model.backend.describe()}, vocab {model.vocab_size}, "
          f"prompt {len(PROMPT)} tokens, {args.rounds} rounds")

    def stepped() -> None:
        onebit.greedy(model, PROMPT, max_tokens=0)

    def batched(rows: int):
        return lambda: onebit.run(Width(model, rows), None, PROMPT, max_tokens=0, k=0)

    arms = {"stepped": stepped, **{f"batched {rows}": batched(rows) for rows in WIDTHS}}
    for arm in arms.values():  # warm-up: compile kernels, unpack weights, grow the caches
        arm()
    times: dict[str, list[float]] = {name: [] for name in arms}
    shas: dict[str, set[str]] = {name: set() for name in arms}
    for _ in range(args.rounds):
        for name, arm in arms.items():
            start = time.perf_counter()
            arm()
            times[name].append((time.perf_counter() - start) * 1e3)
            shas[name].add(_state_sha(model))
    print()
    print("| arm | prefill ms, median [min .. max] | x stepped, median [min .. max] |")
    print("|---|---|---|")
    for name in arms:
        speedups = [s / t for s, t in zip(times["stepped"], times[name], strict=True)]
        print(f"| {name} | {spread(times[name])} | {spread(speedups, '{:.2f}')} |")
    every = set().union(*shas.values())
    print(f"\nnext-step logits sha256 after the prefill: {sorted(every)} "
          f"({'identical in every arm' if len(every) == 1 else 'ARMS DIFFER'})")


def _state_sha(model) -> str:
    """The sha256 of the logits of one more step after the prompt: equal iff the state is."""
    logits = model.step(5, len(PROMPT))
    return hashlib.sha256(np.ascontiguousarray(logits).tobytes()).hexdigest()[:16]


if __name__ == "__main__":
    main()
