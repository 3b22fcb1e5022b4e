"""pytest-benchmark suite for the loop on the toy base (not part of the test run).

    .venv/bin/python -m pytest benchmarks/test_bench_loop.py --benchmark-only

Compare the rows side by side from one run: a speculative run at k = 7 against plain greedy
on the same toy (the toy charges per row, so the ratio shows the loop's bookkeeping, not a
speed-up: the pass counts are what speculation saves on a real base).
"""

import pytest

import onebit
from pytest_onebit import Oracle, ToyBase, check_loop, perfect_head

PROMPT = [3, 1, 4, 1, 5]
N = 256


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
def test_speculative_run(benchmark, flavour):
    """One contract run: N = 256, k = 7, perfect head, 8-row toy."""
    oracle = Oracle.from_greedy(ToyBase(), PROMPT, N + 9)

    def go():
        return onebit.run(ToyBase(), perfect_head(oracle, flavour), PROMPT, max_tokens=N, k=7)

    result = benchmark(go)
    assert len(result.tokens) == N


def test_plain_greedy(benchmark):
    """Plain greedy decode of the same 256 tokens on the same toy."""
    result = benchmark(lambda: onebit.greedy(ToyBase(), PROMPT, max_tokens=N))
    assert len(result.tokens) == N


def test_whole_contract(benchmark):
    """check_loop(onebit.run): every check on every standard scenario, in-process."""
    report = benchmark.pedantic(lambda: check_loop(onebit.run), rounds=5, iterations=1)
    assert report.ok
