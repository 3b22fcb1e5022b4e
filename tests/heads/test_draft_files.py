"""Draft directories are read like model directories: regular files only, no tensor twice."""

from __future__ import annotations

import os
import shutil
import signal

import pytest

from onebit.heads import fabricate_dflash, load_dflash
from onebit.heads.errors import DraftFileError


@pytest.fixture
def draft_dir(tmp_path, qwen3):
    return fabricate_dflash(tmp_path / "draft", qwen3, block_size=4)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize("victim", ["config.json", "model.safetensors"])
def test_fifo_in_a_draft_directory_is_refused_at_once(draft_dir, qwen3, victim):
    """A FIFO in place of the draft's config.json or weights is refused naming it, without
    blocking (an alarm fails the test instead of hanging the suite)."""
    (draft_dir / victim).unlink()
    os.mkfifo(draft_dir / victim)

    def hung(signum, frame):
        raise TimeoutError("blocked on a FIFO")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        with pytest.raises(DraftFileError, match=f"{victim}: is a FIFO"):
            load_dflash(draft_dir, qwen3)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_draft_tensor_in_two_files_names_both(draft_dir, qwen3):
    """The same tensor in two *.safetensors files of a draft is refused naming both files,
    never last-file-wins."""
    shutil.copy(draft_dir / "model.safetensors", draft_dir / "zz-extra.safetensors")
    with pytest.raises(DraftFileError, match=r"tensor '.*' is in both .*model.safetensors "
                       r"and .*zz-extra.safetensors"):
        load_dflash(draft_dir, qwen3)


def test_draft_config_not_utf8(draft_dir, qwen3):
    """A draft config.json that is not UTF-8 is a DraftFileError naming the file."""
    shutil.copy(draft_dir / "config.json", draft_dir / "orig.json")
    (draft_dir / "config.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(DraftFileError, match="config.json: not UTF-8 text"):
        load_dflash(draft_dir, qwen3)
