"""The base contract (B1..B8) on a fabricated Gemma 2 GGUF and a fabricated Phi-3 GGUF, float32.
Gemma 2: two sliding layers with a window of 4 and two global ones, attention soft-capping at 5
(it bites on this file), so the scripts' passes cross the window, wrap the sliding ring and go
through the capped softmax, on numpy's per-row gemv (the reference kernel; the integer kernel
passes too, 1.5 s, left out for the suite's time: Gemma 3's base runs it on the same forward).
Phi-3: fused qkv and gate_up cut by rows at load, an untied output, on numpy's gemv and on the
integer kernel the commands run, where the cut Q8_0 blocks go through the compiled stack
(fused.py; its compile is the one test_fused.py shares). The forwards' state handling is Gemma
4's and the Llama family's, whose own contracts run every kernel and precision."""

from __future__ import annotations

import functools

import pytest

from onebit.gguf.fabricate import fabricate_gguf
from onebit.models import load_model
from pytest_onebit import BaseContract

SIZES = dict(layers=4, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=96, vocab=80)


@pytest.fixture(scope="session")
def gemma2_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("base-gemma2") / "tiny.gguf"
    fabricate_gguf(path, "gemma2", fields={"gemma2.attn_logit_softcapping": 5.0,
                                           "gemma2.final_logit_softcapping": 20.0}, **SIZES)
    return path


@pytest.fixture(scope="session")
def phi3_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("base-phi3") / "tiny.gguf"
    fabricate_gguf(path, "phi3", tied=False, **{**SIZES, "layers": 2, "head_dim": None})
    return path


class TestGemma2Base(BaseContract):
    """Every base check on the fabricated Gemma 2."""

    @pytest.fixture
    def base_factory(self, gemma2_gguf):
        return functools.partial(load_model, gemma2_gguf, dtype="float32", kernel="numpy",
                                 max_batch_rows=8)


class TestPhi3Base(BaseContract):
    """Every base check on the fabricated Phi-3."""

    @pytest.fixture(params=("numpy", "int8"))
    def base_factory(self, request, phi3_gguf):
        if request.param != "numpy":
            pytest.importorskip("numba", reason="the int8 kernel needs the `fast` extra")
        return functools.partial(load_model, phi3_gguf, dtype="float32", kernel=request.param,
                                 max_batch_rows=8)
