"""The least time a decode step can take on this machine: the bytes of a GGUF's matrices, each
read once a token, over the memory's streaming read bandwidth (issue 66: is a decode target
reachable at all?).

    .venv/bin/python benchmarks/read_floor.py [--model gemma3|smollm2|FILE.gguf] [--threads 2]
        [--rounds 5] [--mib 1024]

A decode step reads every matrix of the model once (a tied embedding once, as the lm_head; the
embedding's one row is nothing beside it), whatever the engine: llama.cpp and onebit both read
the file's quantised blocks as they are. The bandwidth is measured here, the way a matrix-vector
product reads its weight: `threads` threads each summing their share of a `--mib` MiB buffer
(far larger than the caches) as 64-bit words, compiled with numba, the buffer touched once
before timing. Prints the bytes, each round's GB/s, and the floor in ms a token (bytes / GB/s),
median [min .. max]. `llama_server_speed.py` prints the same floor beside both engines.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def weight_bytes(path: Path) -> int:
    """The bytes a decode step reads from `path`'s GGUF: every 2-D tensor's stored bytes (the
    file's own blocks), the token embedding counted once whether or not the lm_head is tied to
    it (tied: it is the lm_head; untied: only one row of it is read)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    names = {t.name for t in reader.tensors}
    total = 0
    for tensor in reader.tensors:
        if len(tensor.shape) != 2:
            continue
        if tensor.name == "token_embd.weight" and "output.weight" in names:
            continue  # untied: a step reads one row of it
        total += int(tensor.n_bytes)
    return total


def _reader(threads: int):
    import numpy as np
    from numba import njit, prange, set_num_threads

    set_num_threads(threads)

    @njit(parallel=True, nogil=True)
    def read_all(words):  # pragma: no cover - compiled
        parts, n = words.shape
        sums = np.zeros(parts, np.uint64)
        for p in prange(parts):  # one contiguous row a thread, a loop LLVM vectorises
            acc = np.uint64(0)
            for i in range(n):
                acc += words[p, i]
            sums[p] = acc
        return sums.sum()

    return read_all


def read_bandwidth(threads: int, mib: int, rounds: int) -> list[float]:
    """GB/s of `rounds` streaming reads of a `mib` MiB buffer by `threads` threads."""
    import numpy as np

    words = np.ones((threads, mib * (1 << 20) // 8 // threads), np.uint64)
    read_all = _reader(threads)
    read_all(words)  # compiles; the pages are already touched by np.ones
    speeds = []
    for _ in range(rounds):
        start = time.perf_counter()
        got = read_all(words)
        elapsed = time.perf_counter() - start
        if got != words.size:
            raise SystemExit(f"the read summed {got}, not {words.size}")
        speeds.append(words.nbytes / elapsed / 1e9)
    return speeds


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


def main() -> int:
    from onebit.hub import MODELS, model_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mib", type=int, default=1024)
    args = parser.parse_args()
    model = model_path(args.model, pull=True) if args.model in MODELS else Path(args.model)
    size = weight_bytes(model)
    speeds = read_bandwidth(args.threads, args.mib, args.rounds)
    floors = [size / s / 1e6 for s in speeds]
    print(f"{model.name}: {size / 1e6:.1f} MB of matrices read a token")
    print(f"streaming read, {args.threads} threads: {spread(speeds)} GB/s")
    print(f"floor: {spread(floors)} ms a token")
    return 0


if __name__ == "__main__":
    sys.exit(main())
