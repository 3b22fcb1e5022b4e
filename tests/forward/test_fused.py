"""The compiled decoder stack (onebit/models/fused.py) on fabricated GGUF files: where it is
chosen, that it computes the same model as the NumPy layers (the unfused int8 path and the float
path, within the activations' rounding), and that it keeps the base contract's bit-for-bit
promises across batches, cache growth and taps."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from onebit.gguf import load_gguf  # noqa: E402
from onebit.gguf.fabricate import fabricate_gguf  # noqa: E402

TOKENS = [1, 7, 3, 9, 2, 4, 11, 5]


@pytest.fixture
def made(tmp_path):
    def make(arch="llama", matrix_type="Q4_1", **options):
        path = tmp_path / f"{arch}-{matrix_type}.gguf"
        fabricate_gguf(path, arch, matrix_type=matrix_type, **options)
        return path
    return make


def test_chosen_where_it_fits(made):
    """The int8 kernel on a file whose layer matrices are all in blocks runs the compiled
    stack by default; the float kernel, or fused=False, runs the NumPy layers; fused=True where
    the stack cannot run is refused with the reason, not ignored."""
    path = made()
    assert load_gguf(path, kernel="int8")._fused is not None
    assert load_gguf(path, kernel="int8", fused=False)._fused is None
    assert load_gguf(path, kernel="numba")._fused is None
    with pytest.raises(ValueError, match="int8 kernel only"):
        load_gguf(path, kernel="numba", fused=True)
    floats = made(matrix_type="F32")
    with pytest.raises(ValueError, match="not every layer matrix"):
        load_gguf(floats, kernel="int8", fused=True)


# Each block kind compiles its own stack (25-36 s on two cores): README line 2 runs the
# Q4_1 cases (SmolLM2's kind), CI's slow step the Q4_0 and Q8_0 ones too.
@pytest.mark.parametrize("arch, matrix_type, options", [
    ("llama", "Q4_1", {}),
    pytest.param("llama", "Q4_0", {"tied": False}, marks=pytest.mark.slow),
    pytest.param("llama", "Q8_0", {"layers": 3}, marks=pytest.mark.slow),
    ("qwen2", "Q4_1", {}),  # q/k/v biases
    ("qwen3", "Q4_1", {"head_dim": 32}),  # q/k norms, head_dim beyond hidden / heads
    pytest.param("qwen3", "Q8_0", {"head_dim": 32}, marks=pytest.mark.slow),
])
def test_same_model_as_the_numpy_layers(made, arch, matrix_type, options):
    """The stack's logits for every row of a verify stay within 1% of the logit range of the
    unfused int8 path (the same integer products; only the float rounding of norms and
    attention differs), with the same top token per row, and no farther from the float path
    than the unfused int8 path is (the activations' rounding is the int8 paths' own error)."""
    path = made(arch, matrix_type, **options)
    fused = load_gguf(path, kernel="int8")
    assert fused._fused is not None
    numpy_layers = load_gguf(path, kernel="int8", fused=False)
    floats = load_gguf(path, kernel="numba")
    a, b, f = (m.verify(TOKENS, 0) for m in (fused, numpy_layers, floats))
    spread = f.max() - f.min()
    assert np.abs(a - b).max() <= 0.01 * spread
    assert np.abs(a - f).max() <= 1.5 * np.abs(b - f).max() + 0.01 * spread
    assert np.array_equal(a.argmax(axis=1), b.argmax(axis=1))


def test_verify_equals_steps_past_the_cache_capacity(made):
    """Past the 64 positions the caches start with (they grow), a verify batch's rows equal,
    bit for bit, steps at the same positions; and after commit_verify(n) the next step's
    logits equal those of stepping the n tokens."""
    path = made("llama", "Q4_1")
    model = load_gguf(path, kernel="int8")
    prompt = [(3 * i + 1) % 80 for i in range(70)]
    model.verify(prompt[:60], 0)
    model.commit_verify(60)
    batch = model.verify(prompt[60:], 60)
    model.commit_verify(4)
    after_partial = model.step(prompt[64], 64)
    model.reset()
    steps = [model.step(t, i) for i, t in enumerate(prompt)]
    assert np.array_equal(batch, np.stack(steps[60:]))
    assert np.array_equal(after_partial, steps[64])


def test_taps_and_hidden_rows_follow_the_stack(made):
    """Layer taps record the residual after each tapped layer for every committed token, the
    same rows whether the tokens came by steps or by one verify, and the last hidden row gives
    the step's logits through lm_head_logits."""
    path = made("llama", "Q4_1", layers=3)
    model = load_gguf(path, kernel="int8")
    model.set_layer_taps([0, 2])
    model.verify(TOKENS, 0)
    model.commit_verify(len(TOKENS))
    batched = model.tapped_rows()
    model.reset()
    model.set_layer_taps([0, 2])
    logits = [model.step(t, i) for i, t in enumerate(TOKENS)]
    assert batched.shape == (len(TOKENS), 2, 64)
    assert np.array_equal(model.tapped_rows(), batched)
    assert not np.array_equal(batched[:, 0], batched[:, 1])
    assert np.array_equal(model.lm_head_logits(model.last_hidden()), logits[-1])


