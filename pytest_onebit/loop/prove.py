"""`onebit prove`: hold a loop to the whole contract on the toy base and say so at a glance.

The report has two tables: checks passed / failed per invariant (every standard scenario, then
the sampling checks S1..S4, not applicable with the reason to a loop that does not sample, then
the batch checks M1..M6 with the loop run by onebit's batched engine on the toy batched base),
and the cost of each arm of the main grid (round kind x head x k) in base passes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from onebit.report import Document, Rendered, Table, cols
from pytest_onebit.batch.checks import BATCH_CHECKS
from pytest_onebit.batch.runner import check_batch, onebit_batch_engine
from pytest_onebit.contract.report import Report
from pytest_onebit.loop.checks import CHECKS
from pytest_onebit.loop.runner import check_loop
from pytest_onebit.loop.scenarios import Scenario, arm_scenarios
from pytest_onebit.loop.trace import RunFn, Trace
from pytest_onebit.sampling.checks import SAMPLING_CHECKS
from pytest_onebit.sampling.runner import check_sampling


@dataclass(frozen=True)
class Arm:
    round: str
    k: int
    head: str
    tokens: int
    batches: int
    steps: int
    passes_per_token: float


@dataclass
class ProveReport(Rendered):
    loop: str
    contract: Report
    arms: list[Arm] = field(default_factory=list)
    seconds: float = 0.0
    sampling: Report | None = None  # S1..S4 (not applicable, with why, to a greedy-only loop)
    batch: Report | None = None  # M1..M6: the loop run by onebit's batched engine

    @property
    def ok(self) -> bool:
        return all(r is None or r.ok for r in (self.contract, self.sampling, self.batch))

    @property
    def combined(self) -> Report:
        """The loop, sampling and batch checks as one report."""
        return self.contract.merged(self.sampling).merged(self.batch)

    def check_rows(self) -> list[tuple[str, int, int, str, str]]:
        """(check, passed, failed, status, what it proves) per check that ran."""
        rows = []
        for c, docs in ((self.contract, CHECKS), (self.sampling, SAMPLING_CHECKS),
                        (self.batch, BATCH_CHECKS)):
            failed = c.failed_by_check() if c is not None else {}
            rows += [(name, c.ran_by_check[name] - failed[name], failed[name], c.status(name),
                      docs[name].doc.split("\n")[0]) for name in failed]
        return rows

    def tally(self) -> tuple[int, int, int]:
        """(passed, failed, failed as declared) over every check this report judged: the
        closing line counts exactly what the verdict rests on."""
        c = self.combined
        expected = len(c.failures) - len(c.unexpected_failures)
        return c.ran - len(c.failures), len(c.unexpected_failures), expected

    def closing_line(self) -> str:
        passed, unexpected, expected = self.tally()
        verdict = "the loop keeps the contract" if self.ok else "THE LOOP BREAKS THE CONTRACT"
        failed = f"{unexpected} failed"
        if expected:
            failed += f", {expected} expected failures"
        return f"{passed} passed, {failed}: {verdict} ({len(self.arms)} arms, " \
               f"{self.seconds:.1f} s)"

    def document(self) -> Document:
        checks = Table(cols("check", "passed", "failed", "status", "proves",
                            numeric=("passed", "failed"), code=("check",)),
                       [(n, str(p), str(f), s, doc) for n, p, f, s, doc in self.check_rows()])
        arms = Table(cols("round", "k", "head", "batches", "steps", "base passes per token",
                          numeric=("k", "batches", "steps", "base passes per token")),
                     [(a.round, str(a.k), a.head, str(a.batches), str(a.steps),
                       f"{a.passes_per_token:.3f}") for a in self.arms])
        blocks: list = [checks, arms]
        reasons = self.combined.expected_failed_checks
        if reasons:
            blocks.append("expected failures: " + "; ".join(f"{n}: {why}"
                                                              for n, why in reasons.items()))
        skipped = self.combined.not_applicable
        if skipped:
            blocks.append(f"not applicable: {', '.join(skipped)}: "
                          f"{next(iter(skipped.values()))}")
        reasons = {**reasons, **skipped}
        if self.combined.unexpected_failures:
            blocks.append("first failures:\n" + "\n".join(
                f"  {f.check} [{f.scenario}]: {f.message.splitlines()[0] if f.message else ''}"
                for f in self.combined.unexpected_failures[:5]))
        data = {
            "loop": self.loop,
            "ok": self.ok,
            "checks": [{"check": n, "passed": p, "failed": f, "status": s,
                        **({"reason": reasons[n]} if n in reasons else {})}
                       for n, p, f, s, _ in self.check_rows()],
            "failures": [asdict(f) for f in self.combined.failures],
            "arms": [asdict(a) for a in self.arms],
            "seconds": round(self.seconds, 3),
        }
        return Document(f"onebit prove: {self.loop} on the toy base", blocks,
                        self.closing_line(), data)


def prove(run: RunFn, *, name: str = "onebit.run",
          expected_failed_checks: Mapping[str, str] | None = None,
          scenarios: Sequence[Scenario] | None = None, batch: bool = True) -> ProveReport:
    """Hold `run` to every check on every standard scenario (or `scenarios`: a compiled loop
    gets them on the float32-exact toy); cost the main arms. With `batch`, also M1..M6 with
    `run` decoding every sequence of onebit's batched engine (a compiled loop behind the C ABI
    runs one sequence at a time in its child process, so it is proved without)."""
    started = time.perf_counter()
    arms = {s.id for s in arm_scenarios()}
    costed: list[Arm] = []

    def cost(trace: Trace) -> None:
        s = trace.scenario
        if s.id in arms and trace.error is None:
            try:
                tokens = len(trace.tokens)
            except AssertionError:  # a malformed result: the checks say so, the cost cannot
                return
            steps, batches = trace.decode_steps, trace.decode_batches
            costed.append(Arm(s.flavour, s.k, s.head, tokens, batches, steps,
                              (steps + batches) / tokens if tokens else 0.0))

    declared = dict(expected_failed_checks or {})
    known = [*CHECKS, *SAMPLING_CHECKS, *BATCH_CHECKS]
    unknown = [n for n in declared if n not in known]
    if unknown:  # each contract validates its own; a name of none is named here
        raise ValueError(f"expected_failed_checks names unknown check(s) {unknown}; known: "
                         f"{known}")
    if scenarios is None:  # the standard grid, and the toy processed by the knobs
        from pytest_onebit.loop.scenarios import knob_scenarios, standard_scenarios

        scenarios = [*standard_scenarios(), *knob_scenarios()]
    contract = check_loop(run, scenarios, raise_on_failure=False, on_trace=cost,
                          expected_failed_checks={n: r for n, r in declared.items()
                                                  if n in CHECKS})
    sampling = check_sampling(run, raise_on_failure=False,
                              expected_failed_checks={n: r for n, r in declared.items()
                                                      if n in SAMPLING_CHECKS})
    batched = check_batch(onebit_batch_engine(run), raise_on_failure=False,
                          expected_failed_checks={n: r for n, r in declared.items()
                                                  if n in BATCH_CHECKS}) if batch else None
    return ProveReport(name, contract, costed, time.perf_counter() - started, sampling,
                       batched)
