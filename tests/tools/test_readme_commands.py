"""The README opens as a project's README does (its title, what it is, then a quick start) and
the quick start's two commands are the ones a newcomer runs and CI runs as written."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    """The commands of the first code block under "## Quick start"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^## Quick start\n\n```sh\n(.*?)^```", text, re.M | re.S)
    assert block, "README.md has no ```sh block right under '## Quick start'"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_opens_with_its_title_then_the_quick_start():
    """The first line is the title, the next paragraph says what onebit and pytest_onebit are,
    and the quick start is the first section: a reader meets the name, the purpose and the
    two commands before any detail."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.startswith("# onebit\n\n")
    sections = re.findall(r"^## (.+)$", text, re.M)
    assert sections[0] == "Quick start"
    intro = text[len("# onebit\n\n"):text.index("## Quick start")]
    assert "pytest_onebit" in intro and "speculative" in intro.lower()


def test_the_quick_start_gives_two_commands():
    """Command 1 creates the venv, installs with the dev and peer extras (without
    byte-compiling every installed module up front: half of pip's time, and Python compiles
    what it imports on first use) and proves; command 2 runs the non-device tests with that
    venv's python, on every core."""
    commands = readme_commands()
    assert len(commands) == 2, commands
    install, tests = commands
    assert install.startswith("python3 -m venv .venv && .venv/bin/pip install --no-compile -e")
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
