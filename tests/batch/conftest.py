"""Fixtures of the batch tests: SmolLM2's verified GGUF, skipped with the reason when absent."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """SmolLM2's verified GGUF; skipped with the reason when absent and not pullable."""
    from onebit.hub import skip_unless_cached

    return skip_unless_cached("smollm2")
