"""`onebit peer` in-process: the table, its exit status, expected failures and their
staleness, and a peer that cannot run here."""

from __future__ import annotations

import json

import pytest

from onebit.cli import main

OPEN_BUGS = ["--expect-fail", "I10-stop-string=transformers #48039",
             "--expect-fail", "I10-stopping-criteria=transformers #48039"]


def test_llama_cpp_not_installed_is_not_applicable(capsys):
    """Without llama_cpp the llama.cpp peer reports itself not applicable, naming why, and
    exits 0 (nothing failed)."""
    pytest.importorskip("pytest")  # always there: the point is the branch below
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is not None:
        pytest.skip("llama_cpp is installed here: the arm runs instead")
    assert main(["peer", "llama_cpp", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unavailable"] == "llama_cpp not installed"


def test_a_declared_check_no_arm_judged_is_not_applicable_not_stale(capsys):
    """The core's statuses: a declared expected failure on a peer that cannot run here is not
    applicable (nothing ran), not a stale xpass, so the run exits 0; a declared check the peer
    does not have is bad input (exit 2)."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is not None:
        pytest.skip("llama_cpp is installed here: the arm runs instead")
    assert main(["peer", "llama_cpp", "--format", "json",
                 "--expect-fail", "I1-text=some open bug"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["checks"]["I1-text"]["status"] == "not applicable"
    assert main(["peer", "llama_cpp", "--expect-fail", "I10-eos=not a llama_cpp check"]) == 2
    assert "unknown llama_cpp peer check" in capsys.readouterr().err


def test_lookup_arm_table_and_declared_bugs(capsys):
    """Prompt lookup on the installed transformers: every check passes or is a declared open
    upstream bug (exit 0); the JSON names each cell's status."""
    pytest.importorskip("transformers")
    status = main(["peer", "transformers", "--arm", "toy-lookup", "--format", "json",
                   *OPEN_BUGS])
    report = json.loads(capsys.readouterr().out)
    assert report["checks"]["I1-text"]["arms"]["toy-lookup"]["status"] == "passed"
    assert report["checks"]["I9-budget"]["status"] == "passed"
    assert status == 0, report


def test_stale_declaration_fails(capsys):
    """Declaring a check that passes as an expected failure makes the run fail (exit 1):
    the declaration is stale."""
    pytest.importorskip("transformers")
    status = main(["peer", "transformers", "--arm", "toy-lookup", "--format", "md",
                   *OPEN_BUGS, "--expect-fail", "I9-budget=a bug fixed long ago"])
    out = capsys.readouterr().out
    assert status == 1
    assert "I9-budget" in out.splitlines()[-1]


def test_unknown_arm_is_bad_input(capsys):
    """An arm the peer does not have is one line on stderr and exit 2."""
    pytest.importorskip("transformers")
    assert main(["peer", "transformers", "--arm", "nope"]) == 2
    assert "unknown transformers arm" in capsys.readouterr().err


def test_bad_delta_is_a_usage_error(capsys):
    """--delta outside (0, 1) is refused by the parser: one line naming it, exit 2."""
    with pytest.raises(SystemExit) as stop:
        main(["peer", "transformers", "--delta", "2"])
    assert stop.value.code == 2
    assert "--delta must be in (0, 1)" in capsys.readouterr().err


BLOCKED = """
import sys
sys.modules["torch"] = None  # as if the peer extra were not installed
from onebit.cli import main
sys.exit(main(["peer", "transformers", "--format", "json"]))
"""


def test_without_torch_the_peer_is_not_applicable():
    """Without the peer extra, `onebit peer transformers` says which module is missing and
    exits 0: nothing ran, nothing failed."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["unavailable"] == "torch not installed (the peer extra)"
