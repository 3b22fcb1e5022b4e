"""Fixtures of the peer tests."""

import pytest


@pytest.fixture
def quiet_transformers():
    """transformers' per-call warnings off for the test (`hf_run.quiet`), imported when the test
    runs, not when its module is collected (tests/peer_modules.py says why)."""
    from pytest_onebit.peers.hf_run import quiet

    quiet()
