"""The tools refuse a model whose forward fails or gives non-finite logits: one line on
stderr, exit 2, never a score."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from onebit.models import qwen3

HEADS = ["ngram", "perfect"]


@pytest.fixture(scope="module")
def overflowing_dir(tmp_path_factory, model_dir):
    """A model with finite weights whose logits overflow float32: the final norm's weight is
    1e38, so every hidden row, and every logit, is inf or NaN. It loads (every weight is
    finite); only its output is broken."""
    path = tmp_path_factory.mktemp("overflow") / "m"
    shutil.copytree(model_dir, path)
    tensors = load_file(str(path / "model.safetensors"))
    tensors["model.norm.weight"] = np.full_like(tensors["model.norm.weight"], 1e38)
    save_file(tensors, str(path / "model.safetensors"))
    return path


def one_line_error(status: int, out: str, err: str, command: str) -> str:
    assert status == 2, (status, out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"onebit {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("head", HEADS)
def test_acceptance_refuses_non_finite_logits(cli, overflowing_dir, data, head, tally_tools):
    """`acceptance` on a model whose logits are inf/NaN prints one line naming the position
    and exits 2 (it used to print a perfect score: argmax over NaN is 0 at every step)."""
    line = one_line_error(*cli("acceptance", "--model", overflowing_dir, "--head", head,
                               "--prompt-ids", data / "mixed.txt", "--tokens", "4"),
                          "acceptance")
    assert "non-finite logits scoring position" in line
    tally_tools("tools: broken model", "clear error")


@pytest.mark.parametrize("head", HEADS)
def test_sweep_refuses_non_finite_logits(cli, overflowing_dir, data, head, tally_tools):
    """`sweep` on the same model: one line naming the arm and prompt, exit 2, no table."""
    line = one_line_error(*cli("sweep", "--model", overflowing_dir, "--head", head,
                               "--prompt-ids", data / "mixed.txt", "--tokens", "4", "--k", "1..2",
                               "--repeats", "1"), "sweep")
    assert "non-finite logits" in line and re.search(r"prompt \d", line)
    tally_tools("tools: broken model", "clear error")


@pytest.mark.parametrize("command", ["acceptance", "sweep"])
@pytest.mark.parametrize("after", [0, 3, 9])
def test_a_forward_that_raises(cli, model_dir, data, monkeypatch, command, after, tally_tools):
    """A forward that raises (a device lost after `after` passes) is one line naming the
    cause and where it happened, exit 2, under either tool."""
    real = qwen3.Qwen3Model.forward
    calls = []

    def failing(self, tokens, pos):
        calls.append(pos)
        if len(calls) > after:
            raise RuntimeError("device lost")
        return real(self, tokens, pos)

    monkeypatch.setattr(qwen3.Qwen3Model, "forward", failing)
    extra = ["--k", "2", "--repeats", "1"] if command == "sweep" else []
    line = one_line_error(*cli(command, "--model", model_dir, "--head", "ngram", "--prompt-ids",
                               data / "mixed.txt", "--tokens", "4", *extra), command)
    assert "RuntimeError" in line and "device lost" in line and re.search(r"prompt \d", line)
    tally_tools("tools: broken model", "clear error")
