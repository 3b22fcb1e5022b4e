"""The k sweep: exact pass counts per k (the loop's own), the break-even and best k, the ks
option, the plot (and its absence), and the command."""

from __future__ import annotations

import json
import sys

import pytest

import onebit
from onebit.heads import NgramHead
from onebit.loop import RunStats
from onebit.tools.inputs import read_prompt_ids
from onebit.tools.sweep import SweepReport, SweepRow, parse_ks, plot, sweep

N = 16


def test_rows_are_the_loops_counts(target, data):
    """Each row sums onebit.run's stats over the prompts at that k; the plain row is plain
    decode (one step per token); every repeat timed a value."""
    prompts = read_prompt_ids(data / "repetitive.txt")
    head = NgramHead(n=3, k=8)
    report = sweep(target, head, prompts, ks=[1, 3, 8], tokens=N, repeats=2)
    assert (report.plain.stats.steps, report.plain.stats.batches) == (N * len(prompts), 0)
    assert report.plain.stats.passes_per_token == 1.0
    for row in report.rows:
        runs = [onebit.run(target, head, p, max_tokens=N, k=row.k).stats for p in prompts]
        st = row.stats
        assert st.accepted == sum(s.accepted for s in runs)
        assert st.proposed == sum(s.proposed for s in runs)
        assert (st.batches, st.steps) == (sum(s.batches for s in runs),
                                          sum(s.steps for s in runs))
        assert st.passes_per_token == (st.steps + st.batches) / (N * len(prompts))
        assert st.tokens_per_pass == pytest.approx(1 / st.passes_per_token)
        assert len(row.ms_per_token) == 2 and all(ms > 0 for ms in row.ms_per_token)
    assert report.rows[0].stats.passes_per_token < 1.0  # the repetitive prompts do pay off


def row(k, ms):
    return SweepRow(k, RunStats(steps=1, emitted=1), ms_per_token=list(ms))


def test_break_even_and_best_k():
    """Break-even k: the smallest k whose median beats plain decode's median; best k: the
    lowest median. Medians, not means: one slow repeat does not move them."""
    report = SweepReport("h", "m", 1, 1, 3, row(None, [1.0, 1.0, 1.0]),
                         [row(1, [1.2, 1.1, 1.3]), row(2, [0.9, 0.95, 9.0]),
                          row(3, [0.7, 0.8, 0.75]), row(4, [0.8, 0.85, 0.9])])
    assert (report.break_even_k, report.best_k) == (2, 3)
    slower = SweepReport("h", "m", 1, 1, 1, row(None, [1.0]), [row(1, [1.5])])
    assert (slower.break_even_k, slower.best_k) == (None, 1)
    assert "Break-even k (smallest k faster than plain decode): none" in slower.to_markdown()


def test_parse_ks():
    """Ranges, lists and both; anything else (or a k below 1) is a ValueError."""
    assert parse_ks("1..8") == [1, 2, 3, 4, 5, 6, 7, 8]
    assert parse_ks("4,1, 2") == [1, 2, 4]
    assert parse_ks("1..3,8") == [1, 2, 3, 8]
    for bad in ("", "a", "3..1", "0..2", "1..", "-1"):
        with pytest.raises(ValueError, match="--k"):
            parse_ks(bad)


def tiny_report():
    return SweepReport("ngram", "m", 4, 1, 2, row(None, [1.0, 1.1]),
                       [row(1, [0.9, 1.0]), row(2, [0.8, 0.9])])


