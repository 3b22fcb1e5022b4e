"""`verify_last` (docs/contract.md): the last row of `verify`, bit for bit, with the same
pending state, and the loop's prefill uses it without changing what a run emits."""

from __future__ import annotations

import numpy as np

import onebit
from onebit.models import load_model
from onebit.models.fabricate import fabricate_model


def tiny(tmp_path):
    return load_model(fabricate_model(tmp_path / "m", quantized=False))


def test_verify_last_equals_verify_last_row(tmp_path):
    """verify_last returns verify's last row bit for bit (and runs products), and after
    commit_verify the next step's logits equal those after a full verify."""
    a, b = tiny(tmp_path / "a"), tiny(tmp_path / "b")
    tokens = [3, 1, 4, 1, 5, 9, 2]
    full = a.verify(tokens, 0)
    products = b.backend.products
    last = b.verify_last(tokens, 0)
    assert last.shape == (a.vocab_size,) and np.array_equal(last, full[-1])
    assert b.backend.products > products
    a.commit_verify(len(tokens))
    b.commit_verify(len(tokens))
    assert np.array_equal(a.last_hidden_rows(), b.last_hidden_rows())
    assert np.array_equal(a.step(6, len(tokens)), b.step(6, len(tokens)))
    assert np.array_equal(b.verify([2, 2], len(tokens) + 1),
                          a.verify([2, 2], len(tokens) + 1))  # full rows again afterwards


def test_prefill_through_verify_last_emits_the_same(tmp_path):
    """A run whose prefill goes through verify_last emits greedy's tokens."""
    model = tiny(tmp_path)
    prompt = [5, 3, 8, 1, 2, 7, 7, 4, 1, 9]
    want = onebit.greedy(model, prompt, max_tokens=6).tokens
    got = onebit.run(model, None, prompt, max_tokens=6, k=1)
    assert got.tokens == want and got.stats.prefill_batches == 1
