"""The base contract (B1..B8) on SmolLM2-135M-Instruct Q4_1 in float32, in a file of its own:
it is the slow stage's longest test (minutes on two cores), and pytest-xdist's loadfile
hands a whole file to one worker, so beside test_smollm2.py's transformers comparisons it
made that worker the stage's critical path. Skipped when the file is absent."""

from __future__ import annotations

import pytest

from onebit.gguf import read_gguf


@pytest.fixture(scope="module")
def contents(smollm2):
    return read_gguf(smollm2)


#: the prefill width the bases here declare: B7 and B8 walk every width up to it at every
#: position, and at the default (64) those two took 110 of the contract's 150 s here. 24
#: spans three of the kernels' 8-row tiles, and the widths up to it end in every partial
#: tile; every width up to 64 is walked on the tiny models of tests/base/test_forward_base.py.
PREFILL_ROWS = 24


def fresh32(contents, smollm2):
    """A new float32 SmolLM2 from the file's contents, read once (no re-reading per base)."""
    from onebit.models.registry import build_model

    return build_model(contents.config, contents.tensors, source=str(smollm2),
                       max_prefill_rows=PREFILL_ROWS)


@pytest.mark.slow
def test_base_contract_on_smollm2(contents, smollm2):
    """The base contract (B1..B8) holds on SmolLM2 in float32: batches equal steps bit for
    bit, commits, refusals and resets behave."""
    from pytest_onebit import check_base
    from pytest_onebit.base.checks import BaseSettings

    report = check_base(lambda: fresh32(contents, smollm2),
                        settings=BaseSettings(positions=(0, 2), script_length=8, examples=2))
    assert report.ok, report.to_text()
