"""The contract on the real forward, on an accelerator (`pytest -m device`).

Skips everywhere else with the probe's reason (docs/device.md). The checks are the ones the
toy base proves, held against whatever `device_base` provides: the text of a speculative run
equals plain decode's on the same device, every pass law holds, and one step past the run
gives logits identical to plain decode's at that position.
"""

import numpy as np
import pytest

import onebit
from pytest_onebit import Oracle, assert_logits_match, assert_pass_law, garbage_head, perfect_head

pytestmark = pytest.mark.device

PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]
N = 24


@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
@pytest.mark.parametrize("k", [3, 7])
def test_speculative_text_and_next_step_equal_plain_decode(device_base, flavour, k):
    """On the device, a perfect head's run emits greedy's tokens at the pass law's cost, and
    the next step after the run scores the same logits as plain decode's next step."""
    oracle = Oracle.from_greedy(device_base, PROMPT, N + k + 2)
    result = onebit.run(device_base, perfect_head(oracle, flavour), PROMPT, max_tokens=N, k=k)
    assert result.tokens == list(oracle.tokens[:N])
    assert_pass_law(steps=result.stats.steps, batches=result.stats.batches, emitted=N, k=k,
                    max_batch_rows=device_base.max_batch_rows(), two_pass=flavour == "two-pass")
    after_run = device_base.step(oracle.tokens[N], len(PROMPT) + N)
    onebit.greedy(device_base, PROMPT, max_tokens=N)
    after_greedy = device_base.step(oracle.tokens[N], len(PROMPT) + N)
    assert_logits_match(after_run, after_greedy, rel_l1=0.0)


def test_garbage_head_costs_plain_decode(device_base):
    """On the device, drafts that are always wrong cost one pass per token and change nothing."""
    oracle = Oracle.from_greedy(device_base, PROMPT, N + 9)
    result = onebit.run(device_base, garbage_head(oracle), PROMPT, max_tokens=N, k=7)
    assert result.tokens == list(oracle.tokens[:N])
    assert result.stats.passes_per_token == 1.0
    assert np.isfinite(device_base.last_hidden()).all()
