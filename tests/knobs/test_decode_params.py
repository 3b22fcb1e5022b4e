"""`onebit.DecodeParams`, the one request object: what it settles once (the held ids of
min_tokens, greedy as no sampling), what it refuses at the boundary, and that `run` hands the
loop exactly its fields."""

from __future__ import annotations

import numpy as np
import pytest

import onebit
from onebit import DecodeParams, Processors, Sampling
from onebit.batch import BatchEngine, BatchRequest
from pytest_onebit.batch.toy import ToyBatchRows
from pytest_onebit.doubles.toy import ToyBase


@pytest.mark.parametrize("fields, message", [
    ({"prompt": [1, 2.5]}, "prompt[1] = 2.5 is not a token id"),
    ({"prompt": [True]}, "prompt[0] = True is not a token id"),
    ({"prompt": [3, -1]}, "prompt[1] = -1 is not a token id"),
    ({"prompt": "hello"}, "prompt must be token ids, got str"),
    ({"max_tokens": -1}, "max_tokens must be >= 0"),
    ({"max_tokens": 2.0}, "max_tokens must be >= 0, an integer, got 2.0"),
    ({"stop_ids": [0.5]}, "stop_ids[0] = 0.5 is not a token id"),
    ({"prediction": [1, None]}, "prediction[1] = None is not a token id"),
    ({"processors": {"min_tokens": 2}}, "processors must be an onebit.Processors"),
    ({"stop": "END"}, "stop must be a sequence of strings"),
])
def test_bad_fields_are_refused_naming_the_field(fields, message):
    """A value that is not what the field holds is a ValueError naming the field (and the
    index), never read as something else: a float or a bool is no token id."""
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        DecodeParams(**{"prompt": [1, 2], "max_tokens": 4, **fields})


def test_min_tokens_holds_back_every_id_that_ends_the_answer():
    """The stop ids (the model's end of turn and the request's stop_token_ids) are added to
    what min_tokens holds back, once, here: no layer below can end an answer early."""
    p = DecodeParams([1, 2], 8, stop_ids={0, 7}, processors=Processors(min_tokens=3))
    assert p.processors.held == frozenset({0, 7})
    kept = DecodeParams([1], 8, stop_ids={7}, processors=Processors(held=frozenset({5})))
    assert kept.processors.held == frozenset({5, 7})


def test_greedy_sampling_is_no_sampling_and_only_a_sampled_seed_is_seeded():
    """Temperature 0 is the greedy loop: the object holds no sampling, so a loop that only
    decodes greedily still runs it, and a seed alone promises nothing."""
    greedy = DecodeParams([1], 4, sampling=Sampling(temperature=0.0), seed=3)
    assert greedy.sampling is None and not greedy.seeded and greedy.sampled() == {}
    hot = DecodeParams([1], 4, sampling=Sampling(temperature=0.7), seed=3)
    assert hot.seeded and hot.sampled() == {"sampling": hot.sampling, "seed": 3}
    assert hot.with_seed(9).seed == 9 and hot.with_seed(9).sampling == hot.sampling


def test_run_hands_the_loop_exactly_the_fields():
    """`DecodeParams.run` is `onebit.run` with the fields spelled out by hand: the same tokens
    greedy and seeded-sampled, the stop id ending the answer through the consumer."""
    base = ToyBase(vocab_size=32, seed=4)
    for sampling, seed in ((None, None), (Sampling(temperature=0.9), 11)):
        p = DecodeParams([3, 1, 4], 12, sampling=sampling, seed=seed)
        by_hand = onebit.run(base, None, [3, 1, 4], max_tokens=12, k=1,
                             **({} if sampling is None else {"sampling": sampling, "seed": seed}))
        assert p.run(onebit.run, base, None, k=1).tokens == by_hand.tokens


def test_knobs_wrap_the_base_only_when_there_are_some():
    """`process` leaves a request without knobs on the base itself, and puts one with knobs
    on a ProcessedBase whose prompt is the request's."""
    base = ToyBase(vocab_size=32, seed=4)
    assert DecodeParams([1, 2], 4).process(base) is base
    wrapped = DecodeParams([1, 2], 4, processors=Processors(presence_penalty=1.0)).process(base)
    assert wrapped.prompt_len == 2 and not np.shares_memory(wrapped.step(1, 0), base.step(1, 0))


def test_the_batch_engine_takes_only_a_request_object():
    """`BatchRequest` carries the request object whole; anything else is refused at submit,
    naming what it got, and leaves nothing queued."""
    engine = BatchEngine(ToyBatchRows(1), max_rows=8, chunk=4)
    with pytest.raises(ValueError, match="BatchRequest.params must be a DecodeParams"):
        engine.submit(BatchRequest(params=[1, 2, 3]))
    assert engine.idle() and engine.stats.submitted == 0
    handle = engine.submit(BatchRequest.of([1, 2, 3], 5, stop_ids={0}))
    engine.run_until_idle(50)
    assert handle.result().finish in ("length", "stop")
