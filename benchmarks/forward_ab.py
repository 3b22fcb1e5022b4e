"""The NumPy forward's speed, measured side by side in one run (A B A B), with spreads.

    .venv/bin/python benchmarks/forward_ab.py [--model DIR] [--rounds 3] [--tokens 24]
                                              [--backend host|torch|cuda|npu]

Without --model it fabricates a Q4NX qwen3 of about 56 M parameters (hidden 1024, 4 layers,
intermediate 2816, vocab 8192), big enough that a token is bound by reading the weights.
Reports, each as a median with [min .. max] over the rounds:
- memcpy bandwidth, and the weight bytes one token reads: the bandwidth bound per token;
- step time, and verify time at 1, 2, 4, 8, 16 rows relative to one step;
- plain decode tokens/s against the bound (decode only: the prefill is timed apart);
- speculative decode (perfect head, k = 7, one-pass) against plain decode, decode only;
- the weight cache (unpack once) against per-token unpacking (ONEBIT_UNPACK_PER_TOKEN=1),
  with the sha256 of the emitted tokens, which must be identical in every arm.
Targets (issue 4): plain decode within 2x of the bound; verify(8) under 1.5x a step;
speculative k = 7 at least 4x plain decode; the weight cache at least 3x per-token unpacking.
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


def memcpy_gbps(nbytes: int = 256 << 20, repeats: int = 5) -> float:
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(repeats))
    return 2 * nbytes / best / 1e9  # read + write


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def weight_bytes(model) -> int:
    """Bytes of weights one token reads in their compute form: every matrix once, except an
    untied embedding, of which a token reads one row."""
    names = model.weights.names()
    if "lm_head.weight" in names:
        names.remove("model.embed_tokens.weight")
    return sum(model.weights.get(name).nbytes for name in names)


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
    n = args.tokens
    onebit.greedy(model, PROMPT, max_tokens=2)  # warm-up: compile kernels, unpack weights
    print(f"model {path}: {model.backend.describe()}, vocab {model.vocab_size}")

    bandwidth = memcpy_gbps()
    nbytes = weight_bytes(model)
    bound_ms = nbytes / (bandwidth * 1e9) * 1e3
    print(f"memcpy {bandwidth:.1f} GB/s; weights read per token {nbytes / 2**20:.0f} MiB; "
          f"bound {bound_ms:.1f} ms/token")

    # step and verify: the same positions each round
    steps, verify_ratio = [], {r: [] for r in (1, 2, 4, 8, 16)}
    for _ in range(args.rounds):
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

    # plain vs speculative, A B A B, decode time only (both arms prefill the same prompt)
    oracle = Oracle.from_greedy(model, PROMPT, n + 9)
    plain, spec, shas = [], [], set()
    clock = DecodeClock(model, len(PROMPT))
    for _ in range(args.rounds):
        shas.add(tokens_sha(onebit.greedy(clock, PROMPT, max_tokens=n).tokens))
        plain.append(time.perf_counter() - clock.decode_start)
        shas.add(tokens_sha(onebit.run(clock, perfect_head(oracle), PROMPT, max_tokens=n,
                                       k=7).tokens))
        spec.append(time.perf_counter() - clock.decode_start)
    plain_tps = [n / t for t in plain]
    print(f"plain decode {spread(plain_tps)} tokens/s; "
          f"{spread([t / n * 1e3 / bound_ms for t in plain])} x the bound")
    speedups = [p / s for p, s in zip(plain, spec, strict=True)]
    print(f"speculative k=7 (perfect) / plain: {spread(speedups)} x faster; "
          f"replies sha256 {sorted(shas)}")

    # unpack once vs per token (fewer tokens: the slow arm unpacks every weight per token)
    m = max(4, n // 4)
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
    print(f"weight cache / per-token unpacking ({m} tokens): "
          f"{spread([s / c for c, s in zip(cached, per_token, strict=True)])} x faster; "
          f"replies sha256 {sorted(shas)}")


if __name__ == "__main__":
    main()
