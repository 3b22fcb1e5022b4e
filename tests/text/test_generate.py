"""`onebit.generate`: text through the loop, stopping at EOS/EOT, refusing what cannot run."""

import pytest

import onebit
from onebit.text import PromptError, Tokenizer


def test_generate_equals_greedy_decoded(tiny_model):
    """The text is exactly the decode of greedy's tokens after the encoded prompt, the
    RunResult is the loop's, and on_text's pieces join to the same text."""
    pieces = []
    gen = onebit.generate(tiny_model, "Hello, world", max_tokens=24, on_text=pieces.append)
    text, result = gen
    ids = tiny_model.tokenizer.encode("Hello, world")
    reference = onebit.greedy(tiny_model, ids, max_tokens=24).tokens
    assert result.tokens == reference[:len(result.tokens)]
    kept = [t for t in result.tokens if t not in tiny_model.tokenizer.stop_ids]
    assert text == tiny_model.tokenizer.decode(kept, skip_special_tokens=True)
    assert "".join(pieces) == text


def test_ngram_head_gives_the_same_text(tiny_model):
    """Prompt lookup changes the cost, never the text: the same words as plain decode on a
    prompt that repeats itself."""
    prompt = "abc abc abc abc abc abc abc abc"
    plain = onebit.generate(tiny_model, prompt, max_tokens=32, head="none")
    spec = onebit.generate(tiny_model, prompt, max_tokens=32, head="ngram", k=4)
    assert spec.text == plain.text and spec.result.tokens == plain.result.tokens


def test_auto_head_gives_the_same_text_and_keeps_its_policy(tiny_model):
    """head="auto" (prompt lookup under the cost policy) changes the cost, never the text; the
    policy is made once per model, so what it measured carries over to the next call."""
    from onebit.heads.registry import auto_head

    prompt = "abc abc abc abc abc abc abc abc"
    plain = onebit.generate(tiny_model, prompt, max_tokens=32, head="none")
    spec = onebit.generate(tiny_model, prompt, max_tokens=32, head="auto")
    assert spec.result.tokens == plain.result.tokens and spec.text == plain.text
    policy = auto_head(tiny_model)
    assert policy is auto_head(tiny_model) and 1 in policy.cost


def test_speculation_is_the_default_and_none_is_plain(tiny_model):
    """With no head named, generate runs the model's policy head (its rounds are counted
    there), with the text of plain decode; head=None and "none" run no head at all."""
    from onebit.heads.registry import auto_head

    prompt = "abc abc abc abc abc abc abc abc"
    policy = auto_head(tiny_model)
    rounds = len(policy.sent)
    default = onebit.generate(tiny_model, prompt, max_tokens=32)
    assert len(policy.sent) > rounds
    rounds = len(policy.sent)
    for plain_head in (None, "none"):
        plain = onebit.generate(tiny_model, prompt, max_tokens=32, head=plain_head)
        assert plain.result.tokens == default.result.tokens and plain.text == default.text
    assert len(policy.sent) == rounds


def test_a_seeded_sampled_run_with_the_default_head_is_reproducible(tiny_model):
    """The policy's draft lengths follow its clock and a sampled run's draws follow the draft
    lengths, so with a seed the default head decodes plain: the same seed, the same text, as
    `onebit.run` without a head gives; an unseeded sampled run still speculates."""
    from onebit.heads.registry import auto_head

    s = onebit.Sampling(temperature=0.9, top_k=40)
    policy = auto_head(tiny_model)
    rounds = len(policy.sent)
    runs = [onebit.generate(tiny_model, "abc abc abc abc", max_tokens=16, sampling=s, seed=3)
            for _ in range(2)]
    assert runs[0].text == runs[1].text and len(policy.sent) == rounds
    onebit.generate(tiny_model, "abc abc abc abc", max_tokens=16, sampling=s)
    assert len(policy.sent) > rounds


def test_a_seeded_sampled_run_with_a_named_head_drafts_without_the_policy(tiny_model):
    """A head the caller named keeps drafting under a seed, but without the policy (whose
    draft lengths follow its clock): the rounds draft, the policy is not asked, and the same
    seed gives the same tokens however the box's load moves the clock."""
    from onebit.heads.registry import policy_head

    s = onebit.Sampling(temperature=0.9, top_k=40)
    policy = policy_head(tiny_model, "ngram", 4)
    rounds = len(policy.sent)
    runs = [onebit.generate(tiny_model, "abc abc abc abc abc abc", max_tokens=24, sampling=s,
                            seed=3, head="ngram", k=4) for _ in range(3)]
    assert len({tuple(r.result.tokens) for r in runs}) == 1
    assert len(policy.sent) == rounds
    assert runs[0].result.stats.drafts_asked > 0


