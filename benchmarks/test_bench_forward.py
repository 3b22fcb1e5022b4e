"""pytest-benchmark suite for the NumPy forward (not part of the test run).

    .venv/bin/python -m pytest benchmarks/test_bench_forward.py --benchmark-only

On a fabricated Q4NX qwen3 of about 56 M parameters (memory-bound per token): a verify batch
of 1 row (the work of one step, which cannot be repeated at one position), 2, 4, 8 and 16
rows, and 16 tokens of plain and of speculative decode (perfect head, k = 7). Read the rows
side by side from one run; benchmarks/forward_ab.py gives the same comparisons as
alternated A B A B ratios.
"""

import pytest

import onebit
from onebit.models import fabricate_model, load_model
from pytest_onebit import Oracle, perfect_head

PROMPT = [11, 7, 300, 42, 9, 1000, 5, 77]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = fabricate_model(tmp_path_factory.mktemp("bench"), "qwen3", hidden_size=1024,
                           num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=8,
                           head_dim=64, intermediate_size=2816, vocab_size=8192)
    m = load_model(path, max_batch_rows=16)
    onebit.greedy(m, PROMPT, max_tokens=2)  # compile the kernels, unpack the weights
    return m


@pytest.mark.parametrize("rows", [1, 2, 4, 8, 16])
def test_verify(benchmark, model, rows):
    """A verify batch of `rows` rows, dropped afterwards (commit_verify(0))."""
    onebit.greedy(model, PROMPT, max_tokens=1)
    pos = model.committed_length

    def batch():
        model.verify([5] * rows, pos)
        model.commit_verify(0)

    benchmark(batch)


def test_plain_decode(benchmark, model):
    """16 tokens of plain greedy decode."""
    benchmark.pedantic(lambda: onebit.greedy(model, PROMPT, max_tokens=16), rounds=3)


def test_speculative_decode(benchmark, model):
    """The same 16 tokens with a perfect head at k = 7 (2 batches of 8 rows)."""
    oracle = Oracle.from_greedy(model, PROMPT, 25)
    benchmark.pedantic(lambda: onebit.run(model, perfect_head(oracle), PROMPT, max_tokens=16,
                                          k=7), rounds=3)
