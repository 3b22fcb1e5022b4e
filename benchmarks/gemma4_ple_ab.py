"""The Gemma 4 PLE weight cache, A/B: PLE weights prepared once (A) against prepared on every
token (B, `ONEBIT_PLE_PER_TOKEN=1`), run alternately A B A B in one process on one model.

    .venv/bin/python benchmarks/gemma4_ple_ab.py [--model DIR] [--rounds 4] [--tokens 16]
        [--all-weights]

Without --model it fabricates a Q4NX Gemma 4 of about 32 M parameters (hidden 768, 4 layers,
intermediate 2048, vocabulary 4096, per-layer embeddings of 256 per layer, window 64): 120 MiB
of float32 weights a token reads, far more than any cache, so a token is bound by reading its
weights, and small enough to run in about a minute on a busy 2-core machine.

Both arms load the same directory. The B arm prepares each layer's PLE gate and projection,
the PLE model projection and the PLE table band of each token afresh, as the engine did before
the cache. Each round times plain greedy decode (the prefill is timed apart) in A, then in B.
It prints, per arm, tokens/s as a median with [min .. max] over the rounds and the sha256 of
the reply; the ratio A/B measured round by round (both arms side by side, so the shared
machine's drift cancels); and exits 1 if any reply's sha256 differs from the others.
`--all-weights` adds a third arm, C, with every Q4NX weight unpacked per token
(`ONEBIT_UNPACK_PER_TOKEN=1`).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import onebit
from onebit.models import fabricate_model, load_model
from onebit.tools.sweep import DecodeClock

PROMPT = [11, 7, 300, 42, 9, 1000, 5, 77, 2048, 4000]
SIZE = dict(hidden_size=768, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
            head_dim=96, global_head_dim=192, intermediate_size=2048, vocab_size=4096,
            hidden_size_per_layer_input=256, sliding_window=64, num_kv_shared_layers=0)


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


def reply_sha(tokens: list[int]) -> str:
    return hashlib.sha256(np.asarray(tokens, dtype=np.int64).tobytes()).hexdigest()[:16]


def decode(model, tokens: int) -> tuple[float, str]:
    """Tokens/s of plain greedy decode after the prompt, and the reply's sha256."""
    clock = DecodeClock(model, len(PROMPT))
    result = onebit.greedy(clock, PROMPT, max_tokens=tokens)
    return tokens / (time.perf_counter() - clock.decode_start), reply_sha(result.tokens)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--kernel", default="auto")
    parser.add_argument("--all-weights", action="store_true")
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    path = args.model or fabricate_model(Path(tmp.name) / "gemma4", "gemma4", **SIZE)
    arms = {"A cached": load_model(path, kernel=args.kernel),
            "B PLE per token": load_model(path, kernel=args.kernel)}
    arms["B PLE per token"].ple_per_token = True
    if args.all_weights:
        arms["C all per token"] = load_model(path, kernel=args.kernel, unpack_per_token=True)
    for model in arms.values():  # warm-up: compile the kernels, fill the caches
        onebit.greedy(model, PROMPT, max_tokens=2)
    first = next(iter(arms.values()))
    print(f"model {path}: kernel {first.kernel}, {first.layer_count} layers, hidden "
          f"{first.hidden_size}, vocab {first.vocab_size}; {args.rounds} rounds of "
          f"{args.tokens} tokens, arms alternated")
    speed = {arm: [] for arm in arms}
    shas = {arm: set() for arm in arms}
    for _ in range(args.rounds):
        for arm, model in arms.items():
            tps, sha = decode(model, args.tokens)
            speed[arm].append(tps)
            shas[arm].add(sha)
    print("| arm | tokens/s median [min..max] | sha256 |")
    print("|---|---|---|")
    for arm in arms:
        print(f"| {arm} | {spread(speed[arm])} | {', '.join(sorted(shas[arm]))} |")
    for arm in list(arms)[1:]:
        ratios = [a / b for a, b in zip(speed["A cached"], speed[arm], strict=True)]
        print(f"A / {arm.split()[0]} (same round, side by side): {spread(ratios)} x faster")
    every = set().union(*shas.values())
    if len(every) != 1:
        print(f"FAIL: the replies differ between or within arms: {sorted(every)}")
        return 1
    print(f"replies identical in every arm and round: sha256 {every.pop()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
