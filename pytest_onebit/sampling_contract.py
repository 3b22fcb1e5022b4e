"""The sampling checks S1..S4: a sampled loop keeps the target's distribution, exactly.

A *sampling scenario* fixes one sampled run on a small-vocabulary toy base: round kind, the
sampling head's kind (see `pytest_onebit.sampling_heads`), k, the sampling knobs, budget. The
checks read a *sampling trace*: the exact output distribution of the loop (every branch of its
rng enumerated), the exact distribution of plain sampling computed directly, and what every
leaf left behind.

| check | proves |
|---|---|
| S1-distribution | the sampled loop's exact output distribution equals plain sampling's to 1e-12 |
| S2-seeded | the same seed and k give the same text and stats; `rng=SeededRng(seed)` the same |
| S3-greedy-limit | temperature 0 is greedy: `greedy()`'s text, and the stats of `sampling=None` |
| S4-leaf-state | every enumerated run commits exactly prompt + emitted, within the row |
|  | bound, and the head gets every committed token once, in order |

`check_sampling(run)` holds a loop to all of them (a `ContractReport`, like `check_loop`);
`pytest_onebit.sampling_suite.SamplingContract` is the same as pytest tests,
`test_S1_distribution[...]` and so on.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from onebit.reference import greedy
from onebit.sampling import Sampling, SeededRng
from pytest_onebit.assertions import assert_tokens_equal
from pytest_onebit.conformance import ContractReport, Finding
from pytest_onebit.enumeration import (
    Distribution,
    assert_distribution_equivalent,
    exact_distribution,
    plain_distribution,
)
from pytest_onebit.sampling_heads import KINDS, MemoToyBase, ToySamplingHead
from pytest_onebit.toy import ToyBase
from pytest_onebit.trace import RunFn

SAMPLINGS = (
    Sampling(1.0),
    Sampling(0.7, top_k=2),
    Sampling(1.5, top_p=0.8),
    Sampling(1.2, top_k=2, top_p=0.9),
)
ATOL = 1e-12


@dataclass(frozen=True)
class SamplingScenario:
    """One sampled run: every knob that changes what the loop must do."""

    flavour: str = "one-pass"
    head: str = "mixed"  # a kind of pytest_onebit.sampling_heads
    k: int = 2
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    vocab_size: int = 3
    max_tokens: int = 3
    prompt: tuple[int, ...] = (2, 1)
    max_batch_rows: int = 8
    seed: int = 0  # the toy's weights (and, for S2, the rng's seed)

    @property
    def sampling(self) -> Sampling:
        return Sampling(self.temperature, self.top_k, self.top_p)

    @property
    def id(self) -> str:
        parts = [self.flavour, self.head, f"k{self.k}", f"t{self.temperature:g}"]
        if self.top_k:
            parts.append(f"top{self.top_k}")
        if self.top_p < 1:
            parts.append(f"p{self.top_p:g}")
        parts += [f"v{self.vocab_size}", f"n{self.max_tokens}"]
        if self.max_batch_rows != 8:
            parts.append(f"r{self.max_batch_rows}")
        if self.seed:
            parts.append(f"s{self.seed}")
        return "-".join(parts)

    def make_base(self) -> ToyBase:
        return MemoToyBase(vocab_size=self.vocab_size, max_batch_rows=self.max_batch_rows,
                           seed=self.seed)

    def make_head(self, base: ToyBase) -> ToySamplingHead:
        return ToySamplingHead(base, self.head, self.flavour)


def _with(s: Sampling, **knobs) -> dict:
    return {"temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p, **knobs}


def distribution_scenarios() -> list[SamplingScenario]:
    """S1 and S4's grid, 3 tokens each: on a 3-token toy, every head kind in both round kinds
    at k = 1..4 (each with one of the samplings, in turn) and the mixed head under every
    sampling at every k; on wider vocabularies, the draft-model head under top-k 3 (5 tokens)
    and the mixed head with full softmax (4 tokens); a 2-row base (k clamped), a 5-token
    run (bonus tokens mid-run) and a 4-token run with k = 3 (a round of 3 drafts)."""
    out: dict[str, SamplingScenario] = {}

    def add(s: Sampling, **knobs) -> None:
        scenario = SamplingScenario(**_with(s, **knobs))
        out[scenario.id] = scenario

    for flavour in ("one-pass", "two-pass"):
        for i, kind in enumerate(KINDS):
            for k in (1, 2, 3, 4):
                add(SAMPLINGS[(i + k) % len(SAMPLINGS)], flavour=flavour, head=kind, k=k)
        for k in (1, 2, 3, 4):
            for s in SAMPLINGS:
                add(s, flavour=flavour, head="mixed", k=k)
        add(Sampling(1.0, top_k=3), flavour=flavour, head="model", k=2, vocab_size=5)
        add(SAMPLINGS[0], flavour=flavour, head="mixed", k=2, vocab_size=4)
        add(SAMPLINGS[3], flavour=flavour, head="mixed", k=4, max_batch_rows=2)
        add(SAMPLINGS[1], flavour=flavour, head="argmax", k=2, max_tokens=5, seed=3)
        # 4 tokens: room for 3 drafts in a round (3 tokens leave 2 at most after t1)
        add(SAMPLINGS[1], flavour=flavour, head="mixed", k=3, max_tokens=4)
    return list(out.values())


def seeded_scenarios() -> list[SamplingScenario]:
    """S2 and S3's grid: a 64-token vocabulary and 24 tokens, three heads, k = 1 and 4."""
    return [SamplingScenario(flavour, kind, k, 0.8, 8, 0.95, vocab_size=64, max_tokens=24,
                             prompt=(3, 1, 4, 1, 5), seed=seed)
            for flavour in ("one-pass", "two-pass") for kind in ("mixed", "model", "argmax")
            for k in (1, 4) for seed in (0, 11)]


