"""The heads and the tools on a Gemma 4 target: `onebit acceptance` and `onebit sweep` with
prompt lookup and a DFlash draft read the Gemma 4 forward as they read Qwen3's, and their
counts are the loop's own."""

from __future__ import annotations

import argparse

import pytest

import onebit
from onebit.commands import acceptance, fabricate, sweep
from onebit.heads import NgramHead, load_dflash
from onebit.models import fabricate_model, load_model
from onebit.tools.acceptance import score_prompt
from onebit.tools.sweep import sweep as run_sweep

# prompts on which the tiny Gemma 4 (seed 0) ends up repeating itself, and one that does not
PROMPTS = [[9, 9, 9, 9], [1, 2, 3, 4]]
N = 30


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """The tiny Gemma 4, a DFlash draft for it, and a prompt file."""
    root = tmp_path_factory.mktemp("gemma4-tools")
    model = fabricate_model(root / "model", "gemma4")
    prompts = root / "prompts.txt"
    prompts.write_text("".join(" ".join(map(str, p)) + "\n" for p in PROMPTS))
    cli(["fabricate", "dflash", root / "draft", "--target", model, "--block-size", 5])
    return model, root / "draft", prompts


def cli(argv):
    parser = argparse.ArgumentParser(prog="onebit")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (acceptance, sweep, fabricate):
        module.add_parser(sub).set_defaults(_main=module.main)
    args = parser.parse_args([str(a) for a in argv])
    return args._main(args)


@pytest.mark.parametrize("head", ["ngram", "dflash"])
def test_acceptance_counts_are_the_loops(dirs, head, capsys):
    """`onebit acceptance --head ngram|dflash` on the Gemma 4 exits 0 and prints, per
    prompt, the passes and accepted drafts that onebit.run counts for the same head and k."""
    model_dir, draft_dir, prompts = dirs
    extra = ["--draft", draft_dir] if head == "dflash" else []
    assert cli(["acceptance", "--model", model_dir, "--head", head, "--prompt-ids", prompts,
                "--tokens", N, "--k", 4, "--format", "md", *extra]) == 0
    out = capsys.readouterr().out
    target = load_model(model_dir)
    for i, prompt in enumerate(PROMPTS, start=1):
        made = (NgramHead(n=3, k=4) if head == "ngram"
                else load_dflash(draft_dir, target))
        walk = score_prompt(target, made, prompt, tokens=N, k=4)
        row = f"| {i} | {len(prompt)} | {walk.passes} | {walk.accepted} |"
        assert row in out, (row, out)


def test_prompt_lookup_pays_on_repeating_gemma4_text(dirs):
    """On the prompt that makes the tiny Gemma 4 repeat itself, prompt lookup accepts drafts
    (fewer passes than tokens) and the text stays greedy's."""
    model_dir, _, _ = dirs
    target = load_model(model_dir)
    result = onebit.run(target, NgramHead(n=2, k=8), PROMPTS[0], max_tokens=N, k=7)
    assert result.tokens == onebit.greedy(target, PROMPTS[0], max_tokens=N).tokens
    assert result.stats.accepted > 0 and result.stats.passes_per_token < 1.0


@pytest.mark.parametrize("head", ["ngram", "dflash"])
def test_sweep_rows_on_gemma4(dirs, head, capsys):
    """`onebit sweep --head ngram|dflash --k 1..3` on the Gemma 4 exits 0 with a plain row and
    one row per k; the library's rows have exact pass counts (plain: one step per token)."""
    model_dir, draft_dir, prompts = dirs
    extra = ["--draft", draft_dir] if head == "dflash" else []
    assert cli(["sweep", "--model", model_dir, "--head", head, "--prompt-ids", prompts,
                "--k", "1..3", "--tokens", 12, "--repeats", 1, "--format", "md", *extra]) == 0
    out = capsys.readouterr().out
    assert "| plain |" in out and "| 3 |" in out
    report = run_sweep(load_model(model_dir), NgramHead(n=3, k=8), PROMPTS, ks=[2], tokens=12,
                       repeats=1)
    assert (report.plain.stats.steps, report.plain.stats.batches) == (12 * len(PROMPTS), 0)