def test_plot_is_skipped_without_matplotlib(tmp_path, monkeypatch):
    """With matplotlib missing, plot() writes nothing and says why."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    why = plot(tiny_report(), str(tmp_path / "s.png"))
    assert why == "matplotlib is not installed (pip install matplotlib)"
    assert not (tmp_path / "s.png").exists()


def test_plot_writes_a_png(tmp_path):
    """With matplotlib installed, plot() writes a PNG file."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "s.png"
    assert plot(tiny_report(), str(path)) is None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_command(cli, model_dir, data, tmp_path, monkeypatch):
    """`onebit sweep` prints one row per k plus plain decode (Markdown) or the JSON document;
    --plot without matplotlib still prints the table, says on stderr that the plot was
    skipped, and exits 0; a bad --k is one line on stderr and exit 2."""
    common = ("--model", model_dir, "--head", "ngram", "--prompt-ids", data / "mixed.txt",
              "--tokens", 8, "--repeats", 1)
    status, out, err = cli("sweep", *common, "--k", "1..3")
    assert (status, err) == (0, "")
    assert [line.split("|")[1].strip() for line in out.splitlines()
            if line.startswith("| ") and "---" not in line][1:] == ["plain", "1", "2", "3"]
    status, out, _ = cli("sweep", *common, "--k", "2,5", "--format", "json")
    doc = json.loads(out)
    assert [r["k"] for r in doc["rows"]] == [2, 5] and doc["plain"]["k"] is None
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    status, out, err = cli("sweep", *common, "--k", "1", "--plot", tmp_path / "s.png")
    assert status == 0 and "| 1 |" in out
    assert err == ("onebit sweep: plot skipped: matplotlib is not installed "
                   "(pip install matplotlib)\n")
    status, out, err = cli("sweep", *common, "--k", "x")
    assert (status, out) == (2, "")
    assert err.startswith("onebit sweep: error: --k 'x'") and err.count("\n") == 1


def test_fallback_keeps_a_losing_head_at_plain_cost(model_dir, data, draft_dir, cli):
    """With --fallback, a random DFlash draft (it accepts almost nothing) falls back in every
    run after the window, so each k costs nearly plain decode's passes per token; the table
    says how many runs fell back. Without it, every k pays for its batches."""
    status, out, err = cli("sweep", "--model", model_dir, "--head", "dflash",
                           "--draft", draft_dir, "--prompt-ids", data / "mixed.txt",
                           "--tokens", 12, "--k", "2,4", "--repeats", 1, "--fallback", 2,
                           "--format", "json")
    assert status == 0, err
    report = json.loads(out)
    assert report["fallback"].startswith("Fallback(window=2")
    prompts = len(read_prompt_ids(data / "mixed.txt"))
    for row in report["rows"]:
        assert row["fell_back"] == prompts
        # two losing rounds of drafting per run, then plain steps
        assert row["batches"] <= 2 * prompts
        assert row["passes_per_token"] == 1.0


def test_perfect_head_sweep_keeps_the_pass_law(model_dir, data, cli):
    """`--head perfect` proposes the target's own greedy text for every prompt of the file,
    so every draft is accepted and each k costs exactly the one-pass pass law:
    ceil(N / (k' + 1)) passes per prompt, k' = min(k, max_batch_rows() - 1)."""
    status, out, err = cli("sweep", "--model", model_dir, "--head", "perfect",
                           "--prompt-ids", data / "mixed.txt", "--tokens", 16, "--k", "1,3,7,8",
                           "--repeats", 1, "--format", "json")
    assert status == 0, err
    report = json.loads(out)
    prompts = len(read_prompt_ids(data / "mixed.txt"))
    for row in report["rows"]:
        width = min(row["k"], 7)
        assert row["accepted"] == row["proposed"]
        assert row["steps"] + row["batches"] == prompts * -(-16 // (width + 1))


@pytest.mark.parametrize("greedy", [True, False])
def test_decode_clock_starts_when_the_prompt_is_committed(greedy):
    """The sweep's clock starts when the prompt's last prefill pass returns, whether the
    prompt was stepped (greedy()) or went through the loop's prefill batches (2 + 2 + 1 rows
    on a 2-row toy here), and never again during the decode."""
    from onebit.tools.sweep import DecodeClock
    from pytest_onebit import ToyBase

    prompt = [3, 1, 4, 1, 5]
    clock = DecodeClock(ToyBase(max_batch_rows=2), len(prompt))
    if greedy:
        onebit.greedy(clock, prompt, max_tokens=6)
    else:
        onebit.run(clock, None, prompt, max_tokens=6, k=0)
    started = clock.decode_start
    assert started is not None
    clock.verify([7], len(prompt) + 6)  # a decode pass: the clock keeps its start
    clock.commit_verify(1)
    clock.step(7, len(prompt) + 7)
    assert clock.decode_start == started
