"""Gemma 3 270M: onebit's float64 greedy text against transformers' float64 greedy text from
the same GGUF file (`onebit pull gemma3`), on ten ordinary prompts, 64 tokens each.

    .venv/bin/python benchmarks/gemma3_greedy.py [--tokens 64] [--model PATH]

Prints, per prompt, whether the two token sequences are equal, and where they part the
position, both tokens and the logit gap there: transformers' top-1 minus its logit for
onebit's token, and onebit's own gap the other way (a near-tie flips on the last bits). Also
the largest |logit difference| / logit range over the prompt positions. Exits 1 when a
sequence differs at a position where neither side's gap is below 1e-3 of the range.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

PROMPTS = [
    "The capital of France is",
    "Water boils at a temperature of",
    "The three primary colors are",
    "In 1969, the first person to walk on the Moon was",
    "A good breakfast usually includes",
    "The quick brown fox",
    "Python is a programming language that",
    "The largest planet in our solar system is",
    "To make a cup of tea, first",
    "My favourite season of the year is autumn because",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--model", default=None, help="the GGUF (default: the cached gemma3)")
    args = parser.parse_args()
    import torch
    import transformers

    import onebit
    from onebit.hub import model_path
    from onebit.models import load_model

    path = Path(model_path("gemma3") if args.model is None else args.model)
    ours = load_model(path, dtype="float64", kernel="numpy")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float64).eval()
    tok = ours.tokenizer
    equal, worst, bad = 0, 0.0, 0
    for n, prompt in enumerate(PROMPTS):
        started = time.perf_counter()
        ids = tok.encode(prompt)
        with torch.no_grad():
            out = theirs.generate(torch.tensor([ids]), max_new_tokens=args.tokens,
                                  do_sample=False, output_logits=True,
                                  return_dict_in_generate=True)
        t_tokens = [int(t) for t in out.sequences[0, len(ids):]]
        t_logits = np.stack([row[0].numpy() for row in out.logits])
        ours.reset()
        o_tokens = list(onebit.greedy(ours, ids, max_tokens=len(t_tokens)).tokens)
        # onebit's logits along transformers' text (prompt then its tokens)
        ours.reset()
        seq = ids + t_tokens
        o_logits = np.stack([ours.step(t, p) for p, t in enumerate(seq[:-1])])[len(ids) - 1:]
        span = float(t_logits.max() - t_logits.min())
        diff = float(np.abs(o_logits - t_logits).max()) / span
        worst = max(worst, diff)
        same = o_tokens == t_tokens
        equal += same
        line = (f"{n + 1:2d}. {'equal' if same else 'DIFFER'} ({len(t_tokens)} tokens, "
                f"{time.perf_counter() - started:.0f} s; max |dlogit| / range {diff:.2e}) "
                f"{prompt!r} -> {tok.decode(t_tokens)[:70]!r}")
        print(line, flush=True)
        if not same:
            at = next((i for i, (a, b) in enumerate(zip(o_tokens, t_tokens, strict=False))
                       if a != b), min(len(o_tokens), len(t_tokens)) - 1)
            t_row, o_row = t_logits[at], o_logits[at]
            t_gap = float(t_row[t_tokens[at]] - t_row[o_tokens[at]])
            o_gap = float(o_row[o_tokens[at]] - o_row[t_tokens[at]])
            print(f"    part at token {at}: transformers {t_tokens[at]} "
                  f"({tok.decode([t_tokens[at]])!r}), onebit {o_tokens[at]} "
                  f"({tok.decode([o_tokens[at]])!r}); gap in transformers' logits {t_gap:.3e}, "
                  f"in onebit's {o_gap:.3e} (range {span:.1f})")
            bad += max(t_gap, o_gap) > 1e-3 * span
    print(f"greedy text equal on {equal} of {len(PROMPTS)} prompts; max |logit difference| / "
          f"logit range along transformers' text: {worst:.3g}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
