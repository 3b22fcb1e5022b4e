"""Acceptance and sweep under sampling: the expected acceptance sum(min(p, q)) per slot beside
the measured one, and the --temperature --top-k --top-p --seed options."""

import json

import pytest

from onebit import Sampling
from onebit.tools.sampled_acceptance import score_sampled
from pytest_onebit.doubles.sampling_heads import sampling_head
from pytest_onebit.doubles.toy import ToyBase

PROMPTS = [[3, 1, 4], [9, 2]]


def test_q_equal_to_p_is_expected_and_measured_to_accept_everything():
    """A head drafting from the target's own p: the expected acceptance of every slot is
    sum(min(p, p)) = 1, and every judged draft was accepted."""
    base = ToyBase(vocab_size=16)
    report = score_sampled(base, sampling_head(base, "same"), PROMPTS, tokens=20, k=4,
                           sampling=Sampling(0.9, top_k=6), seed=3)
    assert report.slots and all(s.judged and s.accepted == s.judged for s in report.slots)
    assert all(s.expected_rate == pytest.approx(1.0, abs=1e-12) for s in report.slots)
    assert report.emitted == 40


def test_disjoint_q_is_expected_and_measured_to_accept_nothing():
    """A head whose q lives where p is 0 (top-k 3 of 16): expected 0 and nothing accepted,
    so only slot 0 is ever judged."""
    base = ToyBase(vocab_size=16)
    report = score_sampled(base, sampling_head(base, "disjoint"), PROMPTS, tokens=15, k=3,
                           sampling=Sampling(1.0, top_k=3), seed=0)
    assert len(report.slots) == 1
    assert report.slots[0].accepted == 0 and report.slots[0].expected == 0.0


def test_a_deterministic_head_expects_p_of_its_draft():
    """A bare-list head (one-hot q) is expected to be accepted with probability p(d): strictly
    between 0 and 1 for the target's argmax under a spread-out p."""
    base = ToyBase(vocab_size=16)
    report = score_sampled(base, sampling_head(base, "argmax"), PROMPTS, tokens=30, k=2,
                           sampling=Sampling(1.5), seed=1)
    first = report.slots[0]
    assert 0.0 < first.expected_rate < 1.0 and first.judged > 0


def test_acceptance_command_samples(cli, model_dir, data):
    """`onebit acceptance --temperature` prints the per-slot table with both columns; the
    same seed gives the same JSON."""
    args = ("acceptance", "--model", model_dir, "--head", "ngram", "--prompt-ids",
            data / "repetitive.txt", "--tokens", "12", "--k", "3", "--temperature", "0.7",
            "--top-k", "5", "--seed", "4")
    status, out, err = cli(*args, "--format", "md")
    assert status == 0, err
    assert "expected sum(min(p, q))" in out and "measured acceptance" in out
    first = json.loads(cli(*args, "--format", "json")[1])
    assert first == json.loads(cli(*args, "--format", "json")[1])
    assert first["temperature"] == 0.7 and first["top_k"] == 5 and first["slots"]


@pytest.mark.parametrize(("extra", "message"), [
    (("--temperature", "-1"), "--temperature"), (("--temperature", "1", "--top-p", "0"), "--top-p"),
    (("--top-k", "3"), "--temperature above 0"), (("--temperature", "1", "--seed", "-1"), "--seed"),
    (("--temperature", "1", "--all-positions"), "all-positions"),
])
def test_bad_sampling_options_are_one_line_and_exit_2(cli, model_dir, data, extra, message):
    """Bad sampling options: one line on stderr naming the option, exit status 2."""
    status, out, err = cli("acceptance", "--model", model_dir, "--head", "ngram",
                           "--prompt-ids", data / "repetitive.txt", "--tokens", "4", *extra)
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


def test_sweep_command_samples(cli, model_dir, data):
    """`onebit sweep --temperature` runs every k sampled with the same seed (its pass counts
    hold between repeats) and says so in the setup line."""
    status, out, err = cli("sweep", "--model", model_dir, "--head", "ngram", "--prompt-ids",
                           data / "repetitive.txt", "--tokens", "8", "--k", "2,3",
                           "--repeats", "2", "--temperature", "0.8", "--seed", "5",
                           "--format", "json")
    assert status == 0, err
    report = json.loads(out)
    assert "temperature=0.8" in report["sampling"] and "seed 5" in report["sampling"]
    assert [row["k"] for row in report["rows"]] == [2, 3]
