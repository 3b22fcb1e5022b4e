"""The acceptance tool: its counts against heads whose answers are known, against the loop
itself, and the command's output and its errors on bad input."""

from __future__ import annotations

import json

import pytest

import onebit
from onebit.heads import (
    NgramHead,
    fabricate_dflash,
    fabricate_mtp,
    load_dflash,
    load_mtp,
)
from onebit.tools.acceptance import Tally, score, score_prompt
from onebit.tools.inputs import ToolInputError, read_prompt_ids
from pytest_onebit.doubles.heads import Oracle, garbage_head, half_head, perfect_head

PROMPT = [5, 9, 200, 31]
N = 20


def test_perfect_head_accepts_every_draft(target):
    """A perfect head at k = 4 on 20 tokens: the speculative walk takes 4 passes of 4 accepted
    (5 tokens per pass); every position (19 of them, the last has nothing to draft) accepts
    min(4, what is left): 16 * 4 + 3 + 2 + 1."""
    oracle = Oracle.from_greedy(target, PROMPT, N + 8)
    walk = score_prompt(target, perfect_head(oracle), PROMPT, tokens=N, k=4)
    assert (walk.passes, walk.accepted, walk.tokens_per_pass) == (4, 16, 5.0)
    assert walk.histogram == [0, 0, 0, 0, 4]
    every = score_prompt(target, perfect_head(oracle), PROMPT, tokens=N, k=4,
                         all_positions=True)
    assert (every.passes, every.accepted) == (19, 70)
    assert every.histogram == [0, 1, 1, 1, 16]
    assert every.first_hit_rate == 1.0


def test_half_and_garbage_heads(target):
    """The half-right head at k = 4 accepts exactly 2 per pass (3 tokens per pass) until the
    truth runs short; the garbage head accepts nothing and its first draft never hits."""
    oracle = Oracle.from_greedy(target, PROMPT, N + 8)
    half = score_prompt(target, half_head(oracle), PROMPT, tokens=N, k=4)
    assert half.histogram[2] == half.passes - 1 and half.accepted_per_pass < 2.0
    garbage = score_prompt(target, garbage_head(oracle), PROMPT, tokens=N, k=4)
    assert (garbage.passes, garbage.accepted, garbage.first_hit_rate) == (N - 1, 0, 0.0)
    assert garbage.histogram == [N - 1]


def make(name, target, tmp_path):
    if name == "dflash":
        return load_dflash(fabricate_dflash(tmp_path / "d", target, block_size=5), target)
    if name == "mtp":
        return load_mtp(fabricate_mtp(tmp_path / "m", target), target)
    return NgramHead(n=3, k=8, two_pass=name == "ngram-two-pass")


@pytest.mark.parametrize("k", [1, 7])
@pytest.mark.parametrize("name", ["ngram", "ngram-two-pass", "dflash", "mtp"])
def test_speculative_walk_is_what_the_loop_does(target, data, tmp_path, name, k):
    """For each head (one- and two-pass), the speculative walk accepts exactly what onebit.run
    accepts on the same prompt and budget, in the same rounds (the loop may end with one
    plain step the walk does not score): the walk asks the head what the loop would."""
    head = make(name, target, tmp_path)
    prompts = read_prompt_ids(data / "repetitive.txt")[:2] + read_prompt_ids(data / "mixed.txt")
    for prompt in prompts[:4]:
        tally = score_prompt(target, head, prompt, tokens=N, k=k)
        stats = onebit.run(target, head, prompt, max_tokens=N, k=k).stats
        assert tally.accepted == stats.accepted
        assert stats.rounds - tally.passes in (0, 1)


def test_report_totals_and_formats(target, data):
    """The report's total merges the prompts (passes, accepted, hits, histogram); its mean is
    over prompts; Markdown has one row per prompt plus the total and the histogram 0..k;
    JSON carries the same numbers."""
    prompts = read_prompt_ids(data / "repetitive.txt")
    report = score(target, NgramHead(), prompts, tokens=N, k=5, head_name="ngram",
                   model_name="tiny")
    total = report.total
    assert total.passes == sum(p.tally.passes for p in report.prompts)
    assert total.accepted == sum(p.tally.accepted for p in report.prompts)
    assert sum(total.histogram) == total.passes and len(total.histogram) == 6
    md = report.to_markdown()
    assert md.count("\n| ") == 2 + len(prompts) + 1 + 6  # headers, rows, total, 0..5
    assert "| all |" in md
    doc = json.loads(report.to_json())
    assert doc["total"]["accepted"] == total.accepted
    assert [p["passes"] for p in doc["prompts"]] == [p.tally.passes for p in report.prompts]
    assert doc["total"]["tokens_per_pass"] == pytest.approx(total.accepted_per_pass + 1)


def test_tally_rates():
    """Tokens per pass is accepted per pass + 1; the hit rate counts only passes that drafted."""
    t = Tally()
    for accepted, proposed in [(3, 4), (0, 0), (0, 4), (1, 1)]:
        t.add(accepted, proposed)
    assert (t.passes, t.accepted, t.first_tried, t.first_hits) == (4, 4, 3, 2)
    assert (t.accepted_per_pass, t.tokens_per_pass) == (1.0, 2.0)
    assert t.histogram == [2, 1, 0, 1]


# ---------------------------------------------------------------------------------------------
# The command


