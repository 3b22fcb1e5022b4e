"""Every head under the loop's contract on the real forward (fabricated Qwen3 and Qwen3.5):
the text is plain greedy decode's, the stats are what the base counted, and the base's state
after the run continues exactly where greedy's does."""

from __future__ import annotations

import numpy as np
import pytest

import onebit
from onebit.heads import (
    NgramHead,
    SuffixCache,
    SuffixHead,
    fabricate_dflash,
    fabricate_mtp,
    load_dflash,
    load_mtp,
    load_own_mtp,
)

PROMPTS = {
    "plain": [1, 2, 3, 4],
    "repetitive": [189, 190] * 4,
}
N = 40
# suffix: the request's own tree; suffix-cached: also a cache of earlier answers that holds
# greedy's answer to the plain prompt, so whole drafts come from it and are accepted
HEADS = ("ngram", "ngram-two-pass", "dflash", "mtp", "own-mtp", "suffix", "suffix-cached")
# (target family, head): every head on both families, Qwen3.5's own MTP on Qwen3.5 only
ARMS = [(kind, name) for name in HEADS for kind in ("qwen3", "qwen3_5")
        if not (name == "own-mtp" and kind == "qwen3")]


def make_head(name, target, tmp_path, target_dirs=None):
    if name == "ngram":
        return NgramHead(n=3, k=8)
    if name == "ngram-two-pass":
        return NgramHead(n=3, k=8, two_pass=True)
    if name == "dflash":
        return load_dflash(fabricate_dflash(tmp_path / "draft", target, block_size=5), target)
    if name == "mtp":
        return load_mtp(fabricate_mtp(tmp_path / "mtp", target), target)
    if name == "own-mtp":  # Qwen3.5's own MTP layers, from the target's checkpoint
        return load_own_mtp(target_dirs["qwen3_5"], target)
    if name == "suffix":
        return SuffixHead()
    if name == "suffix-cached":
        cache = SuffixCache()
        plain = PROMPTS["plain"]
        cache.add(plain + onebit.greedy(target, plain, max_tokens=N).tokens)
        return SuffixHead(cache)
    raise ValueError(name)


@pytest.mark.parametrize("prompt", PROMPTS, ids=list(PROMPTS))
@pytest.mark.parametrize("k", [2, 7])
@pytest.mark.parametrize(("kind", "name"), ARMS)
def test_text_and_state_equal_greedy(target, name, k, prompt, tmp_path, target_dirs):
    """run() with each head emits exactly greedy's tokens, for k = 2 and 7 and a plain and a
    repetitive prompt; after the run one more step gives greedy's logits bit for bit."""
    prompt = PROMPTS[prompt]
    head = make_head(name, target, tmp_path, target_dirs)  # before greedy: DFlash sets taps
    reference = onebit.greedy(target, prompt, max_tokens=N)
    expected_logits = target.step(int(np.argmax(target.lm_head_logits(target.last_hidden()))),
                                  len(prompt) + N)
    result = onebit.run(target, head, prompt, max_tokens=N, k=k)
    assert result.tokens == reference.tokens
    assert target.committed_length == len(prompt) + N
    next_token = int(np.argmax(target.lm_head_logits(target.last_hidden())))
    assert np.array_equal(target.step(next_token, len(prompt) + N), expected_logits)


@pytest.mark.parametrize(("kind", "name"), ARMS)
def test_pass_accounting_is_exact(target, counting, name, tmp_path, target_dirs):
    """The run's stats equal what a counting wrapper around the base saw: the prompt in
    prefill batches (counted apart), then decode steps, batches and their rows; rounds and
    accepted drafts follow from the round kind; passes per token is passes / emitted."""
    head = make_head(name, target, tmp_path, target_dirs)
    prompt = PROMPTS["repetitive"]
    base = counting(target)
    result = onebit.run(base, head, prompt, max_tokens=N, k=7)
    s = result.stats
    n = len(result.tokens)
    assert n == s.emitted == N
    width = getattr(target, "max_prefill_rows", target.max_batch_rows)()
    prefill = [min(width, len(prompt) - at) for at in range(0, len(prompt), width)]
    assert base.verified[: len(prefill)] == prefill
    assert (s.prefill_steps, s.prefill_batches, s.prefill_rows) == (0, len(prefill),
                                                                    len(prompt))
    assert (s.steps, s.batches, s.batch_rows) == (base.steps, base.batches - len(prefill),
                                                  base.batch_rows - len(prompt))
    if head.needs_last_hidden():
        assert (s.rounds, s.accepted) == (s.steps, n - s.steps)
        # a two-pass batch commits accepted drafts only (the prefill commits the prompt)
        assert base.committed == len(prompt) + s.accepted
    else:
        assert (s.rounds, s.accepted) == (s.steps + s.batches, n - s.steps - s.batches)
        assert base.committed == len(prompt) + s.batches + s.accepted  # t1, accepted drafts
    assert s.passes_per_token == (s.steps + s.batches) / n
    assert s.accepted <= s.proposed
    assert max(base.verified[len(prefill):], default=0) <= target.max_batch_rows()


def test_ngram_accepts_a_lot_on_repetitive_text(qwen3):
    """On a prompt that makes the tiny Qwen3 repeat itself, prompt lookup accepts most of the
    text: under 0.5 base passes per token at k = 7, against plain decode's 1.0."""
    result = onebit.run(qwen3, NgramHead(n=3, k=8), PROMPTS["repetitive"], max_tokens=N, k=7)
    assert result.stats.accepted >= N // 2
    assert result.stats.passes_per_token < 0.5


def test_one_pass_heads_never_cost_more_passes_than_plain_decode(target, tmp_path):
    """A one-pass head costs at most one base pass per emitted token whatever it proposes (a
    batch always emits t1), here on a prompt with no repeats and a random DFlash draft."""
    prompt = list(range(10, 30))  # no token repeats: nothing to look up at first
    for name in ("ngram", "dflash"):
        result = onebit.run(target, make_head(name, target, tmp_path / name), prompt,
                            max_tokens=N, k=7)
        assert result.stats.passes_per_token <= 1.0


@pytest.mark.parametrize("kind", ["qwen3", "qwen3_5"])
def test_suffix_cached_arm_accepts_whole_drafts(target, kind, tmp_path, target_dirs):
    """The suffix-cached arm is not a plain decode in disguise: with greedy's own answer in the
    cache, most of the plain prompt's tokens come from accepted drafts, so the contract above
    holds it through long accepted blocks, not only through rejections."""
    head = make_head("suffix-cached", target, tmp_path, target_dirs)
    result = onebit.run(target, head, PROMPTS["plain"], max_tokens=N, k=7)
    assert result.stats.accepted >= N // 2, result.stats
