"""The Hypothesis settings profiles onebit's property tests run under.

`onebit`: 300 examples locally; 2000, derandomized (the same examples every time) under
CI=true. `onebit-quick`: 100 derandomized examples, for runs that repeat the suite many times
(the mutant catalogues, mutmut). No deadline anywhere: shared machines are noisy, and speed is
benchmarked, not asserted.
"""

from __future__ import annotations

import os

NAMES = ("onebit", "onebit-quick")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def register() -> None:
    """Register both profiles (idempotent). Needs Hypothesis."""
    from hypothesis import HealthCheck, settings

    ci = in_ci()
    settings.register_profile(
        "onebit",
        max_examples=2000 if ci else 300,
        derandomize=ci,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=True,
    )
    settings.register_profile("onebit-quick", parent=settings.get_profile("onebit"),
                              max_examples=100, derandomize=True)
