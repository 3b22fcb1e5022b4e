"""Corrupted safetensors files, Q4NX containers and config.json: each load ends in a
ModelError naming the file, or in a model that holds exactly what the file says."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from corrupt import corrupted, corrupted_config, judge_load, pristine, write_model
from fuzzing import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize("container", ["hf", "q4nx"])
@fuzz_settings(quick=40, long=1500)
@given(data=st.data())
def test_corrupted_weights_file(tally, container, data):
    """Truncation, bit flips, dtype / shape / offset swaps, absurd header sizes, dropped or
    doubled tensors in model.safetensors or model.q4nx."""
    _, blob, _ = pristine(container)
    kind, damaged = data.draw(corrupted(blob), label="damage")
    with tempfile.TemporaryDirectory() as root:
        outcome = judge_load(write_model(Path(root), container, weights=damaged))
    tally(f"files: {container} weights ({kind})", outcome)
    tally(f"files: {container} weights", outcome)


@fuzz_settings(quick=40, long=1500)
@given(data=st.data(), container=st.sampled_from(["hf", "q4nx"]))
def test_corrupted_config(tally, data, container):
    """config.json with fields swapped for any JSON value, dropped, cut short, not UTF-8,
    nested deep, or not an object."""
    _, _, text = pristine(container)
    kind, damaged = data.draw(corrupted_config(text), label="damage")
    with tempfile.TemporaryDirectory() as root:
        outcome = judge_load(write_model(Path(root), container, config=damaged))
    tally("files: config.json", outcome)
