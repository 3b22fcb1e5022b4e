"""The loop and sampling contracts on the toy processed by the knobs (`pytest_onebit.doubles.
knobs`): I1..I13 with plain greedy decoding under the same knobs as the reference, and S1..S4
enumerating the processed target's exact distribution. A draft's penalty history, its
min_tokens count and a rejection's roll-back are all judged here; `mutants/knobs/` is killed
by these and by tests/knobs/test_processors.py (N1..N3)."""

from pytest_onebit import LoopContract, SamplingContract
from pytest_onebit.loop.scenarios import knob_scenarios
from pytest_onebit.sampling.scenarios import knob_sampling_scenarios


class TestLoopUnderKnobs(LoopContract):
    """I1..I13 on the knob grid: penalties, a bias with min_tokens, all of them."""

    scenarios = tuple(knob_scenarios())


class TestSamplingUnderKnobs(SamplingContract):
    """S1..S4 on the processed toy: the sampled loop keeps the processed distribution."""

    scenarios = tuple(knob_sampling_scenarios())
