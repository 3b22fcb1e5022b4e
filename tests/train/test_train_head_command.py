"""`onebit train-head` end to end on SmolLM2, with a tiny recipe: it distils, fits, reports the
held-out acceptance per position, and saves a head that `onebit generate --head trained` and
`--head auto` then find through ONEBIT_HOME and draft with, the text unchanged."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# torch is the child's (`onebit train-head`): looked up, not imported in every collecting worker
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="could not import 'torch' (the train extra)")]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """An ONEBIT_HOME whose models/ is the real cache's (the file, not a copy) and whose heads/
    is empty."""
    from onebit.hub import skip_unless_cached

    model = skip_unless_cached("smollm2")
    root = tmp_path_factory.mktemp("home")
    (root / "models").mkdir()
    (root / "models" / model.name).symlink_to(model)
    return root


def onebit(*args, home):
    env = dict(os.environ, ONEBIT_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "onebit.cli", *args], capture_output=True,
                          text=True, env=env, timeout=900)


def test_train_head_saves_a_head_that_generate_finds_and_drafts_with(home):
    """A 6-prompt (and 2 word-prompt), 1-epoch training run prints the head's directory
    (under $ONEBIT_HOME/heads, named by the file and its sha256) and the acceptance lines;
    config.json names the base's sha256 and records the held-out acceptance and the recipe;
    generate with --head trained and auto prints the same text as --head none, and an
    acceptance field."""
    done = onebit("train-head", "--prompts", "6", "--word-prompts", "2", "--held-out", "2",
                  "--epochs", "1", "--max-tokens", "24", "--draft-vocab", "2048", home=home)
    assert done.returncode == 0, done.stderr
    path = done.stdout.strip().splitlines()[-1]
    assert path.startswith(str(home / "heads" / "SmolLM2-135M-Instruct.Q4_1.gguf-"))
    assert "held-out acceptance per draft position" in done.stderr
    config = json.loads(Path(path, "config.json").read_text())
    from onebit.heads.eagle import file_sha256
    from onebit.hub import skip_unless_cached

    assert config["base_sha256"] == file_sha256(skip_unless_cached("smollm2"))
    assert len(config["trained"]["acceptance_conditional"]) == 4
    assert config["trained"]["recipe"]["word_prompts"] == 2
    texts = {}
    for head in ("none", "trained", "auto"):
        run = onebit("generate", "--max-tokens", "24", "--head", head, "Name three colours.",
                     home=home)
        assert run.returncode == 0, run.stderr
        texts[head] = run.stdout
        if head != "none":
            assert "acceptance" in run.stderr
    assert texts["trained"] == texts["none"] == texts["auto"]


def test_trained_without_a_head_is_a_clear_error(tmp_path):
    """--head trained for a file with no head (none trained for it here, none shipped: its
    sha256 matches neither) is a DraftError naming the command that makes one. (SmolLM2's own
    file now finds the shipped head: tests/heads/test_shipped.py.)"""
    from onebit.heads.errors import DraftError
    from onebit.heads.registry import resolve
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model

    model = load_text_model(skip_unless_cached("smollm2"), kernel="int8")
    other = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    other.write_bytes(b"not the file any head was made for")
    model.source_path = other
    with pytest.raises(DraftError, match="onebit train-head"):
        resolve("trained", model, k=None)
