"""The fuzz suite's settings and its tally of outcomes (see conftest.py)."""

from __future__ import annotations

import os
from collections import Counter, defaultdict

from hypothesis import HealthCheck, settings

LONG = os.environ.get("ONEBIT_FUZZ", "") == "long"


def fuzz_settings(quick: int = 40, long: int = 2000):
    """Hypothesis settings of a fuzz test: `quick` cases by default, the same ones every run
    (CI stays reproducible and fast), or `long` fresh ones with ONEBIT_FUZZ=long."""
    return settings(max_examples=long if LONG else quick, derandomize=not LONG, deadline=None,
                    database=None, suppress_health_check=list(HealthCheck))


#: kind -> outcome -> count, for the table of docs/errors.md
TALLY: dict[str, Counter] = defaultdict(Counter)
