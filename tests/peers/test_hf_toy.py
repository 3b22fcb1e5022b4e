"""The history toy as a transformers model: the same text as onebit's toy base, either
spelling of the cache keyword, and a cache that cannot be cropped wrong silently."""

from __future__ import annotations

import pytest
from peer_modules import lazy

torch = lazy("torch")
transformers = lazy("transformers")
hf_run = lazy("pytest_onebit.peers.hf_run")
hf_toy = lazy("pytest_onebit.peers.hf_toy")
hf_toy_arms = lazy("pytest_onebit.peers.hf_toy_arms")
pytestmark = pytest.mark.usefixtures("quiet_transformers")

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]


def test_plain_greedy_is_onebit_greedy():
    """transformers' plain greedy on the wrapped toy emits onebit's greedy on the toy base."""
    assert hf_run.generate(hf_toy.toy_model(), PROMPT, 12) == hf_toy_arms.reference(PROMPT, 12)


@pytest.mark.parametrize("keyword", ["past_key_values", "cache"])
def test_either_cache_keyword(keyword):
    """The forward takes the cache under either spelling, and answers in the installed one:
    prefill then one step equals the whole history in one pass."""
    model = hf_toy.toy_model()
    whole = model(torch.tensor([PROMPT])).logits[0, -1]
    store = transformers.DynamicCache()
    model(torch.tensor([PROMPT[:-1]]), **{keyword: store})
    out = model(torch.tensor([PROMPT[-1:]]), **{keyword: store})
    assert torch.equal(out.logits[0, -1], whole)
    assert getattr(out, hf_toy.CACHE_FIELD) is store


def test_a_wrong_crop_changes_the_next_logits():
    """Two rejected drafts cropped away leave the prompt's logits; one left in (a crop one
    short) changes the next logits, which is what makes the toy see a wrong crop."""
    model = hf_toy.toy_model()
    nxt = torch.tensor([[11]])
    logits = []
    for drop in (2, 1):
        store = transformers.DynamicCache()
        model(torch.tensor([PROMPT + [7, 7]]), **{hf_toy.CACHE_FIELD: store})
        store.crop(-drop)  # negative: remove that many tokens (every release measured)
        logits.append(model(nxt, **{hf_toy.CACHE_FIELD: store}).logits)
    assert torch.equal(logits[0], model(torch.tensor([PROMPT + [11]])).logits[:, -1:])
    assert not torch.equal(logits[0], logits[1])
