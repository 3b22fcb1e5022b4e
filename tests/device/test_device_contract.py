"""The contract on the real forward, on the backend --onebit-device names (`pytest -m device`).

Skips with the probe's reason where that backend cannot run (docs/device.md). Both families
run: the dense Qwen3 (a KV cache only) and the Qwen3.5 hybrid (whose gated-delta-net state a
partial accept must roll back exactly). The checks are the ones the toy base proves, held
against the device forward: the text of a speculative run equals plain decode's on the same
device, every pass law holds, and the next step after the run gives logits identical to plain
decode's at that position.
"""

import numpy as np
import pytest

import onebit
from pytest_onebit import (
    Oracle,
    assert_logits_match,
    assert_pass_law,
    garbage_head,
    half_head,
    perfect_head,
)
from pytest_onebit.device.probe import FAMILIES

pytestmark = pytest.mark.device

PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]
N = 24


def next_step_equals_plain_decode(model, token: int) -> None:
    """One step past the run, then the same step after plain decode of the same length: the
    logits must be bit-identical (the run left exactly plain decode's state)."""
    after_run = model.step(token, len(PROMPT) + N)
    onebit.greedy(model, PROMPT, max_tokens=N)
    after_greedy = model.step(token, len(PROMPT) + N)
    assert_logits_match(after_run, after_greedy, rel_l1=0.0)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
def test_speculative_text_and_next_step_equal_plain_decode(onebit_device_model, family, flavour):
    """On the device, a perfect head's run (k = 7) emits plain decode's tokens at the pass
    law's cost, and the next step after the run scores plain decode's logits bit for bit."""
    model, k = onebit_device_model(family), 7
    oracle = Oracle.from_greedy(model, PROMPT, N + k + 2)
    result = onebit.run(model, perfect_head(oracle, flavour), PROMPT, max_tokens=N, k=k)
    assert result.tokens == list(oracle.tokens[:N])
    assert_pass_law(steps=result.stats.steps, batches=result.stats.batches, emitted=N, k=k,
                    max_batch_rows=model.max_batch_rows(), two_pass=flavour == "two-pass")
    next_step_equals_plain_decode(model, oracle.tokens[N])


@pytest.mark.parametrize("family", FAMILIES)
def test_partial_accepts_leave_plain_decodes_state(onebit_device_model, family):
    """A head right for half its drafts makes every verify a partial accept (through the GDN
    layers in the hybrid); the text is plain decode's and the next step is bit-identical."""
    model = onebit_device_model(family)
    oracle = Oracle.from_greedy(model, PROMPT, N + 9)
    result = onebit.run(model, half_head(oracle), PROMPT, max_tokens=N, k=7)
    assert result.tokens == list(oracle.tokens[:N])
    assert 0 < result.stats.accepted < result.stats.proposed  # partial accepts happened
    next_step_equals_plain_decode(model, oracle.tokens[N])


def test_garbage_head_costs_plain_decode(onebit_device_base):
    """On the device, drafts that are always wrong cost one pass per token and change nothing."""
    oracle = Oracle.from_greedy(onebit_device_base, PROMPT, N + 9)
    result = onebit.run(onebit_device_base, garbage_head(oracle), PROMPT, max_tokens=N, k=7)
    assert result.tokens == list(oracle.tokens[:N])
    assert result.stats.passes_per_token == 1.0
    assert np.isfinite(onebit_device_base.last_hidden()).all()