def test_command_markdown_and_json(cli, model_dir, draft_dir, data):
    """`onebit acceptance` prints the Markdown table (ngram) and the JSON document (dflash,
    k = B - 1 = 4 by default), exit 0, nothing on stderr for a short run."""
    status, out, err = cli("acceptance", "--model", model_dir, "--head", "ngram",
                           "--prompt-ids", data / "mixed.txt", "--tokens", 16)
    assert (status, err) == (0, "")
    assert out.startswith("## Acceptance: ngram head") and "| all |" in out
    status, out, err = cli("acceptance", "--model", model_dir, "--head", "dflash", "--draft",
                           draft_dir, "--prompt-ids", data / "mixed.txt", "--tokens", 8,
                           "--format", "json", "--all-positions")
    assert (status, err) == (0, "")
    doc = json.loads(out)
    assert (doc["k"], doc["walk"], len(doc["prompts"])) == (4, "all-positions", 3)
    assert all(p["passes"] == 7 for p in doc["prompts"])
    mtp = fabricate_mtp(draft_dir.parent / "mtp", onebit.load_model(model_dir))
    status, out, err = cli("acceptance", "--model", model_dir, "--head", "mtp", "--draft", mtp,
                           "--prompt-ids", data / "mixed.txt", "--tokens", 8, "--k", 3)
    assert (status, err) == (0, "")
    assert "## Acceptance: mtp head" in out and "k = 3," in out


def bad_inputs(tmp_path, model_dir, data):
    empty = tmp_path / "empty.txt"
    empty.write_text("# only a comment\n\n")
    words = tmp_path / "words.txt"
    words.write_text("1 2 3\nhello world\n")
    big = tmp_path / "big.txt"
    big.write_text("1 2 3\n4 256 6\n")
    good = data / "mixed.txt"
    target = onebit.load_model(model_dir)
    misfit = fabricate_dflash(tmp_path / "misfit", target, target_layer_ids=(0, 5))
    narrow = fabricate_dflash(tmp_path / "narrow", target, hidden_size=128)
    return [
        (["--head", "ngram", "--prompt-ids", empty], "empty.txt: no prompts"),
        (["--head", "ngram", "--prompt-ids", words], "words.txt:2: 'hello' is not a token id"),
        (["--head", "ngram", "--prompt-ids", big],
         "big.txt:2: token id 256 is past the vocabulary [0, 256)"),
        (["--head", "ngram", "--prompt-ids", tmp_path / "none.txt"], "no such prompt file"),
        (["--head", "dflash", "--prompt-ids", good], "--head dflash needs --draft DIR"),
        (["--head", "dflash", "--draft", misfit, "--prompt-ids", good],
         "target layers [0, 5]; the target has layers 0..1"),
        (["--head", "dflash", "--draft", narrow, "--prompt-ids", good],
         "the DFlash draft has hidden size 128, its target 256"),
        (["--head", "dflash", "--draft", tmp_path, "--prompt-ids", good],
         "config.json: no such file"),
        (["--head", "ngram", "--prompt-ids", good, "--tokens", "0"], "--tokens must be >= 1"),
    ]


def test_bad_input_is_one_line_and_exit_2(cli, tmp_path, model_dir, data):
    """Each bad input (an empty or malformed prompt file, an id past the vocabulary, a missing
    file, a dflash head without a draft, a draft that does not fit, a bad option) prints one
    line on stderr naming the problem, no traceback, and exits 2; nothing on stdout."""
    for argv, message in bad_inputs(tmp_path, model_dir, data):
        status, out, err = cli("acceptance", "--model", model_dir, *argv)
        assert status == 2, argv
        assert out == ""
        assert err.count("\n") == 1 and err.startswith("onebit acceptance: error: "), err
        assert message in err
        assert "Traceback" not in err


def test_bad_model_dir_is_one_line(cli, tmp_path, data):
    """A model directory that does not hold a model: one line, exit 2."""
    status, _, err = cli("acceptance", "--model", tmp_path, "--head", "ngram", "--prompt-ids",
                         data / "mixed.txt")
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_prompt_file_syntax(tmp_path):
    """Ids may be separated by spaces or commas; comments and blank lines are skipped; a line
    of separators only is malformed."""
    path = tmp_path / "p.txt"
    path.write_text("# c\n1, 2,3  4\n\n  7\n")
    assert read_prompt_ids(path, 8) == [[1, 2, 3, 4], [7]]
    path.write_text("1 2\n , ,\n")
    with pytest.raises(ToolInputError, match=r"p.txt:2: a prompt line with no token ids"):
        read_prompt_ids(path)
    path.write_text("1 -2\n")
    with pytest.raises(ToolInputError, match="'-2' is not a token id"):
        read_prompt_ids(path)


def test_perfect_head_accepts_everything(model_dir, data, cli):
    """The perfect head's drafts are the target's greedy text: every first draft hits, and a
    pass accepts k drafts whenever k tokens are left."""
    status, out, err = cli("acceptance", "--model", model_dir, "--head", "perfect",
                           "--prompt-ids", data / "scattered.txt", "--tokens", 16, "--k", 3,
                           "--format", "json")
    assert status == 0, err
    total = json.loads(out)["total"]
    assert total["first_hit_rate"] == 1.0
    # 16 tokens per prompt at k = 3: four passes of 3 accepted drafts + t1 each
    assert total["histogram"] == [0, 0, 0, total["passes"]]
    assert total["accepted"] == 3 * total["passes"]
