"""The PLE weight cache of the Gemma 4 forward: the per-layer gates and projections, the model
projection and the PLE table's bands are prepared once and kept; `ONEBIT_PLE_PER_TOKEN=1`
prepares them on every use instead, and changes no bit of the output."""

from __future__ import annotations

import numpy as np
import pytest

import onebit
from onebit.models import PLE_ENV, UNPACK_ENV, fabricate_model, load_model

PROMPT = [1, 40, 77, 200, 3, 250, 9]


@pytest.fixture(scope="module")
def gemma4_dir(tmp_path_factory):
    return fabricate_model(tmp_path_factory.mktemp("gemma4"), "gemma4")


def _logits(model, tokens):
    model.reset()
    return np.stack([model.step(t, pos) for pos, t in enumerate(tokens)])


def test_per_token_preparation_changes_no_bit(gemma4_dir, monkeypatch):
    """Stepping a prompt and a 16-row verify give identical logits with the PLE weights
    cached, prepared every token (ONEBIT_PLE_PER_TOKEN=1), and with every weight unpacked
    every token (ONEBIT_UNPACK_PER_TOKEN=1), and the three greedy texts are equal."""
    cached = load_model(gemma4_dir, max_batch_rows=16)
    monkeypatch.setenv(PLE_ENV, "1")
    per_token = load_model(gemma4_dir, max_batch_rows=16)
    monkeypatch.delenv(PLE_ENV)
    monkeypatch.setenv(UNPACK_ENV, "1")
    unpacked = load_model(gemma4_dir, max_batch_rows=16)
    assert (cached.ple_per_token, per_token.ple_per_token) == (False, True)
    want = _logits(cached, PROMPT)
    texts = []
    for model in (cached, per_token, unpacked):
        assert np.array_equal(_logits(model, PROMPT), want)
        model.reset()
        assert np.array_equal(model.verify(PROMPT + PROMPT[:9], 0)[: len(PROMPT)], want)
        texts.append(onebit.greedy(model, PROMPT, max_tokens=12).tokens)
    assert texts[0] == texts[1] == texts[2]


def test_the_cache_prepares_each_ple_weight_and_band_once(gemma4_dir):
    """With the cache, once every weight and the bands of the tokens seen are prepared, more
    tokens from those bands prepare nothing; a token from a new band prepares exactly that
    band (one unpack)."""
    model = load_model(gemma4_dir)
    _logits(model, PROMPT)  # tokens in bands 0, 1, 2, 6, 7
    before = model.weights.unpacks
    _logits(model, [2, 41, 78, 201, 251, 8])  # the same bands
    assert model.weights.unpacks == before
    model.step(100, model.committed_length)  # band 3: new
    assert model.weights.unpacks == before + 1


def test_per_token_preparation_unpacks_every_ple_weight_every_pass(gemma4_dir):
    """With ONEBIT_PLE_PER_TOKEN on, each pass prepares the model projection and every layer's
    gate and projection once (2 L + 1 unpacks) and each row's PLE band once: the slow arm
    really does the work the cache saves."""
    model = load_model(gemma4_dir)
    model.ple_per_token = True
    _logits(model, PROMPT)
    L = model.layer_count
    before = model.weights.unpacks
    model.step(5, model.committed_length)
    assert model.weights.unpacks - before == 2 * L + 1 + 1
    before = model.weights.unpacks
    model.verify([1, 2, 3, 4], model.committed_length)
    assert model.weights.unpacks - before == 2 * L + 1 + 4
