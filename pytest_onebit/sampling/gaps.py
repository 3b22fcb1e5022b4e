"""How far a sampled loop is from plain sampling, scenario by scenario: the measure a negative
control is held to.

S1 passes or fails; a negative control (a catalogue mutant of the sampling code) must also be
shown to be *wrong by a margin*, not only to raise somewhere. `gaps(run)` enumerates `run` on
every S1 scenario and reports, per scenario, the largest per-sequence difference from plain
sampling's exact distribution, or the error the loop raised there. `largest_gap` picks the
worst scenario that ran to the end.

    python -m pytest_onebit.sampling.gaps [MODULE:FUNC]

prints the gaps of the loop it imports (default `onebit.loop:run`) as JSON, one object per
scenario: how `pytest_onebit.mutants.controls` measures a mutant inside its scratch copy.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from pytest_onebit.loop.trace import RunFn
from pytest_onebit.sampling.enumeration import distance
from pytest_onebit.sampling.scenarios import SamplingScenario, distribution_scenarios
from pytest_onebit.sampling.trace import execute_sampled


@dataclass(frozen=True)
class ScenarioGap:
    """One scenario's verdict: `gap` (largest |P_run(seq) - P_plain(seq)|, at `sequence`) when
    the run completed on every leaf, else `error` (the exception's type and message)."""

    scenario: str
    gap: float | None = None
    sequence: tuple[int, ...] | None = None
    error: str | None = None


def gaps(run: RunFn, scenarios: Sequence[SamplingScenario] | None = None) -> list[ScenarioGap]:
    """`run`'s distance from plain sampling on each scenario (default: S1's grid)."""
    out = []
    for scenario in scenarios if scenarios is not None else distribution_scenarios():
        trace = execute_sampled(run, scenario)
        if trace.error is not None:
            error = trace.error
            out.append(ScenarioGap(scenario.id, error=f"{type(error).__name__}: {error}"))
            continue
        assert trace.speculative is not None
        gap, seq = distance(trace.speculative, trace.plain)
        out.append(ScenarioGap(scenario.id, gap=gap, sequence=seq))
    return out


def largest_gap(found: Sequence[ScenarioGap]) -> ScenarioGap | None:
    """The completed scenario with the largest gap (None if every scenario raised)."""
    completed = [g for g in found if g.gap is not None]
    return max(completed, key=lambda g: g.gap) if completed else None  # type: ignore[arg-type,return-value]


def main(argv: Sequence[str] | None = None) -> int:
    from pytest_onebit.loader import load_loop

    args = list(sys.argv[1:] if argv is None else argv)
    run = load_loop(args[0] if args else "onebit.loop:run")
    print(json.dumps([asdict(g) for g in gaps(run)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
