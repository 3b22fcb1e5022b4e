"""Shared fixtures of the GGUF tests: small fabricated files, and the SmolLM2 file when present."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # ggufbytes.py

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path:
    home = Path(os.environ.get("ONEBIT_HOME") or Path.home() / ".cache" / "onebit")
    return home / "models" / SMOLLM2


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 file from the cache; the test skips when it is absent."""
    path = smollm2_path()
    if not path.is_file():
        pytest.skip(f"{path} is absent (fetch it with `onebit pull smollm2`)")
    return path


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: takes over ~20 s on two shared cores (SmolLM2 cross-checks)")
