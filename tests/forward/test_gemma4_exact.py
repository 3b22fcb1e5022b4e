"""Exactness of the Gemma 4 forward under speculation: a verify row, and the state that
`commit_verify(n)` leaves (sliding rings, global caches, shared K/V), are bit-identical to
stepping the same tokens one by one, wherever the batch sits against the sliding window's edge
and however often the sliding ring has wrapped.

The tiny model (onebit fabricate gemma4) has a window of 8 and max_batch_rows 8, so a sliding
ring holds 16 slots: positions 3..60 cover batches before the edge, across it, and rings that
have wrapped three times.
"""

from __future__ import annotations

import numpy as np
import pytest

from onebit.models import fabricate_model, load_model

WINDOW = 8
ROWS = 8
TOKENS = [(37 * i + 11) % 256 for i in range(80)]


@pytest.fixture(scope="module")
def gemma4_dirs(tmp_path_factory):
    """"q4nx" / "hf" -> the tiny Gemma 4 in that container."""
    return {container: fabricate_model(tmp_path_factory.mktemp(f"gemma4-{container}"), "gemma4",
                                       quantized=container == "q4nx")
            for container in ("q4nx", "hf")}


def _state(model):
    """What the next step reads: per layer, its visible keys and values (copies)."""
    return [tuple(a.copy() for a in model.visible_kv(layer)) for layer in range(model.layer_count)]


def _stepped(model, tokens):
    """Step `tokens` from a reset; per position the logits, hidden row and state after it."""
    model.reset()
    out = []
    for pos, t in enumerate(tokens):
        logits = model.step(t, pos)
        out.append((logits, model.last_hidden(), _state(model)))
    return out


def _assert_same_state(got, want, where):
    assert len(got) == len(want)
    for layer, ((k, v), (k_want, v_want)) in enumerate(zip(got, want, strict=True)):
        assert k.shape == k_want.shape, (where, layer)
        assert np.array_equal(k, k_want) and np.array_equal(v, v_want), (where, layer)


def _prefill(model, tokens, pos):
    """Step tokens[:pos] from a reset; returns a function that puts the model back to that
    point (its caches and committed length: everything a pass reads), so each case starts
    from the same stepped prefix without stepping it again."""
    model.reset()
    for p, t in enumerate(tokens[:pos]):
        model.step(t, p)
    k = {layer: a.copy() for layer, a in model._k.items()}
    v = {layer: a.copy() for layer, a in model._v.items()}

    def restore():
        model.reset()
        model._k = {layer: a.copy() for layer, a in k.items()}
        model._v = {layer: a.copy() for layer, a in v.items()}
        model._length = pos

    return restore


@pytest.mark.parametrize(("kernel", "dtype", "container"), [
    ("numba", "float32", "q4nx"), ("numpy", "float32", "q4nx"), ("numba", "float64", "hf"),
    ("numpy", "float64", "hf"),
])
@pytest.mark.parametrize("pos", [3, 6, 21, 52])
def test_every_verify_width_is_bit_identical_to_stepping(gemma4_dirs, kernel, dtype, container,
                                                         pos):
    """For R = 1..8 rows at `pos` (3: inside the first window; 6: across its edge; 21 and 52:
    rings wrapped once and three times): every verify row's logits, and after
    commit_verify(R) the hidden rows, every layer's visible K/V and the next step's logits,
    equal stepping's bit for bit, on both kernels, both precisions and both containers."""
    model = load_model(gemma4_dirs[container], kernel=kernel, dtype=dtype, max_batch_rows=ROWS)
    tokens = TOKENS[: pos + ROWS + 1]
    ref = _stepped(model, tokens)
    restore = _prefill(model, tokens, pos)
    for rows in range(1, ROWS + 1):
        restore()
        logits = model.verify(tokens[pos : pos + rows], pos)
        for i in range(rows):
            assert np.array_equal(logits[i], ref[pos + i][0]), (rows, i)
        model.commit_verify(rows)
        hidden = model.last_hidden_rows()
        for i in range(rows):
            assert np.array_equal(hidden[i], ref[pos + i][1]), (rows, i)
        _assert_same_state(_state(model), ref[pos + rows - 1][2], rows)
        assert np.array_equal(model.step(tokens[pos + rows], pos + rows), ref[pos + rows][0])


