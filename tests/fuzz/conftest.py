"""The fuzz suite's budget: quick by default (CI: a few seconds), long on demand.

    ONEBIT_FUZZ=long pytest tests/fuzz             # thousands of fresh examples per test
    ONEBIT_FUZZ_TALLY=out.json pytest tests/fuzz   # also count the outcomes, by kind

Every fuzz case ends in a typed error naming the culprit or in the right answer; the tally
(kind -> outcome -> count) is what the table of docs/errors.md is made from.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # hostile.py, corrupt.py, fuzzing.py

from fuzzing import TALLY  # noqa: E402


@pytest.fixture(scope="session")
def tally():
    """`tally(kind, outcome)` counts one case; written to $ONEBIT_FUZZ_TALLY at the end."""
    yield lambda kind, outcome: TALLY[kind].update([outcome])
    out = os.environ.get("ONEBIT_FUZZ_TALLY")
    if out:
        Path(out).write_text(json.dumps({k: dict(v) for k, v in sorted(TALLY.items())},
                                        indent=2))
