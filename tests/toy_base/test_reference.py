"""The references (`onebit.greedy`, `onebit.sample`) live apart from the loop: `onebit.reference`
and everything it imports, run for real, never import `onebit.loop`. A helper shared by the loop
and its reference would let one bug move both, where I1 (the run equals greedy) cannot see it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onebit
import onebit.reference

ROOT = Path(onebit.__file__).resolve().parent.parent

# Imports onebit.reference with `onebit.loop` made unimportable: the top package is entered as a
# bare namespace (its __init__, the public facade, imports everything on purpose), then every
# import the reference's closure makes runs, and any of them reaching onebit.loop raises.
PROBE = """
import importlib.abc, sys, types
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "onebit.loop" or name.startswith("onebit.loop."):
            raise ImportError("onebit.reference imported onebit.loop")
        return None
sys.meta_path.insert(0, Refuse())
package = types.ModuleType("onebit")
package.__path__ = [{path!r}]
sys.modules["onebit"] = package
import onebit.reference
assert "onebit.loop" not in sys.modules
print(sorted(m for m in sys.modules if m.startswith("onebit")))
"""


def test_reference_never_imports_the_loop():
    """Importing onebit.reference (and its whole import closure, for real) with onebit.loop
    made unimportable succeeds, and onebit.loop is never loaded."""
    probe = PROBE.format(path=str(ROOT / "onebit"))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "onebit.reference" in done.stdout and "onebit.loop" not in done.stdout


def test_the_probe_catches_an_import_of_the_loop(tmp_path):
    """The probe fails on a module that does import the loop (a copy of the reference with one
    line added), so the test above can fail."""
    copy = tmp_path / "onebit"
    copy.mkdir()
    for source in (ROOT / "onebit").glob("*.py"):
        (copy / source.name).write_text(source.read_text())
    (copy / "reference.py").write_text((ROOT / "onebit" / "reference.py").read_text()
                                       + "\nfrom onebit.loop import run  # noqa\n")
    probe = PROBE.format(path=str(copy))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode != 0
    assert "onebit.reference imported onebit.loop" in done.stderr


def test_public_names_are_the_references():
    """`onebit.greedy` and `onebit.sample` are the reference module's functions, and so is
    `onebit.loop.greedy`, kept for code that imported it from there."""
    import onebit.loop

    assert onebit.greedy is onebit.reference.greedy is onebit.loop.greedy
    assert onebit.sample is onebit.reference.sample
