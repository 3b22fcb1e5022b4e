"""Sampled speculative decoding against plain sampling, side by side (A B A B), with spreads.

    .venv/bin/python benchmarks/sample_ab.py [--model DIR] [--rounds 3] [--tokens 24]
        [--temperature 0.1] [--top-k 20] [--k 4]

Without --model it fabricates a Q4NX qwen3 (hidden 1024, 4 layers, intermediate 2816, vocab
8192), the model the forward benchmark uses. Arms, each timed on decode only (the prefill
apart), alternating round by round:
- plain sampling, `onebit.sample` (one step per token);
- sampled speculative decoding, `onebit.run` with prompt lookup (`NgramHead`) and with the
  greedy oracle (`GreedyOracleHead`: the target's greedy text, known in advance, the ceiling
  of greedy drafting), both deterministic drafts (one-hot q), at --k;
- greedy decoding, plain and with the greedy oracle, for reference.
A fabricated model has random weights, so its sampled text rarely repeats itself (prompt lookup
finds little) and leaves the greedy text at the first token the temperature changes (the
oracle then has nothing to propose): the arms measure the sampled loop's overhead and what a
head that agrees with the target buys, not what a trained model would see.
Each row: tokens/s as median [min .. max] over the rounds, base passes per token and the draft
acceptance rate. The same seed is used in every round, so each arm emits the same text every
time (the sha256 of its tokens is printed); sampled speculative text differs from plain
sampling's (the draws are consumed in another order) but has the same distribution
(docs/sampling.md).

Each arm's ratio to plain sampling is taken round by round (the arms of one round ran back to
back), median [min .. max]. Then the enumeration time of the largest trees the sampling suite
enumerates: the real forward's (qwen3 + DFlash, k = 2) and the toy's largest, each checked
against plain sampling's exact distribution.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import onebit
from onebit.heads import GreedyOracleHead, NgramHead
from onebit.models import fabricate_model, load_model
from onebit.tools.sweep import DecodeClock

PROMPT = [11, 7, 300, 42, 9, 1000, 5, 77, 11, 7, 300, 42]


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


def timed(clock: DecodeClock, fn) -> tuple[float, onebit.RunResult]:
    result = fn()
    assert clock.decode_start is not None
    return time.perf_counter() - clock.decode_start, result


def arms(clock: DecodeClock, args: argparse.Namespace) -> dict:
    s = onebit.Sampling(args.temperature, top_k=args.top_k)
    n = args.tokens
    truth = onebit.greedy(clock, PROMPT, max_tokens=n + args.k + 1).tokens
    oracle = GreedyOracleHead({tuple(PROMPT): truth})
    return {
        "plain sampling": lambda: onebit.sample(clock, PROMPT, max_tokens=n, sampling=s,
                                                seed=args.seed),
        f"sampled, prompt lookup k={args.k}": lambda: onebit.run(
            clock, NgramHead(n=2, k=args.k), PROMPT, max_tokens=n, k=args.k, sampling=s,
            seed=args.seed),
        f"sampled, greedy oracle k={args.k}": lambda: onebit.run(
            clock, oracle, PROMPT, max_tokens=n, k=args.k, sampling=s, seed=args.seed),
        "greedy": lambda: onebit.greedy(clock, PROMPT, max_tokens=n),
        f"greedy, greedy oracle k={args.k}": lambda: onebit.run(
            clock, oracle, PROMPT, max_tokens=n, k=args.k),
    }


def real_forward_tree(tmp: Path) -> str:
    """The largest tree the suite enumerates (tests/sampling/test_real_forward.py): a
    fabricated float qwen3 with a DFlash head, k = 2, top-k 2, 3 tokens; held to plain
    sampling as the test holds it."""
    from onebit.heads import fabricate_dflash, load_dflash
    from pytest_onebit.sampling.enumeration import distance, exact_distribution, plain_distribution

    target = load_model(fabricate_model(tmp / "qwen3-float", "qwen3", quantized=False))
    head = load_dflash(fabricate_dflash(tmp / "dflash", target, block_size=4), target)
    s = onebit.Sampling(1.0, top_k=2)
    prompt = [5, 9, 17, 5, 9]
    d = exact_distribution(onebit.run, target, head, prompt, max_tokens=3, k=2, sampling=s)
    want = plain_distribution(target, prompt, max_tokens=3, sampling=s)
    gap, _ = distance(d, want)
    assert gap <= 1e-12, gap
    return (f"| qwen3 (real forward) + DFlash, k=2, top-k 2, 3 tokens | {d.leaves} | "
            f"{len(want.probs)} | {d.seconds:.2f} |")


def enumeration_times(tmp: Path) -> list[str]:
    """The largest trees of the sampling suite: leaves and seconds."""
    from pytest_onebit.sampling.scenarios import distribution_scenarios
    from pytest_onebit.sampling.trace import execute_sampled

    lines = [real_forward_tree(tmp)]
    for s in distribution_scenarios():
        if s.id in ("two-pass-mixed-k2-t1-v4-n3", "one-pass-model-k2-t1-top3-v5-n3",
                    "two-pass-blend-k4-t1-v3-n3"):
            t = execute_sampled(onebit.run, s)
            assert t.speculative is not None
            lines.append(f"| {s.id} | {t.speculative.leaves} | {len(t.plain.probs)} | "
                         f"{t.speculative.seconds:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--temperature", type=float, default=0.1)
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    path = args.model or fabricate_model(Path(tmp.name) / "m", "qwen3", hidden_size=1024,
                                         num_hidden_layers=4, intermediate_size=2816,
                                         vocab_size=8192)
    model = load_model(path)
    clock = DecodeClock(model, len(PROMPT))
    runs = arms(clock, args)
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    results: dict[str, onebit.RunResult] = {}
    for fn in runs.values():  # warm-up (weights unpacked, caches filled)
        timed(clock, fn)
    for _ in range(args.rounds):
        for name, fn in runs.items():
            elapsed, results[name] = timed(clock, fn)
            seconds[name].append(elapsed)
    print(f"model {path}, {args.tokens} tokens, temperature {args.temperature}, "
          f"top-k {args.top_k}, seed {args.seed}, {args.rounds} rounds (A B A B)\n")
    print("| arm | tokens/s | vs plain sampling | base passes per token | acceptance | "
          "tokens sha256 |")
    print("|---|---:|---:|---:|---:|---|")
    plain = [len(results["plain sampling"].tokens) / v for v in seconds["plain sampling"]]
    for name, values in seconds.items():
        r = results[name]
        rates = [len(r.tokens) / v for v in values]
        ratios = [a / b for a, b in zip(rates, plain, strict=True)]  # round by round
        digest = hashlib.sha256(str(r.tokens).encode()).hexdigest()[:12]
        print(f"| {name} | {spread(rates)} | {spread(ratios, '{:.2f}')}x | "
              f"{r.stats.passes_per_token:.3f} | {r.stats.acceptance_rate:.2f} | {digest} |")
    print("\n| largest trees of the sampling suite | leaves | sequences | seconds |")
    print("|---|---:|---:|---:|")
    print("\n".join(enumeration_times(Path(tmp.name))))


if __name__ == "__main__":
    main()
