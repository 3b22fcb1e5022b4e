"""`BatchEngine`'s own behaviour on the toy batched base: drawn scenarios keep the batch
contract, bad settings and requests are refused by name before anything is queued, a failing
base fails only the sequences of its pass, closing cancels cleanly, and an engine stepped by a
driver thread while other threads submit gives each answer its run alone."""

import threading

import pytest
from hypothesis import given

from onebit.batch import BatchEngine, BatchRefused, BatchRequest, QueueFull
from pytest_onebit.batch.runner import check_batch, onebit_batch_engine
from pytest_onebit.batch.strategies import batch_scenarios
from pytest_onebit.batch.toy import ToyBatchRows

MAKE = onebit_batch_engine()


@given(batch_scenarios())
def test_drawn_scenarios_keep_the_batch_contract(scenario):
    """Any drawn mix of arrivals, prompt lengths, heads, greedy and seeded-sampled sequences,
    stops and cancels, on any slots, pass width, chunk and queue, keeps M1..M6."""
    check_batch(MAKE, scenarios=[scenario])


@pytest.mark.parametrize("settings, message", [
    ({"max_rows": 0}, "max_rows must be an integer >= 1"),
    ({"chunk": 0}, "chunk must be an integer >= 1"),
    ({"queue": -1}, "queue must be an integer >= 0"),
    ({"max_rows": 4, "chunk": 8}, "chunk (8) must not exceed max_rows (4)"),
    ({"context": 1}, "context must be an integer in [2, inf]"),
    ({"slots": 3}, "slots is 3, but the rows hold 2"),
])
def test_bad_settings_are_refused_by_name(settings, message):
    """Each setting out of range is a ValueError naming it and the value."""
    with pytest.raises(ValueError) as caught:
        BatchEngine(ToyBatchRows(2), **settings)
    assert message in str(caught.value)


def test_a_context_past_the_bases_own_is_refused():
    """A slot cannot hold more positions than the base itself can."""
    with pytest.raises(ValueError, match=r"context must be an integer in \[2, 32\]"):
        BatchEngine(ToyBatchRows(1, context=32), context=33)


@pytest.mark.parametrize("request_kw, error, message", [
    ({"prompt": []}, ValueError, "prompt is empty"),
    ({"prompt": [1, 99]}, ValueError, "prompt[1] = 99 is outside the vocabulary"),
    ({"max_tokens": -1}, ValueError, "max_tokens must be >= 0"),
    ({"k": 9, "head": lambda clock: None}, BatchRefused, "k is 9; a slot verifies at most 7"),
    ({"max_tokens": 40}, BatchRefused, "need 43 positions; a slot holds 32"),
])
def test_bad_requests_are_refused_before_anything_is_queued(request_kw, error, message):
    """A request the engine cannot take raises a typed error naming the value at submit, and
    leaves no trace: nothing queued, nothing counted but the refusal."""
    engine = BatchEngine(ToyBatchRows(2, context=32), max_rows=16, chunk=8)
    with pytest.raises(error) as caught:
        engine.submit(BatchRequest.of(**{"prompt": [1, 2, 3], "max_tokens": 4, **request_kw}))
    assert message in str(caught.value)
    assert engine.idle() and engine.queue_depth() == 0 and engine.stats.submitted == 0


def test_the_queue_refuses_past_its_limit_and_drops_nothing():
    """With one slot and a queue of one, a burst of three takes two (the free slot and the
    queue) and refuses the third with QueueFull; both taken ones finish."""
    engine = BatchEngine(ToyBatchRows(1), max_rows=8, chunk=4, queue=1)
    taken = [engine.submit(BatchRequest.of([1, 2], 5)) for _ in range(2)]
    with pytest.raises(QueueFull, match="all 1 slots are taken and 2 requests wait"):
        engine.submit(BatchRequest.of([1, 2], 5))
    engine.run_until_idle(100)
    assert [h.result().finish for h in taken] == ["length", "length"]
    assert engine.stats.refused == 1 and engine.stats.finished == 2


