"""`onebit peer transformers` across transformers releases: which checks fail on which
version, and the upstream issue each failure matches.

    python3 benchmarks/peer_matrix.py [--versions 4.57.6,5.17.0,5.18.0,newest] [--arm NAME]
                                      [--venvs DIR] [--format md|text]

Each version gets its own venv, `<venvs>/peers-<version>` (made when missing: torch==2.13.0
first, the CPU build the registry serves here, then `transformers==<version>`, numpy,
safetensors, tokenizers); "newest" is what `pip index versions transformers` calls LATEST.
onebit runs from this checkout (PYTHONPATH), so the venvs hold only the peer. Prints the table
of check x version (the failing arms, each with the known upstream issue it matches, or
"new"); exits 1 when a known bug fails to show on a version that has it, or shows on one that
does not (docs/peers.md has the measured table).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VERSIONS = ("4.57.6", "5.17.0", "5.18.0", "newest")

#: Known upstream bugs: the (check, arm) cells each one fails, and the releases that have it.
KNOWN = {
    # an overshooting run also hands back a longer text, so the next step is off too
    "#46993": {"cells": {("I9-budget", "toy-lookup"), ("I2-next-step", "toy-lookup")},
               "has": lambda v: v < (5, 17), "what": "prompt lookup overshoots max_new_tokens"},
    "#48280": {"cells": {(c, "mistral-sliding") for c in ("I1-text", "I2-next-step",
                                                          "I7-pass-law", "I9-budget",
                                                          "I10-eos")},
               "has": lambda v: (5, 17) <= v < (5, 18),
               "what": "assisted decoding with sliding-window layers: size mismatch"},
    # stop strings are a stopping criterion: the root (criteria read once per accepted block,
    # not per token) also lets a consumer's own criterion overshoot
    "#48039": {"cells": {(c, a) for c in ("I10-stop-string", "I10-stopping-criteria")
                         for a in ("toy-perfect", "toy-garbage", "toy-half", "toy-lookup")},
               "has": lambda v: True,  # every release measured, the newest included
               "what": "stop_strings with an assistant raises / ignored inside a block"},
}


def default_venvs() -> Path:
    """$ONEBIT_HOME/venvs (~/.cache/onebit/venvs): the venvs are reused between runs."""
    home = os.environ.get("ONEBIT_HOME") or Path.home() / ".cache" / "onebit"
    return Path(home) / "venvs"


def parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:2])


def newest(pip: str) -> str:
    out = subprocess.run([pip, "index", "versions", "transformers"], capture_output=True,
                         text=True, check=True).stdout
    match = re.search(r"LATEST:\s*(\S+)", out) or re.search(r"\(([^)]+)\)", out)
    if not match:
        raise SystemExit(f"cannot read the newest transformers from: {out[:200]!r}")
    return match.group(1)


def venv_for(version: str, venvs: Path) -> Path:
    """The venv holding transformers==version (made here when missing)."""
    path = venvs / f"peers-{version}"
    python = path / "bin" / "python"
    probe = [str(python), "-c", "import transformers, sys; print(transformers.__version__)"]
    if python.exists() and subprocess.run(probe, capture_output=True, text=True
                                          ).stdout.strip() == version:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    pip = [str(path / "bin" / "pip"), "install", "-q"]
    subprocess.run([*pip, "torch==2.13.0"], check=True)  # first: the local CPU build
    subprocess.run([*pip, f"transformers=={version}", "numpy", "safetensors", "tokenizers"],
                   check=True)
    return python


def run(python: Path, arms: list[str]) -> dict:
    cmd = [str(python), "-m", "onebit.cli", "peer", "transformers", "--format", "json"]
    for arm in arms:
        cmd += ["--arm", arm]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                               "OMP_NUM_THREADS": "1"})
    if done.returncode not in (0, 1):
        raise SystemExit(f"{python}: exit {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def failing(report: dict) -> dict[tuple[str, str], str]:
    return {(check, arm): cell["detail"] for check, row in report["checks"].items()
            for arm, cell in row["arms"].items() if cell["status"] == "failed"}


def issue_of(cell: tuple[str, str]) -> str:
    for issue, known in KNOWN.items():
        if cell in known["cells"]:
            return issue
    return "new"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", default=",".join(DEFAULT_VERSIONS))
    parser.add_argument("--arm", action="append", default=[])
    parser.add_argument("--venvs", type=Path, default=default_venvs(),
                        help="where the per-release venvs live (default $ONEBIT_HOME/venvs)")
    parser.add_argument("--format", choices=("md", "text"), default="md")
    args = parser.parse_args(argv)
    versions = [newest("pip") if v == "newest" else v for v in args.versions.split(",")]
    results = {}
    for version in versions:
        results[version] = failing(run(venv_for(version, args.venvs), args.arm))
        print(f"{version}: {len(results[version])} failing cell(s)", file=sys.stderr)
    checks = sorted({c for cells in results.values() for c, _ in cells})
    sep = " | " if args.format == "md" else "  "
    print(sep.join(["check", *versions]).join(("| ", " |")) if args.format == "md"
          else sep.join(["check", *versions]))
    if args.format == "md":
        print("|" + "---|" * (len(versions) + 1))
    for check in checks:
        row = [check]
        for version in versions:
            arms = sorted({a for c, a in results[version] if c == check})
            row.append(", ".join(f"{a} ({issue_of((check, a))})" for a in arms) or "passed")
        print(sep.join(row).join(("| ", " |")) if args.format == "md" else sep.join(row))
    return verify(results)


def verify(results: dict[str, dict]) -> int:
    """Each known bug fails on exactly the versions that have it."""
    wrong = []
    for issue, known in KNOWN.items():
        for version, cells in results.items():
            shows = any(cell in cells for cell in known["cells"])
            if shows != known["has"](parse_version(version)):
                wrong.append(f"{issue} {'shows' if shows else 'does not show'} on {version}")
    for line in wrong:
        print(f"mismatch: {line}", file=sys.stderr)
    for version, cells in results.items():
        for cell, detail in cells.items():
            if issue_of(cell) == "new":
                print(f"new on {version}: {cell[0]} / {cell[1]}: {detail[:200]}",
                      file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
