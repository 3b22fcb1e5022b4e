"""The NumPy forward's speed, measured side by side in one run (A B A B), with spreads.

    .venv/bin/python benchmarks/forward_ab.py [--model DIR] [--rounds 3] [--tokens 24]
                                              [--kernel auto] [--backend host|torch|cuda|npu]

Without --model it fabricates a Q4NX qwen3 of about 46 M weights in its matrices (hidden 1024,
4 layers, intermediate 2816, vocab 8192, tied embeddings), big enough that a token is bound by
reading the weights. Reports, each as a median with [min .. max] over the rounds:
- read bandwidth (see `read_gbps`), and the weight bytes one token reads in the form the kernel
  reads them (packed Q4NX blocks on the numba kernel, float arrays otherwise): the bound;
- step time, and verify time at 1, 2, 4, 8, 16 rows relative to one step;
- plain decode tokens/s and its fraction of the read-bandwidth bound (decode only);
- on a Q4NX model with the packed kernel: plain decode against the float32-cache kernel
  ("numba-float") A B A B, with each arm's MiB per token and the replies' sha256;
- speculative decode (perfect head, k = 7, one-pass) against plain decode, decode only;
- the weight cache (the kernel's form prepared once) against preparing it for every product
  (ONEBIT_UNPACK_PER_TOKEN=1), with the sha256 of the emitted tokens, identical in every arm.
Targets (issue 12): plain decode on the default model at least 3x 116 tokens/s and at least
0.6 of the read-bandwidth bound; verify(8) at most 1.3x a step; speculative k = 7 at least 4x.
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
from onebit.tools.sweep import DecodeClock
from pytest_onebit import Oracle, perfect_head

PROMPT = [11, 7, 300, 42, 9, 1000, 5, 77]


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


def read_gbps(nbytes: int = 512 << 20, repeats: int = 5) -> tuple[float, float]:
    """(one thread, all threads) GB/s of reading a buffer far larger than any cache: the best
    of `repeats` numpy sums (one thread), and the best of `repeats` sums split over numba's
    threads (what the kernel uses for large weights) when numba is installed."""
    buf = np.ones(nbytes // 4, dtype=np.float32)
    one = nbytes / min(_timed(lambda: np.add.reduce(buf)) for _ in range(repeats)) / 1e9
    try:
        from numba import get_num_threads, njit, prange
    except ImportError:
        return one, one

    @njit(parallel=True, fastmath=True)
    def chunk_sums(a, parts):  # pragma: no cover - compiled
        out = np.zeros(parts, dtype=np.float32)
        size = a.size // parts
        for p in prange(parts):
            s = np.float32(0)
            for i in range(p * size, (p + 1) * size):
                s += a[i]
            out[p] = s
        return out

    parts = get_num_threads()
    chunk_sums(buf[: 1 << 20], parts)  # compile
    every = nbytes / min(_timed(lambda: chunk_sums(buf, parts)) for _ in range(repeats)) / 1e9
    return one, every


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def read_bytes(model) -> int:
    """Bytes of weights one token reads, in the form the backend holds them (what its kernel
    reads): every product's prepared weight once. An untied embedding is never a product: a
    token reads one row of it, left out here. The compiled stack (fused.py) holds the layer
    weights itself, the backend only the lm_head."""
    held = model.backend._prepared.values()
    stack = getattr(model, "_fused", None)  # the compiled stack holds the layers' weights
    return sum(int(getattr(h, "nbytes", 0)) for h in held) + (stack.nbytes if stack else 0)


def tokens_sha(tokens: list[int]) -> str:
    return hashlib.sha256(np.asarray(tokens, dtype=np.int64).tobytes()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--kernel", default="auto")
    parser.add_argument("--backend", default="host", help="host, torch, cuda or npu")
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory()
    path = args.model or fabricate_model(Path(tmp.name) / "m", "qwen3", hidden_size=1024,
                                         num_hidden_layers=4, num_attention_heads=16,
                                         num_key_value_heads=8, head_dim=64,
                                         intermediate_size=2816, vocab_size=8192)
    model = load_model(path, max_batch_rows=16, kernel=args.kernel, backend=args.backend)
    onebit.greedy(model, PROMPT, max_tokens=2)  # warm-up: compile kernels, prepare weights
    print(f"model {path}: {model.backend.describe()}, vocab {model.vocab_size}")
    one, every = read_gbps()
    bandwidth = max(one, every)
    nbytes = read_bytes(model)
    bound_ms = nbytes / (bandwidth * 1e9) * 1e3
    print(f"read bandwidth: numpy sum of 512 MiB {one:.1f} GB/s (1 thread), numba sum "
          f"{every:.1f} GB/s (all threads); bound uses {bandwidth:.1f} GB/s")
    print(f"weights read per token (as the kernel reads them) {nbytes / 2**20:.1f} MiB; "
          f"bound {bound_ms:.2f} ms/token = {1e3 / bound_ms:.0f} tokens/s")
    step_and_verify(model, args.rounds)
    plain_and_speculative(model, args.rounds, args.tokens, bound_ms)
    if any(getattr(h, "packed", False) for h in model.backend._prepared.values()):
        packed_vs_float(model, path, args, bandwidth)
    cache_vs_per_token(model, path, args)


def step_and_verify(model, rounds: int) -> None:
    """Step time, and verify(R) / step for R = 1, 2, 4, 8, 16, at the same positions."""
    steps, verify_ratio = [], {r: [] for r in (1, 2, 4, 8, 16)}
    for _ in range(rounds):
        onebit.greedy(model, PROMPT, max_tokens=1)
        pos = len(PROMPT) + 1
        step_ms = statistics.median(_timed(lambda p=p: (model.step(5, p))) * 1e3
                                    for p in range(pos, pos + 5))
        steps.append(step_ms)
        for rows in verify_ratio:
            at = model.committed_length
            ms = _timed(lambda at=at, rows=rows: model.verify([5] * rows, at)) * 1e3
            model.commit_verify(0)
            verify_ratio[rows].append(ms / step_ms)
    print(f"step {spread(steps)} ms")
    for rows, ratios in verify_ratio.items():
        print(f"verify({rows:>2}) / step  {spread(ratios)}")


def plain_and_speculative(model, rounds: int, n: int, bound_ms: float) -> None:
    """Plain decode against speculative (perfect head, k = 7), A B A B, decode time only."""
    oracle = Oracle.from_greedy(model, PROMPT, n + 9)
    plain, spec, shas = [], [], set()
    clock = DecodeClock(model, len(PROMPT))
    for _ in range(rounds):
        shas.add(tokens_sha(onebit.greedy(clock, PROMPT, max_tokens=n).tokens))
        plain.append(time.perf_counter() - clock.decode_start)
        shas.add(tokens_sha(onebit.run(clock, perfect_head(oracle), PROMPT, max_tokens=n,
                                       k=7).tokens))
        spec.append(time.perf_counter() - clock.decode_start)
    print(f"plain decode {spread([n / t for t in plain], '{:.0f}')} tokens/s; "
          f"{spread([bound_ms * n / 1e3 / t for t in plain])} of the read-bandwidth bound")
    speedups = [p / s for p, s in zip(plain, spec, strict=True)]
    print(f"speculative k=7 (perfect) / plain: {spread(speedups)} x faster; "
          f"replies sha256 {sorted(shas)}")


def packed_vs_float(model, path: Path, args, bandwidth: float) -> None:
    """Plain decode on the packed kernel (A) against the float32-cache kernel (B), A B A B."""
    base = load_model(path, max_batch_rows=16, kernel="numba-float", backend=args.backend)
    onebit.greedy(base, PROMPT, max_tokens=2)
    n, arms = args.tokens, {"packed Q4NX": model, "float32 cache": base}
    times: dict[str, list[float]] = {name: [] for name in arms}
    shas = set()
    clocks = {name: DecodeClock(m, len(PROMPT)) for name, m in arms.items()}
    for _ in range(args.rounds):
        for name, clock in clocks.items():
            shas.add((name, tokens_sha(onebit.greedy(clock, PROMPT, max_tokens=n).tokens)))
            times[name].append(time.perf_counter() - clock.decode_start)
    for name, m in arms.items():
        mib = read_bytes(m) / 2**20
        bound_s = read_bytes(m) / (bandwidth * 1e9)
        print(f"  {name:<14} {mib:6.1f} MiB/token  {spread([n / t for t in times[name]], '{:.0f}')}"
              f" tokens/s  {spread([bound_s * n / t for t in times[name]])} of the bound")
    ratios = [f / p for p, f in zip(times["packed Q4NX"], times["float32 cache"], strict=True)]
    print(f"packed / float32-cache decode speed: {spread(ratios)} x; "
          f"replies sha256 {sorted(shas)} (the kernels differ in the last bits)")


def cache_vs_per_token(model, path: Path, args) -> None:
    """The kernel's weight form prepared once against prepared for every product, A B A B."""
    m = max(4, args.tokens // 4)
    cached, per_token, shas = [], [], set()
    slow = load_model(path, max_batch_rows=16, kernel=args.kernel, unpack_per_token=True,
                      backend=args.backend)
    onebit.greedy(slow, PROMPT, max_tokens=1)
    for _ in range(args.rounds):
        t = _timed(lambda: shas.add(tokens_sha(onebit.greedy(model, PROMPT, max_tokens=m)
                                               .tokens)))
        cached.append(t)
        t = _timed(lambda: shas.add(tokens_sha(onebit.greedy(slow, PROMPT, max_tokens=m)
                                               .tokens)))
        per_token.append(t)
    print(f"weight cache / per-token preparation ({m} tokens): "
          f"{spread([s / c for c, s in zip(cached, per_token, strict=True)])} x faster; "
          f"replies sha256 {sorted(shas)}")


if __name__ == "__main__":
    main()
