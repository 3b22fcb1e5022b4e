"""The README's first two lines are the commands a newcomer runs, and CI runs them as written."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines[:2]]


def test_the_readme_starts_with_two_commands():
    """Line 1 creates the venv, installs with the dev and peer extras and proves; line 2 runs
    the non-device tests with that venv's python, on every core."""
    install, tests = readme_commands()
    assert install.startswith("python3 -m venv .venv && .venv/bin/pip install -e")
    assert install.endswith("&& .venv/bin/onebit prove")
    assert tests.startswith('.venv/bin/python -m pytest -m "not device and not slow"')
    assert " -n auto" in tests


def test_ci_runs_readme_line_2_exactly_and_fails_on_no_tests():
    """.ci/run holds README line 2 verbatim, then turns pytest's exit status 5 (no test
    collected) into a failure, so a broken collection cannot pass CI; and it runs the slow
    tests the README line leaves out."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    _, tests = readme_commands()
    lines = [line.strip() for line in ci.splitlines()]
    assert tests in lines
    after = "\n".join(lines[lines.index(tests):])
    assert re.search(r'if \[ "\$status" -eq 5 \]; then\n.*\n\s*exit 1', after)
    assert '.venv/bin/python -m pytest -m "slow and not device"' in after