@pytest.mark.parametrize("pos", range(1, 2 * (WINDOW + ROWS) + 3, 2))
def test_rollbacks_across_the_window_edge_are_exact(gemma4_dirs, pos):
    """A full-width verify at every other position from 1 to past the second wrap of the sliding
    ring, committed at every n in 0..8, leaves exactly the state of stepping n tokens, and the
    next step's logits are stepping's: the rows a rejected draft wrote into the ring (and into
    the global caches the shared layers read) never leak into a later pass, including when the
    batch straddles the window's edge or the ring's seam."""
    model = load_model(gemma4_dirs["q4nx"], max_batch_rows=ROWS)
    tokens = TOKENS[: pos + ROWS + 1]
    ref = _stepped(model, tokens)
    restore = _prefill(model, tokens, pos)
    for n in range(ROWS + 1):
        restore()
        model.verify(tokens[pos : pos + ROWS], pos)
        model.commit_verify(n)
        if n:
            _assert_same_state(_state(model), ref[pos + n - 1][2], n)
        assert np.array_equal(model.step(tokens[pos + n], pos + n), ref[pos + n][0]), n


def test_a_rejected_batch_then_a_different_one_is_exact(gemma4_dirs):
    """Drafts rejected at the window's edge are overwritten by different tokens: after
    verify(A) + commit_verify(2), verify(B) + commit_verify(8) and a step, the logits are those
    of stepping A[:2] + B, bit for bit (no slot keeps a rejected row's keys)."""
    model = load_model(gemma4_dirs["q4nx"], max_batch_rows=ROWS)
    pos = 5
    a = [200 + i for i in range(ROWS)]
    b = [(7 * i + 1) % 256 for i in range(ROWS)]
    truth = TOKENS[:pos] + a[:2] + b + [9]
    ref = _stepped(model, truth)
    _prefill(model, TOKENS, pos)
    model.verify(a, pos)
    model.commit_verify(2)
    model.verify(b, pos + 2)
    model.commit_verify(ROWS)
    _assert_same_state(_state(model), ref[pos + 2 + ROWS - 1][2], "after b")
    assert np.array_equal(model.step(9, pos + 2 + ROWS), ref[-1][0])


def test_the_sliding_window_is_the_last_window_positions(gemma4_dirs):
    """A sliding layer's visible keys after L committed tokens are positions L-7 .. L-1 (the
    next query is the 8th), a global layer's all L, and a KV-shared layer reads exactly its
    source's (layers 3 and 4 share those of layers 1 and 2)."""
    model = load_model(gemma4_dirs["hf"])
    for p, t in enumerate(TOKENS[:30]):
        model.step(t, p)
    c = model.config
    assert c.kv_sources == (0, 1, 2, 1, 2)
    for layer in range(model.layer_count):
        keys, values = model.visible_kv(layer)
        expected = WINDOW - 1 if c.layer_types[layer] == "sliding_attention" else 30
        assert keys.shape == (c.kv_heads[layer], expected, c.head_dims[layer])
        source_keys, _ = model.visible_kv(c.kv_sources[layer])
        assert np.array_equal(keys, source_keys)


def test_what_a_head_reads_is_what_the_forward_computed(gemma4_dirs):
    """A head's view of the target agrees with the forward bit for bit: lm_head_logits of
    the last hidden row is the step's (soft-capped) logits, lm_head_logits of a verify's
    committed hidden rows are its logits, and final_norm of the last layer's tapped output is
    the last hidden row."""
    model = load_model(gemma4_dirs["q4nx"])
    model.set_layer_taps([model.layer_count - 1])
    for pos, t in enumerate(TOKENS[:12]):
        logits = model.step(t, pos)
    assert np.array_equal(model.lm_head_logits(model.last_hidden()), logits)
    assert np.abs(logits).max() < model.config.final_logit_softcapping
    verified = model.verify(TOKENS[12:17], 12)
    model.commit_verify(5)
    assert np.array_equal(model.lm_head_logits(model.last_hidden_rows()), verified)
    tapped = model.tapped_rows()[:, 0]
    assert np.array_equal(model.final_norm(tapped[-1:])[0], model.last_hidden())