# ---------------------------------------------------------------------------------------------
# Traces


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
    except Exception as error:  # a broken loop may raise anything; every check reports it
        trace.error = error
    return trace


_TRACES: dict[tuple[RunFn, SamplingScenario], SamplingTrace] = {}


def trace_of(run: RunFn, scenario: SamplingScenario) -> SamplingTrace:
    """Each (loop, scenario) is enumerated once and shared by S1 and S4 (until
    `forget_traces`)."""
    key = (run, scenario)
    if key not in _TRACES:
        _TRACES[key] = execute_sampled(run, scenario)
    return _TRACES[key]


def forget_traces() -> None:
    """Drop every enumerated trace. A test run must enumerate the loop as it is now: a process
    forked after an earlier run (mutmut runs each mutant so) would otherwise judge the same
    function object by what the unmutated code emitted."""
    _TRACES.clear()


# ---------------------------------------------------------------------------------------------
# The checks


def check_distribution(run: RunFn, s: SamplingScenario) -> None:
    """S1: the sampled loop's exact output distribution equals plain sampling's (computed
    directly as prod p(t_i | prefix)) to 1e-12, for every head kind, round kind and k."""
    __tracebackhide__ = True
    t = trace_of(run, s)
    assert_distribution_equivalent(t.distribution(), t.plain, atol=ATOL)


def check_seeded(run: RunFn, s: SamplingScenario) -> None:
    """S2: a seeded sampled run replays: the same seed and k give the same text and stats, and
    `rng=SeededRng(seed)` gives what `seed=seed` gives."""
    __tracebackhide__ = True
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


def check_greedy_limit(run: RunFn, s: SamplingScenario) -> None:
    """S3: temperature 0 is greedy decoding, whatever top-k / top-p say: greedy()'s text, and
    the same stats as the same run with sampling=None."""
    __tracebackhide__ = True
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


def check_leaf_state(run: RunFn, s: SamplingScenario) -> None:
    """S4: every enumerated run commits exactly prompt + emitted (tokens and recurrent state),
    at the committed positions, within the row bound, and hands the head every committed
    token once, in order, after one reset."""
    __tracebackhide__ = True
    t = trace_of(run, s)
    t.distribution()  # a loop that raised fails here first
    if t.faults:
        raise AssertionError("; ".join(t.faults))


@dataclass(frozen=True)
class SamplingCheck:
    name: str
    doc: str
    verify: Callable[[RunFn, SamplingScenario], None]
    scenarios: Callable[[], list[SamplingScenario]]

    @property
    def invariant(self) -> str:
        return self.name.split("-", 1)[0]


SAMPLING_CHECKS: dict[str, SamplingCheck] = {
    c.name: c for c in (
        SamplingCheck("S1-distribution", check_distribution.__doc__ or "", check_distribution,
                      distribution_scenarios),
        SamplingCheck("S2-seeded", check_seeded.__doc__ or "", check_seeded, seeded_scenarios),
        SamplingCheck("S3-greedy-limit", check_greedy_limit.__doc__ or "", check_greedy_limit,
                      seeded_scenarios),
        SamplingCheck("S4-leaf-state", check_leaf_state.__doc__ or "", check_leaf_state,
                      distribution_scenarios),
    )
}


def samples(run: RunFn) -> bool:
    """True when `run` takes `sampling` and `rng` (a greedy-only loop has no S checks)."""
    try:
        parameters = inspect.signature(run).parameters
    except (TypeError, ValueError):
        return True
    return ("sampling" in parameters and "rng" in parameters) or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def check_sampling(
    run: RunFn,
    *,
    checks: Iterable[str] | None = None,
    scenarios: Sequence[SamplingScenario] | None = None,
    raise_on_failure: bool = True,
) -> ContractReport:
    """Hold `run` to the sampling checks on their scenarios (or on `scenarios`). Raises an
    AssertionError naming the first failure unless `raise_on_failure` is False."""
    names = list(checks or SAMPLING_CHECKS)
    unknown = [n for n in names if n not in SAMPLING_CHECKS]
    if unknown:
        raise ValueError(f"unknown sampling check(s) {unknown}; known: {list(SAMPLING_CHECKS)}")
    report = ContractReport(ran_by_check=dict.fromkeys(names, 0))
    for name in names:
        check = SAMPLING_CHECKS[name]
        for scenario in scenarios or check.scenarios():
            report.ran += 1
            report.ran_by_check[name] += 1
            try:
                check.verify(run, scenario)
            except AssertionError as error:
                report.failures.append(Finding(name, scenario.id, str(error)))
    if raise_on_failure and report.failures:
        first = report.failures[0]
        raise AssertionError(f"{len(report.failures)} of {report.ran} sampling checks failed; "
                             f"first: {first.check} on {first.scenario}: {first.message}")
    return report


def sampled_in(contract: ContractReport, sampling: ContractReport | None) -> ContractReport:
    """`contract` (the loop checks) with the sampling checks' counts and failures added."""
    if sampling is None:
        return contract
    return ContractReport(
        ran=contract.ran + sampling.ran,
        failures=[*contract.failures, *sampling.failures],
        ran_by_check={**contract.ran_by_check, **sampling.ran_by_check},
        expected_failed_checks=dict(contract.expected_failed_checks))
