"""The exact distribution on the real forward: fabricated Qwen3 and Qwen3.5 (GDN hybrid)
targets with the DFlash, MTP and prompt-lookup heads, top-k 2 or 3 over 3 or 4 tokens.

Every branch of the sampled run's rng is enumerated on the NumPy forward, so a partial accept
that rolled the KV cache or the recurrent state back wrong would show as a difference from
plain sampling; the float32 forward is batch-invariant, so the two agree to float64 rounding."""

from __future__ import annotations

import pytest

import onebit
from onebit import Sampling
from onebit.heads import NgramHead, fabricate_dflash, fabricate_mtp, load_dflash, load_mtp
from onebit.models import fabricate_model, load_model
from pytest_onebit.sampling.enumeration import (
    assert_distribution_equivalent,
    exact_distribution,
    plain_distribution,
)

PROMPT = [5, 9, 17, 5, 9]  # a repeat, so prompt lookup proposes
CASES = [  # (head, k, top_k, tokens)
    ("dflash", 2, 2, 3), ("mtp", 3, 2, 3), ("ngram", 3, 2, 3), ("ngram-two-pass", 2, 2, 3),
]


@pytest.fixture(scope="module")
def target_dirs(tmp_path_factory):
    return {kind: fabricate_model(tmp_path_factory.mktemp(kind), kind, quantized=False)
            for kind in ("qwen3", "qwen3_5")}


def make_head(name: str, target, tmp_path):
    if name == "dflash":
        return load_dflash(fabricate_dflash(tmp_path / "dflash", target, block_size=4), target)
    if name == "mtp":
        return load_mtp(fabricate_mtp(tmp_path / "mtp", target), target)
    return NgramHead(n=2, k=4, two_pass=name == "ngram-two-pass")


@pytest.mark.parametrize("kind", ["qwen3", "qwen3_5"])
@pytest.mark.parametrize(("head", "k", "top_k", "tokens"), CASES)
def test_S1_distribution_on_the_real_forward(target_dirs, tmp_path, kind, head, k, top_k,
                                             tokens):
    """S1 on the real forward: the sampled loop's exact output distribution with a DFlash,
    MTP or prompt-lookup head equals plain sampling's, to 1e-12."""
    target = load_model(target_dirs[kind])
    sampling = Sampling(1.0, top_k=top_k)
    d = exact_distribution(onebit.run, target, make_head(head, target, tmp_path), PROMPT,
                           max_tokens=tokens, k=k, sampling=sampling)
    want = plain_distribution(target, PROMPT, max_tokens=tokens, sampling=sampling)
    assert_distribution_equivalent(d, want, atol=1e-12)
    assert d.leaves > len(want.probs)  # the drafts were judged, not only sampled plainly
