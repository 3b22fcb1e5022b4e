"""The head a served request decodes with (`onebit.serve.heads`): by default prompt lookup
under the cost policy, plain decoding for seeded sampled requests; the named heads
send every draft; and either way a greedy answer is plain decoding's."""

from __future__ import annotations

import pytest

from onebit.heads import NgramHead
from onebit.heads.policy import PolicyHead
from onebit.serve.heads import DEFAULT_HEAD, batched_head, head_for


@pytest.fixture(scope="module")
def smollm2():
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model

    skip_unless_cached("smollm2")
    return load_text_model(None, kernel="int8")


def test_the_default_drafts_under_the_policy_and_samples_plainly(smollm2):
    """The default is `auto`: a greedy request gets prompt lookup under the cost policy (so
    it never sends drafts that do not pay); a seeded sampled one, and one that asks for no
    speculation, decode plainly (a seeded answer must not follow the policy's clock)."""
    assert DEFAULT_HEAD == "auto"
    head, k = head_for(DEFAULT_HEAD, smollm2)
    assert isinstance(head, PolicyHead) and k == head.max_k
    assert head_for(DEFAULT_HEAD, smollm2, seeded=True) == (None, 1)
    assert head_for(DEFAULT_HEAD, smollm2, speculative=False) == (None, 1)


def test_a_named_head_sends_every_draft(smollm2):
    """`--head ngram` is prompt lookup itself, not under the policy: the served checks judge
    the drafts it sends, greedy and sampled."""
    for sampled in (False, True):
        head, _ = head_for("ngram", smollm2, seeded=sampled)
        assert isinstance(head, NgramHead)


def test_the_batched_default_is_the_policy_too():
    """In parallel, `auto` makes a policy head per sequence over its share of the passes, and
    a seeded sampled request decodes plainly; `ngram` makes prompt lookup itself."""
    factory, k = batched_head("auto")
    assert isinstance(factory(lambda: 0.0), PolicyHead) and k >= 1
    assert batched_head("auto", seeded=True) == (None, 0)
    ngram, _ = batched_head("ngram", seeded=True)
    assert isinstance(ngram(lambda: 0.0), NgramHead)


def test_the_default_server_answers_greedy_as_plain_and_seeded_the_same(smollm2):
    """onebit serve's default engine: a greedy answer equals the same request's with
    `speculative: false`, token for token, on a prompt whose answer repeats (where prompt
    lookup has something to draft); a seeded sampled answer is decoded plainly and is the
    same twice."""
    from onebit.serve import Engine
    from onebit.serve.requests import parse

    engine = Engine(smollm2)
    prompt = "A: hello\nB: hello\nA: hello\nB: hello\nA: hello\nB:"
    greedy = {"prompt": prompt, "max_tokens": 24, "temperature": 0}
    spec = engine.complete(parse("completion", greedy))
    plain = engine.complete(parse("completion", {**greedy, "speculative": False}))
    assert spec.token_ids == plain.token_ids
    assert spec.stats["head"] == "auto" and plain.stats["head"] == "none"
    seeded = {"prompt": prompt, "max_tokens": 12, "temperature": 0.8, "seed": 7}
    first, again = (engine.complete(parse("completion", seeded)) for _ in range(2))
    assert first.stats["head"] == "none" and first.token_ids == again.token_ids
