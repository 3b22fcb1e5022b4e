"""The device forward against the host reference, and its weights kept on the device.

Skips with the probe's reason where the chosen backend cannot run (docs/device.md).
"""

import hashlib

import numpy as np
import pytest

import onebit
from pytest_onebit.device.budget import assert_within_budget, logits_budget
from pytest_onebit.device.probe import FAMILIES

pytestmark = pytest.mark.device

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]


@pytest.mark.parametrize("family", FAMILIES)
def test_device_logits_within_budget_of_host(onebit_device_model, onebit_host_model, family):
    """At every position of a prompt the device's logits lie within the reduction-scaled
    budget (pytest_onebit/device/budget.py) of the host forward's, fed the same tokens."""
    device, host = onebit_device_model(family), onebit_host_model(family)
    eps = float(np.finfo(host.dtype).eps)
    for pos, token in enumerate(PROMPT):
        expected = host.step(token, pos)
        budget = logits_budget(host.last_hidden(), host.weights.lm_head(), host.layer_count, eps)
        assert_within_budget(device.step(token, pos), expected, budget)


def reply_digest(model, tokens: list[int]) -> str:
    return hashlib.sha256(np.asarray(tokens, dtype="<i8").tobytes()).hexdigest()


def test_weights_prepared_once_against_every_token(onebit_device_model):
    """Residency A/B: with weights resident each is prepared (uploaded) once for the whole
    reply; with `unpack_per_token` every product prepares its weight again. The replies'
    sha256 are identical: where the weights live changes no bit."""
    resident = onebit_device_model("qwen3_5")
    per_token = onebit_device_model("qwen3_5", unpack_per_token=True)
    replies = {}
    for arm, model in (("resident", resident), ("per-token", per_token)):
        result = onebit.greedy(model, PROMPT, max_tokens=12)
        replies[arm] = reply_digest(model, result.tokens)
    weights = resident.backend.prepared_weights
    assert weights > 0 and resident.backend.prepares == weights
    assert per_token.backend.prepared_weights == 0
    assert per_token.backend.prepares == per_token.backend.products == resident.backend.products
    assert replies["resident"] == replies["per-token"]
