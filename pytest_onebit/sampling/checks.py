"""The sampling checks S1..S4: a sampled loop keeps the target's distribution, exactly.

A *sampling scenario* fixes one sampled run on a small-vocabulary toy base: round kind, the
sampling head's kind (see `pytest_onebit.doubles.sampling_heads`), k, the sampling knobs,
budget. The checks read a *sampling trace*: the exact output distribution of the loop (every
branch of its rng enumerated), the exact distribution of plain sampling computed directly, and
what every leaf left behind.

| check | proves |
|---|---|
| S1-distribution | the sampled loop's exact output distribution equals plain sampling's to 1e-12 |
| S2-seeded | the same seed and k give the same text and stats; `rng=SeededRng(seed)` the same |
| S3-greedy-limit | temperature 0 is greedy: `greedy()`'s text, and the stats of `sampling=None` |
| S4-leaf-state | every enumerated run commits exactly prompt + emitted, within the row |
|  | bound, and the head gets every committed token once, in order |

`SAMPLING` (a `pytest_onebit.contract.Contract`) holds them. A loop that does not sample (it
refuses `sampling=` when tried) gets *not applicable* with the reason. `check_sampling(run)`
holds a loop to all of them, like `check_loop`; `pytest_onebit.sampling.suite.SamplingContract`
is the same as pytest tests, `test_S1_distribution[...]` and so on.
"""

from __future__ import annotations

from onebit.reference import greedy
from onebit.sampling import Sampling, SeededRng
from pytest_onebit.contract.assertions import assert_tokens_equal
from pytest_onebit.contract.core import Contract
from pytest_onebit.loop.trace import RunFn
from pytest_onebit.sampling.enumeration import assert_distribution_equivalent
from pytest_onebit.sampling.scenarios import (
    ATOL,
    SamplingScenario,
    distribution_scenarios,
    seeded_scenarios,
)
from pytest_onebit.sampling.trace import SampledRun

#: The keyword arguments only a sampling loop takes.
SAMPLING_KEYWORDS = ("sampling", "rng")


def cannot_sample(run: RunFn) -> str | None:
    """Why `run` cannot be held to S1..S4, found by trying, not from its signature (a
    `def run(*args, **kwargs)` may forward to a greedy-only loop): a one-token sampled run
    that the loop refuses with a TypeError about a sampling keyword. None when it takes them
    (or fails some other way: the checks then fail naming that)."""
    s = SamplingScenario(k=1, max_tokens=1)
    base = s.make_base()
    try:
        run(base, s.make_head(base), list(s.prompt), max_tokens=s.max_tokens, k=s.k,
            sampling=s.sampling, rng=SeededRng(0))
    except TypeError as error:
        message = str(error)
        if "keyword" in message and any(f"'{kw}'" in message for kw in SAMPLING_KEYWORDS):
            return (f"the loop does not sample: called with sampling= and rng=, it raised "
                    f"TypeError: {message}")
    except (Exception, SystemExit):
        pass
    return None


#: The sampling contract: a case is one `SampledRun` (a loop on one sampling scenario).
SAMPLING = Contract("sampling", prepare=SampledRun, not_applicable=cannot_sample)
SAMPLING_CHECKS = SAMPLING.checks


@SAMPLING.check("S1-distribution", scenarios=distribution_scenarios)
def check_distribution(case: SampledRun) -> None:
    """S1: the sampled loop's exact output distribution equals plain sampling's (computed
    directly as prod p(t_i | prefix)) to 1e-12, for every head kind, round kind and k."""
    __tracebackhide__ = True
    t = case.trace
    assert_distribution_equivalent(t.distribution(), t.plain, atol=ATOL)


@SAMPLING.check("S2-seeded", scenarios=seeded_scenarios)
def check_seeded(case: SampledRun) -> None:
    """S2: a seeded sampled run replays: the same seed and k give the same text and stats, and
    `rng=SeededRng(seed)` gives what `seed=seed` gives."""
    __tracebackhide__ = True
    run, s = case.run, case.scenario
    results = []
    for source in ({"seed": s.seed}, {"seed": s.seed}, {"rng": SeededRng(s.seed)}):
        base = s.make_base()
        results.append(run(base, s.make_head(base), list(s.prompt), max_tokens=s.max_tokens,
                           k=s.k, sampling=s.sampling, **source))
    first = results[0]
    for other, how in zip(results[1:], ("the same seed again", "rng=SeededRng(seed)"),
                          strict=True):
        assert_tokens_equal(other.tokens, first.tokens, names=(how, "seed=seed"),
                            what="sampled tokens")
        if other.stats != first.stats:
            raise AssertionError(f"{how} gave stats {other.stats}, the first run {first.stats}")


@SAMPLING.check("S3-greedy-limit", scenarios=seeded_scenarios)
def check_greedy_limit(case: SampledRun) -> None:
    """S3: temperature 0 is greedy decoding, whatever top-k / top-p say: greedy()'s text, and
    the same stats as the same run with sampling=None."""
    __tracebackhide__ = True
    run, s = case.run, case.scenario
    reference = greedy(s.make_base(), list(s.prompt), max_tokens=s.max_tokens)
    results = []
    for sampling in (None, Sampling(0.0, s.top_k, s.top_p)):
        base = s.make_base()
        results.append(run(base, s.make_head(base), list(s.prompt), max_tokens=s.max_tokens,
                           k=s.k, sampling=sampling, seed=s.seed))
    for result in results:
        assert_tokens_equal(result.tokens, reference.tokens, names=("run", "greedy"))
    if results[0].stats != results[1].stats:
        raise AssertionError(f"temperature 0 gave stats {results[1].stats}; sampling=None "
                             f"gave {results[0].stats}")


@SAMPLING.check("S4-leaf-state", scenarios=distribution_scenarios)
def check_leaf_state(case: SampledRun) -> None:
    """S4: every enumerated run commits exactly prompt + emitted (tokens and recurrent state),
    at the committed positions, within the row bound, and hands the head every committed
    token once, in order, after one reset."""
    __tracebackhide__ = True
    t = case.trace
    t.distribution()  # a loop that raised fails here first
    if t.faults:
        raise AssertionError("; ".join(t.faults))


