"""Drafts derived from a target file (onebit/gguf/derive.py): the cut draft is the target's
first blocks byte for byte, the random draft is the target's layout with other numbers, both
keep every metadata field (the tokenizer's included) and both load and run in onebit."""

from __future__ import annotations

import numpy as np
import pytest

from onebit.gguf import read_gguf
from onebit.gguf.derive import cut_layers, derived_drafts, randomize
from onebit.gguf.fabricate import fabricate_gguf
from onebit.gguf.reader import read_metadata
from onebit.models import load_model

TOKENS = [f"tok{i}" for i in range(80)]
# string, float and integer fields of the kinds a vocabulary carries (no tokenizer.ggml.model:
# the fabricated weights have no tokenizer to build)
FIELDS = {"tokenizer.ggml.tokens": TOKENS, "tokenizer.ggml.scores": [0.5] * 80,
          "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2}


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "target.gguf"
    fabricate_gguf(path, "llama", matrix_type="Q4_1", embed_type="Q8_0", layers=4,
                   fields=FIELDS, seed=3)
    return path


def tensors(path):
    return {t.name: (t.tensor_type.name, tuple(t.shape), bytes(t.data))
            for t in read_metadata(path)[1].tensors}


def test_cut_keeps_the_first_blocks_byte_for_byte(target, tmp_path):
    """The cut draft holds exactly the target's tensors outside blocks 2 and up, the same
    bytes, types and shapes; its metadata is the target's with block_count = 2; onebit loads
    it as a two-layer model and runs it."""
    draft = cut_layers(target, tmp_path / "cut.gguf", 2)
    want = {n: v for n, v in tensors(target).items()
            if not n.startswith(("blk.2.", "blk.3."))}
    assert tensors(draft) == want
    meta_t, meta_d = read_metadata(target)[2], read_metadata(draft)[2]
    assert meta_d.pop("llama.block_count") == 2 and meta_t.pop("llama.block_count") == 4
    assert meta_d == meta_t
    assert read_gguf(draft).config["num_hidden_layers"] == 2
    assert np.isfinite(load_model(draft, kernel="numpy").step(5, 0)).all()


def test_random_draft_keeps_the_layout_and_changes_every_tensor(target, tmp_path):
    """The random draft has every tensor of the target, same name, type and shape, none with
    the target's bytes; its metadata (tokenizer included) is the target's; onebit loads it
    and its logits are finite and unlike the target's."""
    draft = randomize(target, tmp_path / "random.gguf", seed=1)
    got, want = tensors(draft), tensors(target)
    assert {n: v[:2] for n, v in got.items()} == {n: v[:2] for n, v in want.items()}
    assert all(got[n][2] != want[n][2] for n in want)
    assert read_metadata(draft)[2] == read_metadata(target)[2]
    la = load_model(draft, kernel="numpy").step(5, 0)
    lb = load_model(target, kernel="numpy").step(5, 0)
    assert np.isfinite(la).all()
    assert not np.allclose(la, lb)


def test_random_draft_is_reproducible_by_seed(target, tmp_path):
    """The same seed writes the same file; another seed another one."""
    one = randomize(target, tmp_path / "a.gguf", seed=5).read_bytes()
    assert randomize(target, tmp_path / "b.gguf", seed=5).read_bytes() == one
    assert randomize(target, tmp_path / "c.gguf", seed=6).read_bytes() != one


def test_bad_cut_is_refused_and_leaves_nothing(target, tmp_path):
    """keep outside 1..block_count is a ValueError naming the range; no file is left."""
    for keep in (0, 5):
        with pytest.raises(ValueError, match=r"1\.\.4"):
            cut_layers(target, tmp_path / "cut.gguf", keep)
    assert list(tmp_path.glob("*cut*")) == []


def test_derived_drafts_are_cached_by_the_targets_sha256(target, tmp_path, monkeypatch):
    """`derived_drafts` writes the half and garbage drafts once under $ONEBIT_HOME/drafts,
    in a folder named by the target's sha256; a second call reuses them."""
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path / "home"))
    first = derived_drafts(target)
    assert first["half"].name == "cut-2-of-4.gguf"
    assert all(p.parent.parent == tmp_path / "home" / "drafts" for p in first.values())
    stamps = {k: p.stat().st_mtime_ns for k, p in first.items()}
    again = derived_drafts(target)
    assert again == first
    assert {k: p.stat().st_mtime_ns for k, p in again.items()} == stamps