@pytest.fixture(scope="module")
def compiled_here(tmp_path_factory):
    """A fabricated Q4_1 model after a step and a verify through kernels compiled in this
    process, none loaded from the on-disk cache (`ONEBIT_KERNEL_CACHE=0`, no kernel kept from
    an earlier test): what numba knows only of a compile (the parfor diagnostics, the IR's
    globals) is then there to read. Yields the kernels compiled, by key."""
    from onebit.models import fused, int8_kernel

    path = tmp_path_factory.mktemp("fused") / "llama-Q4_1.gguf"
    fabricate_gguf(path, "llama", matrix_type="Q4_1")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ONEBIT_KERNEL_CACHE", "0")
        patch.setattr(fused, "_compiled", {})
        patch.setattr(int8_kernel, "_compiled", {})
        model = load_gguf(path, kernel="int8")
        model.reset()
        model.step(1, 0)
        model.verify([2, 3, 4, 5, 6], 1)
        yield {**fused._compiled, **int8_kernel._compiled}


@pytest.mark.slow  # compiled_here compiles the stack afresh: 40 s of line 2
def test_stack_runs_only_its_own_parallel_loops(compiled_here):
    """Under parallel=True numba makes every slice assignment or array expression a parallel
    region of its own; in the stack's per-row, per-head code each would launch once a row,
    head and layer (4320 regions for a verify of 8 rows on SmolLM2, when the K / V copies were
    slice assignments). The compiled stack's top-level parallel loops are its prange loops
    and nothing else."""
    import inspect

    from onebit.models import fused, int8_kernel

    kernels = compiled_here
    stack = kernels[(("q4_1",) * 4, True, int8_kernel.lanes_form())]
    pranges = inspect.getsource(fused.stack_kernel).count(" in prange(")
    assert pranges >= 9  # the products, the attention and the row-wise steps
    assert stack.signatures
    for signature in stack.signatures:
        parfors = stack.get_metadata(signature)["parfor_diagnostics"].get_parfors()
        assert len(parfors) == pranges


@pytest.mark.slow  # compiled_here compiles the stack afresh: 40 s of line 2
def test_compiled_kernels_hold_no_runtime_addresses(compiled_here):
    """numba stores a compiled function in its on-disk cache only if the machine code holds no
    address of this process ("dynamic globals": a ctypes function pointer, a large global
    array); the parallel kernels held one while their spans asked `numba.get_num_threads()`.
    After a step and a verify through the compiled stack, every kernel the stack and the
    lm_head used (the stack, the products, their range kernels, the quantisers) holds none."""
    kernels = compiled_here
    checked = 0
    for key, kernel in kernels.items():
        for result in getattr(kernel, "overloads", {}).values():
            assert not result.library.has_dynamic_globals, key
            checked += 1
    assert checked >= 5  # the stack, a parallel product, a range kernel, the two quantisers


