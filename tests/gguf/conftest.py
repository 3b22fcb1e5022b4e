"""Shared fixtures of the GGUF tests: small fabricated files, and the SmolLM2 file when present."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # ggufbytes.py

@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 file from the cache, checked by its sha256 like every
    other user of the cache; the test skips with the reason when it is absent and offline."""
    from onebit.hub import skip_unless_cached

    return skip_unless_cached("smollm2")


@pytest.fixture(scope="session")
def gemma3() -> Path:
    """The Gemma 3 270M Q4_K_M file from the cache (`onebit pull gemma3`), checked by its
    sha256; the test skips with the reason when it is absent and offline."""
    from onebit.hub import skip_unless_cached

    return skip_unless_cached("gemma3")
