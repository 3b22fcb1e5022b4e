"""What each part of the compiled decoder stack costs on SmolLM2: the stack against copies of
itself with parts left out, in one process (A B A B), for a step (1 row) and a verify (8 rows).

    .venv/bin/python benchmarks/stack_parts.py [--model FILE.gguf] [--rounds 10] [--rows 1 8]

The copies are fused.py's own source with one loop emptied per part, compiled beside the
real stack (each patch must match the source exactly, or the script stops: it never times a
copy that silently kept a part). Arms, each cumulative:
- full: the stack as it runs (30 layers, no lm_head: the int8 lm_head is its own product);
- no products: the seven matrix products of every layer emptied (their outputs zeroed);
- no attention: also the (row, head) attention loop;
- no silu: also the exp of SiLU (act = g * u).
A part's cost is the difference of two neighbouring arms. Every arm runs on the same residual
rows at position 128, after 128 positions of cache, 5 calls a sample; each round times every
arm once, in order. Prints each arm's median [min .. max] over the rounds, in ms, then each
part's (the differences taken round by round; "the rest" is the last arm: norms,
quantisation, RoPE, the cache writes, the parallel regions). Nothing
here checks bits (the emptied copies compute something else); the real stack's bits are the
tests' job (tests/forward/test_fused.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

import onebit
from onebit import hub
from onebit.models import fused

NO_PRODUCTS = [("for p in prange(n_s):", "for p in prange(n_s * 0):"),
               ("qkv = np.empty((R, n_qkv)", "qkv = np.zeros((R, n_qkv)"),
               ("proj = np.empty", "proj = np.zeros"),
               ("gu = np.empty", "gu = np.zeros")]
NO_ATTENTION = [("for task in prange(R * Hq):", "for task in prange(R * Hq * 0):")]
NO_SILU = [("act[i, j] = g / (np.float32(1) + exp32(-g)) * gu[i, inter + j]",
            "act[i, j] = g * gu[i, inter + j]")]
ARMS = {"full": [], "no products": NO_PRODUCTS,
        "no attention": NO_PRODUCTS + NO_ATTENTION,
        "no silu": NO_PRODUCTS + NO_ATTENTION + NO_SILU}
# what each arm after "full" leaves out that the arm before it ran
PART_NAMES = ("products", "attention", "silu exp")


def patched_module(name: str, patches: list[tuple[str, str]]) -> types.ModuleType:
    """fused.py's source with `patches` applied (each must occur), as a module of its own."""
    path = Path(fused.__file__)
    source = path.read_text()
    for old, new in patches:
        if old not in source:
            sys.exit(f"stack_parts: {old!r} is no longer in {path}; update the patch")
        source = source.replace(old, new)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - our own file
    return module


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f} .. {max(values):.2f}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=hub.cache_path())
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args(argv)
    if not args.model.is_file():
        sys.exit(f"stack_parts: no model at {args.model} (`onebit pull smollm2` fetches it)")
    model = onebit.load_model(args.model, kernel="int8")
    if model._fused is None:
        sys.exit(f"stack_parts: {args.model} does not run the compiled stack: "
                 f"{fused.unfit_reason(model)}")
    model._rope_table(256 + max(args.rows))  # the cos / sin rows the stack reads
    cos, sin = model._rope_cos, model._rope_sin
    stacks = {arm: patched_module(f"stack_parts_{i}", patches).FusedStack(model)
              for i, (arm, patches) in enumerate(ARMS.items())}
    hidden = model.config.hidden_size
    rows = (np.random.default_rng(0).standard_normal((max(args.rows), hidden)) * 0.5
            ).astype(np.float32)
    for stack in stacks.values():  # compile, and fill 128 positions of cache
        for pos in (0, 64):
            stack.run(np.repeat(rows[:1], 64, 0), pos, cos, sin, ())
    print(f"{args.model.name}: the compiled stack, {model.config.num_hidden_layers} layers, "
          f"at position 128; ms a call, median [min .. max] of {args.rounds} rounds")
    for r in args.rows:
        times: dict[str, list[float]] = {arm: [] for arm in stacks}
        for _ in range(args.rounds):
            for arm, stack in stacks.items():
                start = time.perf_counter()
                for _ in range(5):
                    stack.run(rows[:r].copy(), 128, cos, sin, ())
                times[arm].append((time.perf_counter() - start) / 5 * 1e3)
        print(f"rows {r}: " + "   ".join(f"{arm} {spread(t)}" for arm, t in times.items()))
        # each part's cost, round by round: an arm less the next (the last arm is the rest)
        arms = list(times)
        parts = {PART_NAMES[i]: [a - b for a, b in zip(times[arms[i]], times[arms[i + 1]],
                                                       strict=True)]
                 for i in range(len(arms) - 1)}
        parts["the rest"] = times[arms[-1]]
        print(f"rows {r}, each part: " + "   ".join(f"{part} {spread(t)}"
                                                  for part, t in parts.items()))


if __name__ == "__main__":
    main()