def test_named_one_pass_heads_run_under_the_policy(tiny_model):
    """"ngram" (like "auto") is prompt lookup under the model's cost policy, one per (head, k)
    and kept; with every_draft=True (the server's choice) it is the bare head, every draft
    sent."""
    from onebit.heads import NgramHead
    from onebit.heads.policy import PolicyHead
    from onebit.heads.registry import auto_head, resolve

    ngram, k = resolve("ngram", tiny_model, k=None)
    assert ngram is auto_head(tiny_model) and k == ngram.max_k
    capped, k = resolve("ngram", tiny_model, k=3)
    assert isinstance(capped, PolicyHead) and capped.max_k == 3 and k == 3
    assert capped is resolve("ngram", tiny_model, k=3)[0] and capped is not ngram
    bare, k = resolve("ngram", tiny_model, k=3, every_draft=True)
    assert isinstance(bare, NgramHead) and k == 3


def test_stops_at_eot_through_the_consumer_stop(tiny_model, byte_vocab):
    """When the model emits a stop token (here: the file's EOT is set to the third token
    greedy emits), the run stops there through on_token's stop: the token is emitted and
    committed (the loop's contract), `stopped` is set, and the text leaves it out."""
    tok = tiny_model.tokenizer
    ids = tok.encode("stop here")
    third = onebit.greedy(tiny_model, ids, max_tokens=3).tokens[2]
    stopping = Tokenizer.from_gguf_metadata(byte_vocab(**{"tokenizer.ggml.eot_token_id": third}))
    assert third in stopping.stop_ids
    gen = onebit.generate(tiny_model, "stop here", max_tokens=20, tokenizer=stopping)
    assert gen.result.tokens == onebit.greedy(tiny_model, ids, max_tokens=3).tokens
    assert gen.result.stopped and gen.stopped_on == third
    assert gen.text == stopping.decode(gen.result.tokens[:2], skip_special_tokens=True)
    for head in ("ngram", "auto"):
        again = onebit.generate(tiny_model, "stop here", max_tokens=20, tokenizer=stopping,
                                head=head, k=3)
        assert again.result.tokens == gen.result.tokens


def test_chat_messages_and_system(tiny_model):
    """Messages go through the chat template (ChatML here, the file has none) with the system
    turn first; the prompt ids are the template's text tokenized with its specials whole."""
    gen = onebit.generate(tiny_model, [{"role": "user", "content": "hi"}], system="Be brief.",
                          max_tokens=4)
    tok = tiny_model.tokenizer
    expected = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n" \
               "<|im_start|>assistant\n"
    assert gen.prompt_ids == tok.encode(expected, add_special_tokens=False)
    assert gen.prompt_ids[0] == 257


def test_refusals(tiny_model):
    """A prompt that fills the context is a PromptError naming both lengths; an unknown head
    name or a system turn on a raw prompt is a ValueError; nothing runs."""
    tiny_model.context_length = 8
    try:
        with pytest.raises(PromptError, match="12 tokens; the model's context is 8"):
            onebit.generate(tiny_model, "twelve bytes", chat=False, max_tokens=4)
        short = onebit.generate(tiny_model, "abc", chat=False, max_tokens=100)
        assert len(short.result.tokens) <= 5
    finally:
        del tiny_model.context_length
    with pytest.raises(ValueError, match="head must be one of"):
        onebit.generate(tiny_model, "x", head="medusa")
    with pytest.raises(ValueError, match="system= needs a chat prompt"):
        onebit.generate(tiny_model, "x", chat=False, system="s")


def test_sampling_keywords_pass_through(tiny_model):
    """`sampling` and `seed` reach the loop: the same seed gives the same text and the
    loop's own sampled tokens (`onebit.run` with the same arguments), the RunResult records
    the seed."""
    s = onebit.Sampling(temperature=0.9, top_k=40)
    a = onebit.generate(tiny_model, "Once", max_tokens=12, sampling=s, seed=7)
    b = onebit.generate(tiny_model, "Once", max_tokens=12, sampling=s, seed=7)
    ids = tiny_model.tokenizer.encode("Once")
    direct = onebit.run(tiny_model, None, ids, max_tokens=12, k=1, sampling=s, seed=7)
    assert a.text == b.text and a.result.tokens == direct.tokens[:len(a.result.tokens)]
    assert a.result.seed == 7
