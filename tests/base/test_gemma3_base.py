"""The base contract (B1..B8) on a fabricated Gemma 3 GGUF: five sliding layers with a window
of 4 and a global one, so the scripts' passes cross the window and wrap the sliding ring.
float32 on numpy's per-row kernel (the forward's state handling is Gemma 4's, whose own
contract runs every kernel and precision: tests/forward/test_gemma4_contract.py)."""

from __future__ import annotations

import functools

import pytest

from onebit.gguf.fabricate import fabricate_gguf
from onebit.models import load_model
from pytest_onebit import BaseContract


@pytest.fixture(scope="session")
def gemma3_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("base-gemma3") / "tiny.gguf"
    fabricate_gguf(path, "gemma3", layers=6, hidden=64, heads=4, kv_heads=2, head_dim=16,
                   ffn=96, vocab=80, fields={"gemma3.final_logit_softcapping": 20.0})
    return path


class TestGemma3Base(BaseContract):
    """Every base check on the fabricated Gemma 3."""

    @pytest.fixture
    def base_factory(self, gemma3_gguf):
        return functools.partial(load_model, gemma3_gguf, dtype="float32", kernel="numpy",
                                 max_batch_rows=8)