THREADS_CHILD = """
import numba
import numpy as np

from onebit.models import int8_kernel

threads = int8_kernel.threads_kernel()


@numba.njit(parallel=True)
def ask(out):
    for i in numba.prange(1):
        out[i] = threads()


out = np.zeros(1, np.int64)
seen = []
for n in range(1, numba.config.NUMBA_NUM_THREADS + 1):
    numba.set_num_threads(n)
    ask(out)
    seen.append(int(out[0]))
print(seen)
"""


def test_threads_kernel_follows_set_num_threads():
    """The compiled thread count the products' spans are cut by is numba's, as set now: for
    every count from 1 to the pool's size. Run in a process whose pool has 3 threads, since
    an xdist worker of this suite has a pool of one (tests/conftest.py), where every count
    would read 1 whatever the kernel asked."""
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", THREADS_CHILD], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "NUMBA_NUM_THREADS": "3"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[1,", "2,", "3]"]


def test_rows_of_several_sequences_are_each_sequences_own(made):
    """`sequence_rows`: rows of three sequences in one pass, at their own positions, their
    prompts prefilled in interleaved calls, one of them past the 64 positions the caches start
    with: every row's logits equal, bit for bit, the model's own steps of that sequence alone
    at that position; and the model's own cache is not touched."""
    model = load_gguf(made("llama", "Q4_1"), kernel="int8")
    rng = np.random.default_rng(0)
    seqs = [list(rng.integers(0, model.vocab_size, n)) for n in (5, 70, 12)]
    want = []
    for seq in seqs:  # each sequence alone, stepped
        model.reset()
        want.append([model.step(int(t), p).copy() for p, t in enumerate(seq)])
    model.reset()
    model.step(3, 0)
    after = model.step(5, 1).copy()  # what the model's own next step gives
    model.reset()
    model.step(3, 0)
    stack = model.sequence_stack(3)
    fed = [0, 0, 0]
    # prefill the first 4 tokens of each in one call per sequence, in turn
    for s in (1, 0, 2):
        got = model.sequence_rows(stack, seqs[s][:4], np.arange(4), np.full(4, s))[0]
        for p in range(4):
            assert np.array_equal(got[p], want[s][p]), (s, p)
        fed[s] = 4
    # then a row of every unfinished sequence per pass, until all are done
    while any(f < len(seq) for f, seq in zip(fed, seqs, strict=True)):
        live = [s for s in range(3) if fed[s] < len(seqs[s])]
        got = model.sequence_rows(stack, [seqs[s][fed[s]] for s in live],
                                  [fed[s] for s in live], live)[0]
        for row, s in enumerate(live):
            assert np.array_equal(got[row], want[s][fed[s]]), (s, fed[s])
            fed[s] += 1
    assert np.array_equal(model.step(5, 1), after)  # its own cache was not touched


def test_rows_of_sequences_are_checked(made):
    """A row whose sequence is outside the stack's, a negative position, or position and
    sequence arrays that are not one per row are refused by name before anything runs."""
    model = load_gguf(made("llama", "Q4_1"), kernel="int8")
    stack = model.sequence_stack(2)
    with pytest.raises(ValueError, match=r"not in \[0, 2\)"):
        model.sequence_rows(stack, [1], [0], [2])
    with pytest.raises(ValueError, match="negative"):
        stack.run_rows(np.zeros((1, 64), np.float32), np.array([-1]), np.array([0]),
                       model._rope_cos, model._rope_sin, ())
    with pytest.raises(ValueError, match="one per row"):
        model.sequence_rows(stack, [1, 2], [0], [0, 1])
    with pytest.raises(ValueError, match="sequences must be an integer"):
        model.sequence_stack(0)
