"""Exact batch invariance of the forward for every verify width R = 1..16: a verify row, and the
state it leaves, are bit-identical to stepping the same tokens one by one."""

from __future__ import annotations

import numpy as np
import pytest
from matrix import cover

from onebit.models import load_model

MAX_ROWS = 16
TOKENS = [(37 * i + 11) % 256 for i in range(80)]


def _state(model):
    """Copies of the committed state: KV rows up to the committed length, GDN conv / S."""
    n = model.committed_length
    kv = [cache[:, :n].copy() for cache in model._k + model._v]
    gdn = [(s.conv.copy(), s.recurrent.copy()) for s in model._gdn]
    return kv, gdn


def _stepped(model, tokens):
    """Step `tokens` from a reset; per position the logits, hidden row and state after it."""
    model.reset()
    out = []
    for pos, t in enumerate(tokens):
        logits = model.step(t, pos)
        out.append((logits, model.last_hidden(), _state(model)))
    return out


def _assert_same_state(got, want):
    kv, gdn = got
    kv_want, gdn_want = want
    assert len(kv) == len(kv_want) and len(gdn) == len(gdn_want)
    for a, b in zip(kv, kv_want, strict=True):
        assert np.array_equal(a, b)
    for (conv, s), (conv_want, s_want) in zip(gdn, gdn_want, strict=True):
        assert np.array_equal(conv, conv_want) and np.array_equal(s, s_want)


@pytest.mark.parametrize("kernel, dtype, pos",
                         cover(["numba", "numba-float", "numpy"], ["float32", "float64"], [3, 55]))
def test_every_verify_width_is_bit_identical_to_stepping(model_dirs, kind, kernel, dtype, pos):
    """For R = 1..16 rows at `pos` (3, and 55 where the batch runs past the KV cache's first
    capacity of 64): every verify row's logits, and after commit_verify(R) the hidden rows, the
    KV cache, the GDN conv and recurrent state and the next step's logits, equal stepping's bit
    for bit, on both families, both precisions and every kernel: "numba" multiplies the packed
    Q4NX blocks (q4nx_kernel.py), "numba-float" the float32 cache, "numpy" by gemv."""
    model = load_model(model_dirs[kind, "q4nx"], kernel=kernel, dtype=dtype,
                       max_batch_rows=MAX_ROWS)
    tokens = TOKENS[: pos + MAX_ROWS + 1]
    ref = _stepped(model, tokens)
    for rows in range(1, MAX_ROWS + 1):
        model.reset()
        for p, t in enumerate(tokens[:pos]):
            model.step(t, p)
        logits = model.verify(tokens[pos : pos + rows], pos)
        for i in range(rows):
            assert np.array_equal(logits[i], ref[pos + i][0]), (rows, i)
        model.commit_verify(rows)
        hidden = model.last_hidden_rows()
        for i in range(rows):
            assert np.array_equal(hidden[i], ref[pos + i][1]), (rows, i)
        _assert_same_state(_state(model), ref[pos + rows - 1][2])
        assert np.array_equal(model.step(tokens[pos + rows], pos + rows), ref[pos + rows][0])


def test_partial_commit_of_a_wide_verify_is_exact(model_dirs, kind):
    """A 16-row verify committed at every n in 0..16 leaves exactly the state of stepping n
    tokens (KV cache, GDN state), and the next step's logits are stepping's, bit for bit: rows
    a verify wrote past the committed length never leak into a later pass."""
    model = load_model(model_dirs[kind, "q4nx"], max_batch_rows=MAX_ROWS)
    pos = 4
    tokens = TOKENS[: pos + MAX_ROWS + 1]
    ref = _stepped(model, tokens)
    for n in range(MAX_ROWS + 1):
        model.reset()
        for p, t in enumerate(tokens[:pos]):
            model.step(t, p)
        model.verify(tokens[pos : pos + MAX_ROWS], pos)
        model.commit_verify(n)
        _assert_same_state(_state(model), ref[pos + n - 1][2])
        assert np.array_equal(model.step(tokens[pos + n], pos + n), ref[pos + n][0]), n


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rope_table_rows_do_not_depend_on_how_they_were_filled(model_dirs, kind, dtype):
    """The cached cos / sin row of every position is the direct per-position value
    (cos / sin of position * inv_freq in float64, rounded to the compute dtype), whether the
    table was filled one step at a time or 16 positions at once by a verify (and grown past
    its first 64 rows)."""
    stepped = load_model(model_dirs[kind, "q4nx"], dtype=dtype, max_batch_rows=MAX_ROWS)
    batched = load_model(model_dirs[kind, "q4nx"], dtype=dtype, max_batch_rows=MAX_ROWS)
    for pos, t in enumerate(TOKENS[:70]):
        stepped.step(t, pos)
    for pos in range(0, 70, MAX_ROWS):
        rows = min(MAX_ROWS, 70 - pos)
        batched.verify(TOKENS[pos : pos + rows], pos)
        batched.commit_verify(rows)
    for model in (stepped, batched):
        assert model._rope_len == 70
    for position in range(70):
        angles = position * stepped._inv_freq
        cos, sin = np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)
        for model in (stepped, batched):
            assert np.array_equal(model._rope_cos[position], cos), position
            assert np.array_equal(model._rope_sin[position], sin), position


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rope_of_many_rows_equals_each_row_alone(model_dirs, kind, dtype):
    """Rotating R rows at once (R = 1..16, odd head counts included) gives each row the bits of
    rotating it alone at its own position: the rotation is elementwise, so the batch shape
    cannot change a value."""
    model = load_model(model_dirs[kind, "q4nx"], dtype=dtype, max_batch_rows=MAX_ROWS)
    D = model.config.head_dim
    rng = np.random.default_rng(7)
    pos = 9
    model._rope_table(pos + MAX_ROWS)
    for heads in (1, 3, model.config.num_attention_heads):
        x = rng.standard_normal((MAX_ROWS, heads, D)).astype(dtype)
        alone = np.stack([model._rope(x[i : i + 1], pos + i)[0] for i in range(MAX_ROWS)])
        for rows in range(1, MAX_ROWS + 1):
            assert np.array_equal(model._rope(x[:rows], pos), alone[:rows]), (heads, rows)
