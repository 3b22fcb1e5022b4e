"""What refusing non-finite weights costs at load, measured A B A B with spreads.

    .venv/bin/python benchmarks/load_check_ab.py [--rounds 5]

Fabricates the 46 M parameter qwen3 (hidden 1024, 4 layers, intermediate 2816, vocab 8192) as
a Q4NX container and as a HuggingFace float checkpoint, then loads each with the finite check
(A) and with it replaced by a no-op (B), alternating, and prints the median [min .. max] load
time of each arm, the difference, and the check alone. A Q4NX load unpacks nothing (weights
are unpacked on first use), so its check is weighed against a bare load, the harshest
comparison; the first decode step, which unpacks every weight, is shown for scale.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from onebit.models import fabricate_model, load_model, weights

SIZES = dict(hidden_size=1024, num_hidden_layers=4, intermediate_size=2816, vocab_size=8192)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} [{min(values):.1f} .. {max(values):.1f}] ms"


def timed_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return 1000 * (time.perf_counter() - start)


def measure(path: Path, rounds: int) -> str:
    """One container's line: load with and without the check, A B A B."""
    real_check = weights.check_finite
    arms: dict[str, list[float]] = {"check": [], "no check": []}
    load_model(path)  # page cache warm for both arms
    try:
        for _ in range(rounds):
            for arm in arms:
                weights.check_finite = real_check if arm == "check" else (lambda *a: None)
                arms[arm].append(timed_ms(lambda: load_model(path)))
    finally:
        weights.check_finite = real_check
    model = load_model(path)

    def check_all() -> None:
        for name in model.weights.names():
            real_check(name, model.weights._stored[name], model.dtype, "unsigned")

    alone = [timed_ms(check_all) for _ in range(rounds)]
    first_step = timed_ms(lambda: model.step(1, 0))
    a, b = (statistics.median(v) for v in arms.values())
    return (f"load with check {spread(arms['check'])}, without {spread(arms['no check'])}; "
            f"difference {a - b:+.1f} ms; the check alone {spread(alone)}; first step "
            f"(unpacks every weight, first kernel calls) {first_step:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for quantized in (True, False):
            path = fabricate_model(Path(tmp) / f"q{quantized}", "qwen3", quantized=quantized,
                                   **SIZES)
            name = "Q4NX" if quantized else "HF float32"
            print(f"{name} 46 M: {measure(path, args.rounds)}")


if __name__ == "__main__":
    main()