class _FailingRows(ToyBatchRows):
    def __init__(self, *args, fail_at: int, **kw):
        super().__init__(*args, **kw)
        self.fail_at = fail_at

    def rows(self, *args):
        if self.passes == self.fail_at:
            self.passes += 1
            raise MemoryError("the device went away")
        return super().rows(*args)


def test_a_failing_pass_fails_its_sequences_and_the_engine_serves_on():
    """A base that raises in one pass ends each sequence of that pass with finish "error",
    the error as its cause and what it had committed kept; a request submitted afterwards is
    served as if nothing happened."""
    rows = _FailingRows(2, fail_at=3)
    engine = BatchEngine(rows, max_rows=8, chunk=4)
    first = [engine.submit(BatchRequest.of([1, 2, 3], 10)) for _ in range(2)]
    engine.run_until_idle(100)
    for h in first:
        r = h.result()
        assert r.finish == "error" and isinstance(r.error.__cause__, MemoryError)
        assert len(r.tokens) == 2  # the prefill's token and one step, before the third pass
    later = engine.submit(BatchRequest.of([1, 2, 3], 10))
    engine.run_until_idle(100)
    alone = BatchEngine(ToyBatchRows(1), max_rows=8, chunk=4)
    ref = alone.submit(BatchRequest.of([1, 2, 3], 10))
    alone.run_until_idle(100)
    assert later.result().tokens == ref.result().tokens and later.result().finish == "length"
    assert engine.stats.errors == 2 and engine.stats.finished == 1


def test_close_cancels_what_waits_and_runs_and_refuses_new_requests():
    """close() cancels the running and the waiting sequence (each result "cancelled", with what
    it had committed), the engine drains to idle, and a later submit is refused by name."""
    engine = BatchEngine(ToyBatchRows(1), max_rows=8, chunk=4)
    running = engine.submit(BatchRequest.of([1, 2], 30))
    waiting = engine.submit(BatchRequest.of([3, 4], 30))
    for _ in range(3):
        engine.step()
    engine.close()
    engine.run_until_idle(10)
    assert running.result().finish == "cancelled" and len(running.result().tokens) >= 1
    assert waiting.result().finish == "cancelled" and waiting.result().tokens == []
    with pytest.raises(BatchRefused, match="shutting down"):
        engine.submit(BatchRequest.of([1], 1))


def test_result_waits_with_a_timeout():
    """A handle's result() before its sequence ends raises TimeoutError, not a half result."""
    engine = BatchEngine(ToyBatchRows(1), max_rows=8, chunk=4)
    handle = engine.submit(BatchRequest.of([1, 2], 3))
    with pytest.raises(TimeoutError, match="has not finished"):
        handle.result(timeout=0.01)
    engine.run_until_idle(20)
    assert handle.result(timeout=1).finish == "length"


def test_a_driver_thread_and_concurrent_submitters_give_each_its_answer_alone():
    """The server's shape: one thread steps the engine while eight threads submit at once;
    every answer equals its run alone."""
    engine = BatchEngine(ToyBatchRows(3), max_rows=16, chunk=4)
    prompts = [[i, (i * 7) % 48, 5] for i in range(8)]
    handles = [None] * 8
    stop = threading.Event()

    def drive():
        while not stop.is_set():
            if not engine.step():
                stop.wait(0.001)

    def submit(i):
        handles[i] = engine.submit(BatchRequest.of(prompts[i], 12 + i))

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    submitters = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
    for t in submitters:
        t.start()
    for t in submitters:
        t.join()
    results = [h.result(timeout=30) for h in handles]
    stop.set()
    driver.join(5)
    for i, r in enumerate(results):
        alone = BatchEngine(ToyBatchRows(1), max_rows=16, chunk=4)
        ref = alone.submit(BatchRequest.of(prompts[i], 12 + i))
        alone.run_until_idle(200)
        assert r.tokens == ref.result().tokens, i
