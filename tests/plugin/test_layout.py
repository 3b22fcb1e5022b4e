"""The documentation matches the code: docs/README.md's layout lists every module of both
packages and every mutant catalogue (and nothing that is gone), and each package's `__all__`
is exactly the API its documentation lists."""

from __future__ import annotations

import re
from pathlib import Path

import onebit
import pytest_onebit

ROOT = Path(__file__).parents[2]
CHECKED = ("onebit", "pytest_onebit", "mutants")  # the layout's roots this test holds to the tree
NAME = re.compile(r"[A-Za-z_][\w]*(\.py|/)")


def layout_entries(text: str) -> set[str]:
    """The paths the Layout block of docs/README.md names: each line is indented two spaces
    per level, its names (comma-separated, `x.py` or `folder/`) first, then two or more spaces
    and what it is; a line whose first part is not all names continues the one above."""
    block = text.split("## Layout", 1)[1]
    stack: list[str] = []
    found = set()
    for line in block.splitlines():
        if not line.startswith("    ") or not line.strip():
            continue
        body = line[4:]
        depth = (len(body) - len(body.lstrip(" "))) // 2
        names = [n.strip() for n in re.split(r"\s{2,}", body.strip(), maxsplit=1)[0].split(",")]
        if not all(NAME.fullmatch(n) for n in names) or depth > len(stack):
            continue
        del stack[depth:]
        for name in names:
            found.add("/".join([*stack, name]).rstrip("/"))
        folders = [n for n in names if n.endswith("/")]
        if folders:
            stack.append(folders[-1].rstrip("/"))
    return {e for e in found if e.split("/", 1)[0] in CHECKED}


def tree_entries() -> set[str]:
    """What must be listed: every module but `__init__.py` and every subpackage of both
    packages, and every catalogue folder (one holding catalogue.toml) under mutants/."""
    found = set(CHECKED)
    for package in ("onebit", "pytest_onebit"):
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if "__pycache__" in relative.parts:
                continue
            for i in range(1, len(relative.parts)):
                found.add("/".join(relative.parts[:i]))
            if path.name != "__init__.py":
                found.add(relative.as_posix())
    for toml in (ROOT / "mutants").glob("*/catalogue.toml"):
        found.add(toml.parent.relative_to(ROOT).as_posix())
    return found


def test_the_layout_lists_every_module_and_catalogue_and_nothing_gone():
    """Every module and subpackage of onebit and pytest_onebit and every mutant catalogue is
    in docs/README.md's layout, and everything the layout lists under them exists."""
    listed = layout_entries((ROOT / "docs" / "README.md").read_text(encoding="utf-8"))
    listed.discard("pytest_onebit/__init__.py")  # the facade is named on purpose
    actual = tree_entries()
    assert not actual - listed, f"missing from docs/README.md's layout: {sorted(actual - listed)}"
    assert not listed - actual, f"in docs/README.md's layout but absent: {sorted(listed - actual)}"


def test_the_layout_parser_sees_a_missing_module():
    """The check above can fail: a layout without one module's line is caught."""
    text = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.strip().startswith("gaps.py"))
    assert "pytest_onebit/sampling/gaps.py" in layout_entries(text)
    assert "pytest_onebit/sampling/gaps.py" not in layout_entries(text.replace(line + "\n", ""))


def documented_api(doc: str) -> set[str]:
    """The names in backticks in the bullet list of the "## The public API" section of
    `doc`."""
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    section = text.split("## The public API", 1)[1].split("\n## ", 1)[0]
    listed = next(p for p in section.split("\n\n") if p.lstrip().startswith("- "))
    return set(re.findall(r"`([A-Za-z_]\w*)`", listed))


def test_each_package_exports_exactly_its_documented_api():
    """`pytest_onebit.__all__` is the list in docs/harness.md and `onebit.__all__` the list in
    docs/contract.md: no internal (execute, run_check, load_object) leaks out, and every
    documented name resolves."""
    for package, doc in ((pytest_onebit, "harness.md"), (onebit, "contract.md")):
        documented = documented_api(doc)
        assert set(package.__all__) == documented, (
            f"{package.__name__}.__all__ vs docs/{doc}: exported, not documented "
            f"{sorted(set(package.__all__) - documented)}; documented, not exported "
            f"{sorted(documented - set(package.__all__))}")
        for name in package.__all__:
            getattr(package, name)
    assert not {"execute", "run_check", "load_object"} & set(pytest_onebit.__all__)
    assert {"SamplingContract", "check_sampling",
            "assert_distribution_equivalent"} <= set(pytest_onebit.__all__)
