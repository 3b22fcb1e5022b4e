"""What the plugin costs every pytest run of an environment where onebit is installed.

Two figures, each the median [min..max] of fresh interpreters:
- import: `python -X importtime`'s cumulative time of `pytest_onebit.plugin` after pytest
  itself is loaded (as it is when pytest loads the plugin);
- session: the wall time of `pytest --collect-only` on an empty project with the plugin loaded
  (A) and with `-p no:onebit` (B), run A B A B so a machine that slows down moves both alike.

    .venv/bin/python benchmarks/plugin_import.py [--runs 15]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def import_ms() -> float:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c",
                          "import pytest, _pytest.pytester; import pytest_onebit.plugin"],
                         capture_output=True, text=True, check=True).stderr
    line = next(x for x in out.splitlines() if re.search(r"\| pytest_onebit\.plugin$", x))
    return int(line.split("|")[1]) / 1000.0


def session_s(project: Path, *extra: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                    "-p", "no:cacheprovider", *extra], cwd=project, capture_output=True)
    return time.perf_counter() - start


def spread(values: list[float], unit: str, digits: int = 1) -> str:
    return (f"{statistics.median(values):.{digits}f} {unit} "
            f"[{min(values):.{digits}f}..{max(values):.{digits}f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    imports = [import_ms() for _ in range(runs)]
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_nothing.py").write_text("def test_x():\n    pass\n")
        with_plugin, without = [], []
        for _ in range(runs):
            with_plugin.append(session_s(project))
            without.append(session_s(project, "-p", "no:onebit"))
    added = [1000 * (a - b) for a, b in zip(with_plugin, without, strict=True)]
    print(f"plugin import after pytest: {spread(imports, 'ms')} ({runs} interpreters)")
    print(f"pytest --collect-only, empty project: with the plugin "
          f"{spread([1000 * s for s in with_plugin], 'ms', 0)}, without "
          f"{spread([1000 * s for s in without], 'ms', 0)}; added per run "
          f"{spread(added, 'ms', 0)} (A B A B, {runs} pairs)")


if __name__ == "__main__":
    main()
