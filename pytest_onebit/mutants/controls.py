"""The negative controls' margins: how far each mutant of a sampling catalogue moves the loop's
exact output distribution away from plain sampling's.

A catalogue run proves each mutant is killed; a mutant could be killed only by raising, which
shows it is broken but not that the distribution check would see it. Here each mutant is
applied to its own scratch copy, `python -m pytest_onebit.sampling.gaps` enumerates the mutated
loop on every S1 scenario there, and the control's margin is the largest per-sequence
difference over the scenarios that ran to the end. A control is demonstrated when that margin
is at least `MARGIN` (1e-3; a right loop is within about 1e-15).

    python -m pytest_onebit.mutants.controls [CATALOGUE_DIR]   # default mutants/sampling

prints `mutant | largest gap | at scenario | sequence | scenarios >= 1e-3 | raised`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pytest_onebit.mutants.catalogue import Mutant, load_catalogue
from pytest_onebit.mutants.scratch import apply_diff, make_scratch, scratch_env
from pytest_onebit.sampling.gaps import ScenarioGap, largest_gap

MARGIN = 1e-3
TIMEOUT_S = 900


@dataclass(frozen=True)
class ControlGap:
    """One mutant's gaps over the S1 scenarios, or why they could not be measured."""

    mutant: str
    gaps: tuple[ScenarioGap, ...] = ()
    problem: str | None = None  # the diff did not apply, or the measurement crashed

    @property
    def largest(self) -> ScenarioGap | None:
        return largest_gap(self.gaps)

    @property
    def margin(self) -> float:
        worst = self.largest
        return worst.gap if worst is not None and worst.gap is not None else 0.0

    @property
    def differing(self) -> int:
        """Scenarios where the distribution is off by at least MARGIN."""
        return sum(1 for g in self.gaps if g.gap is not None and g.gap >= MARGIN)

    @property
    def raised(self) -> int:
        return sum(1 for g in self.gaps if g.error is not None)


def measure_mutant(root: Path, mutant: Mutant, copied: Sequence[str],
                   python: str = sys.executable) -> ControlGap:
    """Apply `mutant` to a scratch copy of `root` and measure its gaps there."""
    with tempfile.TemporaryDirectory(prefix=f"onebit-control-{mutant.number}-") as tmp:
        scratch = make_scratch(root, Path(tmp) / "project", copied)
        complaint = apply_diff(scratch, mutant.diff)
        if complaint is not None:
            return ControlGap(mutant.name, problem=f"the diff no longer applies: {complaint}")
        proc = subprocess.run([python, "-m", "pytest_onebit.sampling.gaps"], cwd=scratch,
                              env=scratch_env(scratch), capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        return ControlGap(mutant.name, problem=f"the measurement exited {proc.returncode}: "
                                               f"{' '.join(tail)}")
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    return ControlGap(mutant.name, tuple(
        ScenarioGap(r["scenario"], r["gap"], tuple(r["sequence"]) if r["sequence"] else None,
                    r["error"]) for r in rows))


def measure_catalogue(root: Path, folder: Path, jobs: int = 2) -> list[ControlGap]:
    """Every mutant of the catalogue in `folder`, measured `jobs` at a time (each in its own
    process), in the catalogue's order."""
    catalogue = load_catalogue(folder, root)
    copied = catalogue.config.copied(root, catalogue.folder)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda m: measure_mutant(root, m, copied), catalogue.mutants))


def render(controls: Sequence[ControlGap]) -> str:
    """The margins as a plain-text table."""
    head = ("mutant", "largest gap", "at scenario", "sequence", f">= {MARGIN:g}", "raised")
    rows = []
    for c in controls:
        worst = c.largest
        if c.problem is not None:
            rows.append((c.mutant, "-", c.problem, "", "", ""))
        elif worst is None:
            rows.append((c.mutant, "-", "(raised on every scenario)", "", "0",
                         f"{c.raised}/{len(c.gaps)}"))
        else:
            rows.append((c.mutant, f"{c.margin:.3e}", worst.scenario,
                         str(list(worst.sequence or ())), f"{c.differing}/{len(c.gaps)}",
                         f"{c.raised}/{len(c.gaps)}"))
    widths = [max(len(str(r[i])) for r in (head, *rows)) for i in range(len(head))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
             for r in (head, *rows)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path.cwd()
    folder = Path(args[0]) if args else root / "mutants" / "sampling"
    controls = measure_catalogue(root, folder)
    print(render(controls))
    short = [c.mutant for c in controls if c.margin < MARGIN]
    print(f"\n{len(controls) - len(short)} of {len(controls)} controls differ from plain "
          f"sampling by >= {MARGIN:g}" + (f"; not: {', '.join(short)}" if short else ""))
    return 1 if short else 0


if __name__ == "__main__":
    raise SystemExit(main())
