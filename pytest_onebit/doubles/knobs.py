"""Named sets of the knobs a request sends (`onebit.processors.Processors`), for scenarios.

A scenario names its knobs (`Scenario.knobs`, `SamplingScenario.knobs`) so it stays hashable
and its id stays readable; the toy base it runs on is then wrapped in a `ProcessedBase`. Each
set is chosen to change what the toy emits: penalties that fire on the toy's repeats, a bias
strong enough to move argmaxes, a `min_tokens` that holds back a token the toy would pick.
"""

from __future__ import annotations

from onebit.processors import Processors

#: knob sets for the loop contract's 64-token toy
KNOBS = {
    "penalties": Processors(presence_penalty=0.6, frequency_penalty=0.4,
                            repetition_penalty=1.5),
    "bias-min": Processors(logit_bias={3: 1.5, 7: -2.0, 11: 3.0}, min_tokens=12,
                           held=frozenset({0, 5, 9})),
    "all": Processors(presence_penalty=-0.5, frequency_penalty=0.8, repetition_penalty=0.7,
                      logit_bias={2: 2.5, 4: -1.0}, min_tokens=6, held=frozenset({1, 6})),
}

#: knob sets for the sampling contract's 3- to 5-token toys, where each one shifts the mass
SMALL_KNOBS = {
    "penalties": Processors(presence_penalty=0.7, frequency_penalty=0.5,
                            repetition_penalty=1.6),
    "bias-min": Processors(logit_bias={1: 1.2, 2: -0.8}, min_tokens=2, held=frozenset({0})),
}


def knobs(name: str | None, small: bool = False) -> Processors | None:
    """The named set (None: no knobs)."""
    if name is None:
        return None
    table = SMALL_KNOBS if small else KNOBS
    if name not in table:
        raise ValueError(f"unknown knobs {name!r}; known: {sorted(table)}")
    return table[name]
