"""Training stopped and resumed (`onebit.train.store`, `fit(checkpoint=, deadline=)`, `onebit
train-head --budget`): a resumed run ends where one never stopped would have, a deadline ends
a fit in time, and a work directory made for another recipe is refused, not mixed."""

from __future__ import annotations

import argparse
import time

import numpy as np
import pytest
from peer_modules import lazy

import onebit
from onebit.commands.common import duration
from onebit.models import fabricate_model, load_model
from onebit.train import data, fit, store

torch = lazy("torch")


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return load_model(fabricate_model(tmp_path_factory.mktemp("qwen3"), "qwen3",
                                      quantized=False))


@pytest.fixture(scope="module")
def samples(target):
    from onebit.heads.eagle import default_taps

    taps = default_taps(target.layer_count)
    seqs = []
    for i in range(6):
        prompt = [3 + i, 50 + i, 7]
        result = onebit.greedy(target, prompt, max_tokens=24)
        seqs.append(data.sequence_of(target, prompt + list(result.tokens), 3, taps))
    d2t = data.draft_vocabulary(seqs, 128, target.vocab_size)
    return fit.samples_of(seqs, d2t, target.vocab_size), d2t


def _head(target, d2t):
    lm = np.asarray(target.weights.get(target.weights.lm_head_name())[d2t], np.float32)
    head = fit.torch_head(target.hidden_size, 32, lm, np.ones(target.hidden_size, np.float32),
                          eps=target.config.rms_norm_eps, seed=0)
    head.d2t = d2t
    return head


def _embed(target):
    def embed(ids):
        return np.stack([np.asarray(target.embed_row(int(t)), np.float32) for t in ids])
    return embed


class Stop(Exception):
    pass


def test_a_fit_killed_and_resumed_ends_bit_for_bit_where_an_unbroken_one_does(
        target, samples, tmp_path):
    """A fit saving a checkpoint after every batch, stopped after batch 5 of 12 and run again
    with the same checkpoint, ends with the same weights, bit for bit, and the same epoch
    losses as a fit never stopped: the optimiser, the schedule and each epoch's order come
    back with it."""
    train, d2t = samples
    embed = _embed(target)
    whole = _head(target, d2t)
    report = fit.fit(whole, train, train, embed, epochs=3, batch=48, lr=3e-3)

    broken = _head(target, d2t)
    ckpt = tmp_path / "fit.pt"

    def stop_at_5(done, total, loss):
        if done == 5:
            raise Stop

    with pytest.raises(Stop):
        fit.fit(broken, train, train, embed, epochs=3, batch=48, lr=3e-3, checkpoint=ckpt,
                checkpoint_every=0.0, on_batch=stop_at_5)
    resumed = _head(target, d2t)  # a fresh process: nothing but the checkpoint carries over
    seen = []
    again = fit.fit(resumed, train, train, embed, epochs=3, batch=48, lr=3e-3, checkpoint=ckpt,
                    on_batch=lambda done, total, loss: seen.append(done))
    assert seen[0] == 5 and seen[-1] == 3 * -(-len(train) // 48)
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name
    assert again.epochs == report.epochs
    assert again.cumulative == report.cumulative


def test_a_deadline_shortens_the_fit_and_its_schedule(target, samples):
    """A fit whose deadline has passed by the time its first 20 batches are timed stops at
    batch 21 (at least one batch past the timing) instead of running its 60, and still
    reports the held-out acceptance; without a deadline it runs them all."""
    train, d2t = samples
    totals = []
    fit.fit(_head(target, d2t), train, train, _embed(target), epochs=20, batch=32,
            deadline=time.monotonic(), on_batch=lambda d, t, loss: totals.append((d, t)))
    assert totals[-1] == (21, 21)
    assert totals[0][1] == 20 * -(-len(train) // 32)


def test_duration_reads_the_forms_a_budget_is_written_in():
    """--budget takes 90s, 30m, 2h30m, 1.5h and plain seconds; anything else, nothing and
    zero are refused by name."""
    parse = duration("--budget")
    assert [parse(t) for t in ("90s", "30m", "2h30m", "1.5h", "45", "1h0m30s")] == \
        [90, 1800, 9000, 5400, 45, 3630]
    for bad in ("", "3x", "h", "30 m", "0", "-5m", "0s", "1e9"):
        with pytest.raises(argparse.ArgumentTypeError, match="--budget"):
            parse(bad)


@pytest.mark.slow
def test_a_store_resumed_holds_what_one_run_makes_and_refuses_another_recipe(tmp_path):
    """SmolLM2 distils 5 training prompts in shards of 2 (and 1 held out): a run capped at one
    shard stops there; a first run whose deadline has passed distils only the held-out
    answers; a half-written shard (`.part`) is ignored; the next run distils the three
    shards, and every answer is token for token the
    one a single uninterrupted store holds. Opening the store for other prompts, another base
    or another answer length is refused by name; the time spent adds up over the runs."""
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model

    model = load_text_model(skip_unless_cached("smollm2"), kernel="int8")
    training = ["Name a colour.", "Say hi.", "Count to three.", "Name a fruit.", "Say bye."]
    held = ["Name a tree."]

    def opened(path, **over):
        args = {"base_sha256": "a" * 64, "taps": (2, 15), "max_tokens": 6,
                "training": training, "held": held, "shard": 2} | over
        return store.Store.open(path, **args)

    capped = opened(tmp_path / "c")
    assert capped.distil(model, most=1) == 1 and capped.prompts_done() == 2
    first = opened(tmp_path / "a")
    assert first.distil(model, deadline=time.monotonic()) == 0
    assert first.has_held() and first.spent() > 0
    (tmp_path / "a" / (store.shard_name(0) + ".part")).write_bytes(b"killed halfway")
    spent = first.spent()
    again = opened(tmp_path / "a")
    assert again.distil(model) == 3 and again.prompts_done() == 5
    assert again.spent() > spent
    whole = opened(tmp_path / "b")
    assert whole.distil(model) == 3

    def tokens(s):
        return [list(q.tokens) for q in s.training_sequences(
            vocab_size=model.vocab_size, hidden_size=model.hidden_size)]

    assert tokens(again) == tokens(whole) and len(tokens(whole)) == 5
    for over, field in (({"training": training[:4]}, "prompts_sha256"),
                        ({"base_sha256": "b" * 64}, "base_sha256"),
                        ({"max_tokens": 7}, "max_tokens")):
        with pytest.raises(store.StoreError, match=field):
            opened(tmp_path / "a", **over)
    assert store.load_prompts(tmp_path / "a") == (training, held)
