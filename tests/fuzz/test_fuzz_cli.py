"""The commands driven with malformed arguments: each ends in one line on stderr and exit 2,
or in the right answer; never a traceback, a hang, or an error on stdout."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from cli_driver import judge_cli
from fuzzing import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from onebit.models import fabricate_model, load_model
from onebit.tools import inputs


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny model, prompt files good and bad, and paths of every awkward kind."""
    root = tmp_path_factory.mktemp("cli")
    fabricate_model(root / "model", "qwen3", quantized=False)
    (root / "prompts.txt").write_text("1 2 3\n4, 5 # a comment\n")
    (root / "bad-prompts.txt").write_text("1 2 x\n")
    (root / "latin1.txt").write_bytes(b"1 2 \xe9\n")
    (root / "empty.txt").write_text("")
    (root / "file").write_text("not a directory")
    here = Path.cwd()
    os.chdir(root)  # a relative path the fuzz draws (--plot json) lands here, not in the repo
    yield root
    os.chdir(here)


@pytest.fixture(autouse=True, scope="module")
def numpy_kernel():
    """The commands load models with the NumPy kernel here: what is fuzzed is the argument
    handling, and a numba compile would cost the quick profile its budget."""
    real = inputs.load_target
    inputs.load_target = lambda path: load_model(path, kernel="numpy")
    yield
    inputs.load_target = real


def paths(world: Path) -> list[str]:
    return [str(world / n) for n in ("model", "prompts.txt", "bad-prompts.txt", "latin1.txt",
                                     "empty.txt", "file", "nowhere")] + ["/dev/null", ""]


NUMBERS = ["-1", "0", "1", "2", "3", "1e3", "x", "", "99999999999999999999", "1.5", "０"]
RANGES = ["1..3", "3..1", "1..1000000000", "0..2", "a..b", "1,,2", "..", "2", "1..3,8", "-1"]


def fixed_cases(world: Path) -> list[list[str]]:
    """The issue's cases, one by one."""
    model, prompts = str(world / "model"), str(world / "prompts.txt")
    common = ["--model", model, "--head", "ngram", "--prompt-ids", prompts, "--tokens", "3"]
    sweep = ["sweep", *common, "--repeats", "1"]
    return [
        [*sweep, "--k", "1..2", "--plot", str(world / "nowhere" / "k.png")],
        [*sweep, "--k", "1..2", "--plot", str(world / "file" / "k.png")],
        [*sweep, "--k", "1..1000000000"],
        [*sweep, "--k", "1..100"],
        ["fabricate", "qwen3", str(world / "huge"), "--hidden", "1000000", "--vocab", "1000000"],
        ["fabricate", "qwen3", str(world / "huge2"), "--layers", "100000000"],
        ["fabricate", "qwen3", str(world / "s"), "--seed", "-1"],
        ["fabricate", "dflash", str(world / "d0"), "--target", model, "--block-size", "0"],
        ["fabricate", "dflash", str(world / "d1"), "--target", model, "--block-size", "1"],
        ["fabricate", "qwen3", str(world / "file")],
        ["fabricate", "mtp", str(world / "m0")],
        ["mutmut", "--root", str(world / "nowhere")],
        ["mutmut", "--root", str(world)],
        ["mutmut", "--max-survivors", "-1"],
        ["acceptance", *common[:-2], "--tokens", "-3"],
        ["acceptance", *common[:4], "--prompt-ids", str(world / "latin1.txt")],
        ["acceptance", *common[:4], "--prompt-ids", str(world / "nowhere")],
        ["acceptance", "--model", str(world / "file"), "--head", "ngram", "--prompt-ids",
         prompts],
        ["acceptance", *common, "--k", "0"],
        ["sweep", *common, "--repeats", "x"],
        ["sweep", *common, "--fallback", "0"],
        ["prove", "--loop", "no.such.module:run", "--quick"],
        ["prove", "--loop", "os:nothing", "--quick"],
        ["prove", "--loop", "nocolon", "--quick"],
        ["prove", "--jobs", "0"],
        ["mutants", "--jobs", "-2"],
        ["mutants", "--root", str(world / "nowhere")],
        ["mutants", "--only", "no-such-mutant", "--root", str(world)],
        ["nosuchcommand"],
        [],
    ]


def test_the_issues_cases(world, tally):
    """Each malformed invocation the issue lists: one line on stderr, exit 2, or the right
    answer; no traceback, no hang, no error on stdout."""
    for argv in fixed_cases(world):
        tally("cli: the issue's cases", judge_cli(argv))


def test_fabricate_help_shows_every_size_option(world):
    """`fabricate --help` lists --layers, --intermediate and --vocab (they were hidden)."""
    from cli_driver import run_cli

    status, out, _ = run_cli(["fabricate", "--help"])
    assert status == 0
    for option in ("--hidden", "--layers", "--heads", "--kv-heads", "--head-dim",
                   "--intermediate", "--vocab"):
        assert option in out, option


def argv_for(command: str, world: Path):
    """A strategy: argv for `command`, mixing its real flags with junk flags and values."""
    model, prompts = str(world / "model"), str(world / "prompts.txt")
    flags = {
        "acceptance": ["--model", "--head", "--draft", "--prompt-ids", "--tokens", "--k",
                       "--ngram-n", "--format", "--all-positions"],
        "sweep": ["--model", "--head", "--prompt-ids", "--tokens", "--k", "--repeats",
                  "--fallback", "--format", "--plot"],
        "fabricate": ["--hidden", "--layers", "--heads", "--kv-heads", "--head-dim",
                      "--intermediate", "--vocab", "--seed", "--block-size", "--target",
                      "--convention", "--float"],
        "mutmut": ["--root", "--max-survivors", "--format"],
    }[command]
    value = st.sampled_from(NUMBERS + RANGES + paths(world)
                            + ["ngram", "perfect", "dflash", "md", "json", "text", "-"])
    junk_flag = st.sampled_from(["--nope", "-x", "--k=", "--", "--tokens=2", "-h"])
    piece = st.one_of(st.tuples(st.sampled_from(flags), value), st.tuples(junk_flag),
                      st.tuples(st.sampled_from(flags)))
    if command in ("acceptance", "sweep"):
        # mostly well-formed around one bad piece, so the run reaches the deep checks
        base = ["--model", model, "--head", "ngram", "--prompt-ids", prompts, "--tokens", "2"]
        extra = ["--repeats", "1", "--k", "1..2"] if command == "sweep" else []
        return st.lists(piece, max_size=3).map(
            lambda ps: [command, *base, *extra, *[x for p in ps for x in p]])
    positional = (st.tuples(st.sampled_from(["qwen3", "qwen3_5", "dflash", "mtp", "llama"]),
                            st.sampled_from([str(world / "out"), str(world / "file"), ""]))
                  if command == "fabricate" else st.just(()))
    return st.tuples(positional, st.lists(piece, max_size=4)).map(
        lambda t: [command, *t[0], *[x for p in t[1] for x in p]])


@pytest.mark.parametrize("command", ["acceptance", "sweep", "fabricate", "mutmut"])
@fuzz_settings(quick=12, long=100)
@given(data=st.data())
def test_malformed_arguments(world, tally, command, data):
    """Random argv of real and junk flags with good, bad and absurd values."""
    argv = data.draw(argv_for(command, world), label="argv")
    outcome = judge_cli(argv, may_fail_check=command == "mutmut")
    tally(f"cli: malformed {command} arguments", outcome)
    shutil.rmtree(world / "out", ignore_errors=True)
