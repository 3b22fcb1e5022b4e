"""The commands refuse what cannot work before working: an unwritable --plot, a --k past
what the model batches, a model too big to fabricate, a flag out of range."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onebit import cli


def onebit(capsys, *argv) -> tuple[int, str, str]:
    try:
        status = cli.main([str(a) for a in argv])
    except SystemExit as done:
        status = done.code
    out, err = capsys.readouterr()
    return status, out, err


def one_line(status, out, err, needle: str) -> None:
    assert (status, out) == (2, ""), err
    assert err.count("\n") == 1 and err.startswith("onebit ") and needle in err, err


@pytest.mark.parametrize("where", ["nowhere/k.png", "file/k.png", "."])
def test_plot_target_is_checked_before_the_sweep(capsys, model_dir, data, tmp_path, where):
    """An --plot in a missing folder, under a file, or naming a folder is refused before the
    sweep runs: one line, exit 2, no table on stdout."""
    (tmp_path / "file").write_text("")
    status, out, err = onebit(capsys, "sweep", "--model", model_dir, "--head", "ngram",
                              "--prompt-ids", data / "mixed.txt", "--tokens", 2, "--repeats", 1,
                              "--k", "1", "--plot", tmp_path / where)
    one_line(status, out, err, "--plot ")


@pytest.mark.parametrize(("ks", "needle"), [
    ("1..1000000000", "k = 1000000000 is past 4096; no base verifies more rows"),
    ("1..9", "k = 9 is past 8; the model verifies at most 8 rows in one pass"),
    ("１..２", "expected a range like 1..8"),
])
def test_k_is_bounded_by_what_the_model_batches(capsys, model_dir, data, ks, needle):
    """A --k range past the model's max_batch_rows() is refused naming the bound, and a
    range of a billion is refused at once, without expanding it."""
    started = time.perf_counter()
    status, out, err = onebit(capsys, "sweep", "--model", model_dir, "--head", "ngram",
                              "--prompt-ids", data / "mixed.txt", "--k", ks)
    one_line(status, out, err, needle)
    assert time.perf_counter() - started < 30


@pytest.mark.parametrize(("sizes", "needle"), [
    (["--hidden", "1000000", "--vocab", "1000000"], "GiB of memory to fabricate"),
    (["--layers", "100000000"], "a qwen3 with --layers 100000000 needs about"),
])
def test_fabricate_refuses_what_will_not_fit(capsys, tmp_path, sizes, needle):
    """Sizes whose weights need more memory than is available are refused from an estimate,
    before anything is allocated (so no MemoryError, and nothing written)."""
    status, out, err = onebit(capsys, "fabricate", "qwen3", tmp_path / "big", *sizes)
    one_line(status, out, err, needle)
    assert not (tmp_path / "big").exists()


@pytest.mark.parametrize(("argv", "needle"), [
    (["--seed", "-1"], "--seed must be >= 0, got -1"),
    (["--block-size", "4"], "--block-size is for a dflash draft, not qwen3"),
])
def test_fabricate_flags_are_named(capsys, tmp_path, argv, needle):
    """A bad --seed or a --block-size for a target names the flag."""
    one_line(*onebit(capsys, "fabricate", "qwen3", tmp_path / "m", *argv), needle)


@pytest.mark.parametrize("block", ["0", "1"])
def test_dflash_block_size_below_two_is_refused(capsys, tmp_path, model_dir, block):
    """A DFlash block of 0 or 1 tokens drafts nothing and cannot be loaded: refused, and no
    draft is written."""
    status, out, err = onebit(capsys, "fabricate", "dflash", tmp_path / "d", "--target",
                              model_dir, "--block-size", block)
    one_line(status, out, err, f"--block-size {block}: a dflash draft's block holds B >= 2")
    assert not (tmp_path / "d").exists()


def test_fabricate_into_a_directory_with_files(capsys, tmp_path, model_dir):
    """Fabricating into a directory that already holds files is refused (a second container
    beside the first would make the directory ambiguous)."""
    one_line(*onebit(capsys, "fabricate", "qwen3", model_dir), "is not an empty directory")


def run_onebit(*argv, stdout) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onebit.cli", *map(str, argv)], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_report_that_cannot_be_written(tmp_path):
    """stdout on a full device: one line on stderr, exit 2, no traceback."""
    with open("/dev/full", "w") as full:
        done = run_onebit("fabricate", "qwen3", tmp_path / "m", stdout=full)
    assert done.returncode == 2
    assert done.stderr == ("onebit: error: cannot write the report to stdout: No space left "
                           "on device\n")


def test_a_reader_that_goes_away(tmp_path):
    """stdout closed by its reader before the report (`| head -c 0`): a quiet exit 0."""
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as closed:
        done = run_onebit("fabricate", "qwen3", tmp_path / "m", stdout=closed)
    assert (done.returncode, done.stderr) == (0, "")
