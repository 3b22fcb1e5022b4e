"""Fixtures for the forward tests: tiny fabricated models, written once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from onebit.models import fabricate_model, load_model

KINDS = ("qwen3", "qwen3_5", "llama")


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """(kind, "q4nx" | "hf") -> a directory holding that tiny model."""
    dirs = {}
    for kind in KINDS:
        for container in ("q4nx", "hf"):
            path = tmp_path_factory.mktemp(f"{kind}-{container}")
            dirs[kind, container] = fabricate_model(path, kind, quantized=container == "q4nx")
    return dirs


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def q4_model(model_dirs, kind):
    """A fresh quantised tiny model of each kind."""
    return load_model(model_dirs[kind, "q4nx"])
