"""Fixtures for the head tests: tiny fabricated targets (written once per session) and a base
wrapper that counts what the loop asked of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from onebit.heads import add_own_mtp
from onebit.models import fabricate_model, load_model

KINDS = ("qwen3", "qwen3_5")


@pytest.fixture(scope="session")
def target_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """kind -> a directory holding a tiny float (HF-layout) model of that kind; the Qwen3.5
    one in the layout Qwen publishes, with one MTP layer of its own."""
    dirs = {kind: fabricate_model(tmp_path_factory.mktemp(kind), kind, quantized=False)
            for kind in KINDS}
    add_own_mtp(dirs["qwen3_5"], layers=1, seed=1)
    return dirs


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def target(target_dirs, kind):
    """A fresh tiny target of each kind."""
    return load_model(target_dirs[kind])


@pytest.fixture
def qwen3(target_dirs):
    """A fresh tiny dense Qwen3 target (the one whose greedy text repeats)."""
    return load_model(target_dirs["qwen3"])


class CountingBase:
    """Wraps a base model and counts every pass the loop makes, after the prompt's steps."""

    def __init__(self, base) -> None:
        self.base = base
        self.steps = self.batches = self.batch_rows = self.committed = 0
        self.verified: list[int] = []  # rows of each verify

    def __getattr__(self, name):
        return getattr(self.base, name)

    @property
    def vocab_size(self) -> int:
        return self.base.vocab_size

    def reset(self) -> None:
        self.steps = self.batches = self.batch_rows = self.committed = 0
        self.verified = []
        self.base.reset()

    def step(self, token, pos):
        self.steps += 1
        return self.base.step(token, pos)

    def verify(self, tokens, pos):
        self.batches += 1
        self.batch_rows += len(tokens)
        self.verified.append(len(tokens))
        return self.base.verify(tokens, pos)

    def commit_verify(self, n) -> None:
        self.committed += n
        self.base.commit_verify(n)


@pytest.fixture
def counting():
    """The CountingBase class."""
    return CountingBase
