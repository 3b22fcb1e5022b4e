"""Enumerating a sampled loop on one scenario: its exact output distribution (every branch of
its rng), plain sampling's beside it, and what every leaf left behind in the base and head.

`SampledRun` is the case the sampling checks read: the loop and the scenario (S2 and S3 run
the loop themselves) and, made on first use and shared by S1 and S4, the enumerated trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from pytest_onebit.doubles.sampling_heads import ToySamplingHead
from pytest_onebit.doubles.toy import ToyBase
from pytest_onebit.loop.trace import RunFn
from pytest_onebit.sampling.enumeration import (
    Distribution,
    exact_distribution,
    plain_distribution,
)
from pytest_onebit.sampling.scenarios import SamplingScenario


@dataclass
class SamplingTrace:
    """The exact distributions of one scenario, and the faults any leaf left behind."""

    scenario: SamplingScenario
    plain: Distribution
    speculative: Distribution | None = None
    error: BaseException | None = None
    faults: list[str] = field(default_factory=list)  # first fault per kind, with its leaf

    def distribution(self) -> Distribution:
        __tracebackhide__ = True
        if self.error is not None:
            raise AssertionError(
                f"the loop raised {type(self.error).__name__}: {self.error}") from self.error
        assert self.speculative is not None
        return self.speculative


def leaf_faults(scenario: SamplingScenario, base: ToyBase, head, tokens: list[int]) -> list[str]:
    """What one enumerated run left wrong in the base and the head (empty when nothing)."""
    expected = [*scenario.prompt, *tokens]
    faults = []
    if base.committed != expected:
        faults.append(f"the base committed {base.committed}, prompt + emitted is {expected}")
    elif base.state != base.replay(expected).state:
        faults.append("the base's recurrent state differs from stepping prompt + emitted")
    if base.bad_pos or base.misuse:
        faults.append((base.misplaced or base.misuse)[0])
    wide = base.too_wide(len(scenario.prompt))
    if wide:
        faults.append(f"a verify was too wide: {wide[0]}")
    if head.committed != expected:
        faults.append(f"the head was given {head.committed}, prompt + emitted is {expected}")
    if head.resets != 1:
        faults.append(f"the head was reset {head.resets} times in one run")
    return faults


def execute_sampled(run: RunFn, scenario: SamplingScenario) -> SamplingTrace:
    """Enumerate `run` on `scenario` and compute plain sampling's distribution beside it."""
    s = scenario
    base = s.make_base()
    trace = SamplingTrace(s, plain_distribution(s.make_base(), s.prompt,
                                                max_tokens=s.max_tokens, sampling=s.sampling))
    head = s.make_head(base)

    def on_leaf(base: ToyBase, head: ToySamplingHead, result) -> None:
        if len(trace.faults) < 3:
            for fault in leaf_faults(s, base, head, list(result.tokens)):
                trace.faults.append(f"{fault} (leaf emitting {list(result.tokens)})")
        head.resets = 0

    try:
        trace.speculative = exact_distribution(
            run, base, head, s.prompt, max_tokens=s.max_tokens, k=s.k, sampling=s.sampling,
            on_leaf=on_leaf)
    except (Exception, SystemExit) as error:  # a broken loop may raise anything; every check
        # reports it
        trace.error = error
    return trace


class SampledRun:
    """One (loop, scenario): the sampling contract's case."""

    def __init__(self, run: RunFn, scenario: SamplingScenario) -> None:
        self.run = run
        self.scenario = scenario

    @cached_property
    def trace(self) -> SamplingTrace:
        """The enumeration, made once (S1 and S4 read the same one)."""
        return execute_sampled(self.run, self.scenario)
