"""How far a device's logits may lie from the host reference's: an error budget scaled by the
reduction, not a bare elementwise tolerance (docs/device.md).

A dot product of length K whose terms are about |a| * |b| in size, summed in another order or
with another rounding, moves by about eps * K * mean|a| * mean|b|. The logits are the last of
a chain of such products (each layer adds its own), so the budget is that unit times a factor
per layer: `ULPS_PER_LAYER * (layers + 1)` units. Measured on the fabricated models (float32,
CPU torch against the host kernels): at most 3.2 units. The factor leaves room for other
summation orders (a GPU's) without hiding a wrong product: one term dropped or misplaced moves
a logit by about mean|a| * mean|b|, 1 / (eps * K) units (about 3e4 for K = 256 in float32).
"""

from __future__ import annotations

import numpy as np

ULPS_PER_LAYER = 8


def logits_budget(hidden: np.ndarray, lm_head: np.ndarray, layers: int, eps: float) -> float:
    """The largest allowed |device - host| of a logit, for final-normed `hidden` `[H]` and the
    `[V, H]` lm_head, after `layers` layers computed with unit roundoff `eps`."""
    unit = eps * hidden.shape[-1] * float(np.abs(hidden).mean()) * float(np.abs(lm_head).mean())
    return ULPS_PER_LAYER * (layers + 1) * unit


def assert_within_budget(device: np.ndarray, host: np.ndarray, budget: float) -> None:
    """Every logit of `device` within `budget` of the host reference `host`."""
    __tracebackhide__ = True
    diff = np.abs(np.asarray(device, np.float64) - np.asarray(host, np.float64))
    worst = int(np.argmax(diff))
    if not diff[worst] <= budget:
        raise AssertionError(
            f"device logits off the host reference by {diff[worst]:.3g} at index {worst} "
            f"({device[worst]!r} vs {host[worst]!r}); the budget is {budget:.3g}"
        )
