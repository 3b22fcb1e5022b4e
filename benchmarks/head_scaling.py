"""How the trained head's acceptance grows with its data, and what that rate asks of a
distillation budget.

The base answers the largest prompt count asked for, plus the held-out prompts, once
(`onebit.train.data.distil`, as `onebit train-head` does; or the answers are read back from
`--sequences`, a file an earlier run wrote). For each N in `--prompts` a head is fitted by the
train-head recipe (`onebit.train.recipe.fit_head`: its draft vocabulary, epochs and seed) on
the first N training answers and measured on the held-out ones, so each row differs from the
next only in how much data the head saw.

The table gives per N the answer tokens, the draft vocabulary's coverage of the held-out
answers, the held-out acceptance per chain position (draft j right given drafts 1 .. j-1 were,
the chain fed its own drafts) and the fit's seconds. Under it: the first draft's gain per
doubling of the answer tokens (least squares over log2 of the tokens), and at that rate how
many answer tokens a first draft right 50 % and 55 % of the time would take, and how long the
base takes to distil them at the rate this run measured.

    .venv/bin/python benchmarks/head_scaling.py [--prompts 110,220,440,880] [--epochs 6]
        [--sequences /tmp/answers.npz]   # written on the first run, read on the next
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

from onebit.heads.eagle import default_taps
from onebit.train import data
from onebit.train.prompts import HELD_OUT, chat_prompts
from onebit.train.recipe import Recipe, fit_head


def distil(model, prompts, max_tokens: int):
    start = time.perf_counter()
    seqs = data.distil(model, prompts, max_tokens=max_tokens,
                       taps=default_taps(model.layer_count),
                       on_prompt=lambda i, n: print(f"  distilled {i + 1}/{len(prompts)}",
                                                    file=sys.stderr) if i % 50 == 49 else None)
    seconds = time.perf_counter() - start
    return seqs, sum(len(s) - s.answer_start for s in seqs) / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a GGUF file (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--prompts", default="110,220,440,880",
                    help="training prompt counts, comma separated (default 110,220,440,880)")
    ap.add_argument("--epochs", type=int, default=Recipe.epochs)
    ap.add_argument("--max-tokens", type=int, default=Recipe.max_tokens)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", default="0.5,0.55",
                    type=lambda v: [float(t) for t in v.split(",")],
                    help="first-draft acceptances to extrapolate to (default 0.5,0.55)")
    ap.add_argument("--sequences", help="an .npz of distilled answers: read if it exists "
                    "(it must hold the same prompts), else written after distilling")
    args = ap.parse_args()
    counts = sorted({int(n) for n in args.prompts.split(",")})
    if counts[0] < 1 or counts[-1] > len(chat_prompts()):
        ap.error(f"--prompts must lie in [1, {len(chat_prompts())}], got {args.prompts}")

    from onebit.commands.generate import default_kernel
    from onebit.hub import model_path
    from onebit.text.load import load_text_model

    model = load_text_model(args.model or str(model_path()), kernel=default_kernel())
    prompts = chat_prompts(args.seed)[: counts[-1]] + HELD_OUT
    if args.sequences and os.path.exists(args.sequences):
        seqs = data.load_sequences(args.sequences, vocab_size=model.vocab_size,
                                   hidden_size=model.hidden_size)
        if len(seqs) != len(prompts):
            ap.error(f"{args.sequences} holds {len(seqs)} answers; {len(prompts)} asked for")
        # the rate is this run's own: a few answers distilled again, after one that warms
        # the kernels up (the first call loads them)
        distil(model, prompts[:1], args.max_tokens)
        _, rate = distil(model, prompts[:16], args.max_tokens)
        print(f"read {len(seqs)} answers from {args.sequences}; distilling runs at "
              f"{rate:.0f} answer tokens/s (16 prompts)")
    else:
        seqs, rate = distil(model, prompts, args.max_tokens)
        print(f"distilled {len(seqs)} answers at {rate:.0f} answer tokens/s")
        if args.sequences:
            data.save_sequences(args.sequences, seqs)
    train_s, held_s = seqs[: -len(HELD_OUT)], seqs[-len(HELD_OUT):]

    recipe = Recipe(epochs=args.epochs, seed=args.seed)
    print(f"\n{'prompts':>7}  {'answer tokens':>13}  {'coverage':>8}  "
          f"{'held-out acceptance per draft':>33}  {'fit s':>6}")
    points = []
    for n in counts:
        fitted = fit_head(model, train_s[:n], held_s, recipe)
        tokens = sum(len(s) - s.answer_start for s in train_s[:n])
        acc = "  ".join(f"{a:6.1%}" for a in fitted.report.conditional)
        print(f"{n:7d}  {tokens:13d}  {fitted.coverage:8.1%}  {acc:>33}  "
              f"{fitted.seconds:6.0f}", flush=True)
        points.append((math.log2(tokens), fitted.report.conditional[0]))
    if len(points) < 2:
        return
    x, y = np.array(points).T
    slope, at_zero = np.polyfit(x, y, 1)
    print(f"\nfirst draft: {slope:+.1%} per doubling of the answer tokens")
    if slope <= 0:
        return
    for target in args.targets:
        tokens = 2 ** ((target - at_zero) / slope)
        print(f"  right {target:.0%} of the time: about {tokens / 1e6:.1f} M answer tokens, "
              f"{tokens / rate / 3600:.1f} h of distilling at {rate:.0f} tokens/s")


if __name__ == "__main__":
    main()
