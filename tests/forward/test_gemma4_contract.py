"""The loop's contract on the Gemma 4 forward: with the plugin's oracle heads (perfect, garbage,
half; k 3 and 7; one- and two-pass rounds), with any pattern of accepts Hypothesis draws, and
with the real heads (prompt lookup, DFlash, MTP), a speculative run emits plain greedy decode's
tokens, and the step after the run scores the logits plain decode's next step scores, bit for
bit. The prompt and the run cross the sliding window (8) and wrap its ring (16 slots) several
times, so every partial accept rolls back sliding, global and shared K/V."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import onebit
from onebit.heads import NgramHead, fabricate_dflash, fabricate_mtp, load_dflash, load_mtp
from onebit.models import fabricate_model, load_model
from pytest_onebit import (
    Oracle,
    assert_logits_match,
    assert_pass_law,
    garbage_head,
    half_head,
    perfect_head,
)
from pytest_onebit.doubles.heads import pattern_head

PROMPT = [5, 17, 99, 3, 240, 17, 99, 3, 60, 61, 62]  # longer than the window
N = 40
ARMS = {"perfect": perfect_head, "garbage": garbage_head, "half": half_head}


@pytest.fixture(scope="module")
def gemma4_dir(tmp_path_factory):
    return fabricate_model(tmp_path_factory.mktemp("gemma4"), "gemma4")


@pytest.fixture(scope="module")
def model(gemma4_dir):
    return load_model(gemma4_dir)


@pytest.fixture(scope="module")
def truth(model):
    """Greedy's tokens for PROMPT (with room for k drafts past N) and plain decode's logits
    at the step after N tokens."""
    oracle = Oracle.from_greedy(model, PROMPT, N + 9)
    onebit.greedy(model, PROMPT, max_tokens=N)
    after = model.step(oracle.tokens[N], len(PROMPT) + N)
    return oracle, after


def _assert_exact(model, result, truth):
    oracle, after = truth
    assert result.tokens == list(oracle.tokens[:N])
    assert model.committed_length == len(PROMPT) + N
    assert_logits_match(model.step(oracle.tokens[N], len(PROMPT) + N), after, rel_l1=0.0)


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
@pytest.mark.parametrize("k", [3, 7])
@pytest.mark.parametrize("arm", list(ARMS))
def test_contract_arms_give_greedy_text_and_next_step(model, truth, arm, k, flavour):
    """Each oracle arm emits greedy's 40 tokens at its pass law's cost (perfect and garbage),
    and the next step after the run (after partial accepts, for half) is plain decode's, bit
    for bit."""
    oracle, _ = truth
    result = onebit.run(model, ARMS[arm](oracle, flavour), PROMPT, max_tokens=N, k=k)
    _assert_exact(model, result, truth)
    if arm != "half":
        assert_pass_law(steps=result.stats.steps, batches=result.stats.batches, emitted=N, k=k,
                        max_batch_rows=model.max_batch_rows(), two_pass=flavour == "two-pass",
                        head=arm)


@settings(max_examples=12, deadline=None)
@given(bits=st.lists(st.booleans(), min_size=1, max_size=12), k=st.integers(1, 8),
       flavour=st.sampled_from(["one-pass", "two-pass"]))
def test_any_accept_pattern_is_exact(model, truth, bits, k, flavour):
    """Whatever drafts are accepted and rejected (a pattern Hypothesis draws, cycled over
    positions and slots), the text is greedy's and the next step is plain decode's."""
    oracle, _ = truth
    result = onebit.run(model, pattern_head(oracle, bits, flavour), PROMPT, max_tokens=N, k=k)
    _assert_exact(model, result, truth)


@pytest.mark.parametrize("name", ["ngram", "dflash", "mtp"])
def test_real_heads_give_greedy_text_and_next_step(model, truth, gemma4_dir, name, tmp_path):
    """Prompt lookup, a (random) DFlash draft reading the Gemma 4's tapped layers and its
    soft-capped lm_head, and an MTP head, each at k = 7: greedy's text, plain decode's next
    step."""
    if name == "ngram":
        head = NgramHead(n=2, k=8)
    elif name == "dflash":
        head = load_dflash(fabricate_dflash(tmp_path / "d", model, block_size=5), model)
    else:
        head = load_mtp(fabricate_mtp(tmp_path / "m", model), model)
    result = onebit.run(model, head, PROMPT, max_tokens=N, k=7)
    _assert_exact(model, result, truth)
    assert result.stats.emitted == N
