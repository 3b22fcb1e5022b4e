"""Fixtures for the tool tests: a tiny fabricated Qwen3 target and a DFlash draft for it
(written once per session), the prompt files under data/, and the commands run in-process."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from onebit.heads import fabricate_dflash
from onebit.models import fabricate_model, load_model

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    return fabricate_model(tmp_path_factory.mktemp("qwen3"), "qwen3", quantized=False)


@pytest.fixture(scope="session")
def draft_dir(tmp_path_factory, model_dir) -> Path:
    return fabricate_dflash(tmp_path_factory.mktemp("dflash"), load_model(model_dir),
                            block_size=5)


@pytest.fixture
def target(model_dir):
    return load_model(model_dir)


@pytest.fixture
def data() -> Path:
    return DATA


@pytest.fixture
def cli(capsys):
    """Run `onebit <argv>` in-process through the commands' own add_parser / main; returns
    (exit status, stdout, stderr)."""
    from onebit.commands import acceptance, sweep

    def run(*argv: str) -> tuple[int, str, str]:
        parser = argparse.ArgumentParser(prog="onebit")
        sub = parser.add_subparsers(dest="command", required=True)
        for module in (acceptance, sweep):
            module.add_parser(sub).set_defaults(_main=module.main)
        args = parser.parse_args([str(a) for a in argv])
        status = args._main(args)
        out, err = capsys.readouterr()
        return status, out, err

    return run


@pytest.fixture(scope="session")
def tally_tools():
    """Counts outcomes by kind for the fuzz table (see tests/fuzz/conftest.py)."""
    import json
    import os
    from collections import Counter, defaultdict

    counts: dict[str, Counter] = defaultdict(Counter)
    yield lambda kind, outcome: counts[kind].update([outcome])
    out = os.environ.get("ONEBIT_FUZZ_TALLY")
    if out:
        path = Path(out).with_suffix(".tools.json")
        path.write_text(json.dumps({k: dict(v) for k, v in counts.items()}, indent=2))
