"""The base contract (B1..B8) on a fabricated Gemma 3 GGUF: five sliding layers with a window
of 4 and a global one, so the scripts' passes cross the window and wrap the sliding ring.
float32 on numpy's per-row gemv (the reference) and on the integer kernel the commands run,
which multiplies the file's Q8_0 blocks as they are (the forward's state handling is Gemma 4's,
whose own contract runs every kernel and precision: tests/forward/test_gemma4_contract.py;
numba's float kernel passes here too, 0.7 s, left out for the suite's time)."""

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
    """Every base check on the fabricated Gemma 3, on each kernel."""

    @pytest.fixture(params=("numpy", "int8"))
    def base_factory(self, request, gemma3_gguf):
        if request.param != "numpy":
            pytest.importorskip("numba", reason="the int8 kernel needs the `fast` extra")
        return functools.partial(load_model, gemma3_gguf, dtype="float32", kernel=request.param,
                                 max_batch_rows=8)
