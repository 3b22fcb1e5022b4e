"""`onebit prove`: hold a loop to the whole contract on the toy base and say so at a glance.

The result has two parts: checks passed / failed per invariant (every standard scenario), and
the cost of each arm of the main grid (round kind x head x k) in base passes.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

from pytest_onebit.contract import CHECKS, ContractReport, RunFn, Scenario, Trace, check_loop


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
class ProveReport:
    loop: str
    contract: ContractReport
    arms: list[Arm] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.contract.ok

    def check_rows(self) -> list[tuple[str, int, int, str]]:
        failed = self.contract.failed_by_check()
        return [(name, self.contract.ran_by_check[name] - failed[name], failed[name],
                 CHECKS[name].doc.split("\n")[0]) for name in self.contract.ran_by_check]

    def closing_line(self) -> str:
        passed = self.contract.ran - len(self.contract.failures)
        verdict = "the loop keeps the contract" if self.ok else "THE LOOP BREAKS THE CONTRACT"
        return (f"{passed} passed, {len(self.contract.failures)} failed: {verdict} "
                f"({len(self.arms)} arms, {self.seconds:.1f} s)")

    def to_text(self) -> str:
        lines = [f"onebit prove: {self.loop} on the toy base", ""]
        lines.append(f"{'check':<22} {'passed':>6} {'failed':>6}")
        for name, passed, failed, _ in self.check_rows():
            lines.append(f"{name:<22} {passed:>6} {failed:>6}")
        lines += ["", f"{'round':<9} {'k':>3} {'head':<8} {'batches':>7} {'steps':>5} "
                      f"{'base passes per token':>21}"]
        for a in self.arms:
            lines.append(f"{a.round:<9} {a.k:>3} {a.head:<8} {a.batches:>7} {a.steps:>5} "
                         f"{a.passes_per_token:>21.3f}")
        if self.contract.failures:
            lines += ["", "first failures:"]
            lines += [f"  {f.check} [{f.scenario}]: {f.message.splitlines()[0]}"
                      for f in self.contract.failures[:5]]
        return "\n".join([*lines, "", self.closing_line()])

    def to_markdown(self) -> str:
        lines = [f"### onebit prove: `{self.loop}`", "", "| check | passed | failed | proves |",
                 "|---|---:|---:|---|"]
        lines += [f"| {n} | {p} | {f} | {d} |" for n, p, f, d in self.check_rows()]
        lines += ["", "| round | k | head | batches | steps | base passes per token |",
                  "|---|---:|---|---:|---:|---:|"]
        lines += [f"| {a.round} | {a.k} | {a.head} | {a.batches} | {a.steps} | "
                  f"{a.passes_per_token:.3f} |" for a in self.arms]
        return "\n".join([*lines, "", self.closing_line()])

    def to_json(self) -> str:
        return json.dumps({
            "loop": self.loop,
            "ok": self.ok,
            "checks": [{"check": n, "passed": p, "failed": f} for n, p, f, _ in self.check_rows()],
            "failures": [asdict(f) for f in self.contract.failures],
            "arms": [asdict(a) for a in self.arms],
            "seconds": round(self.seconds, 3),
        }, indent=2)


def arm_scenarios() -> list[Scenario]:
    """The arms of the main grid: both round kinds, three heads, k = 1, 2, 4, 7, 12."""
    return [Scenario(flavour, head, k) for flavour in ("one-pass", "two-pass")
            for head in ("perfect", "garbage", "half") for k in (1, 2, 4, 7, 12)]


def prove(run: RunFn, *, name: str = "onebit.run") -> ProveReport:
    """Hold `run` to every check on every standard scenario; cost the main arms."""
    started = time.perf_counter()
    arms = set(arm_scenarios())
    costed: list[Arm] = []

    def cost(trace: Trace) -> None:
        s = trace.scenario
        if s in arms and trace.error is None:
            steps, batches, tokens = trace.decode_steps, trace.base.batches, len(trace.tokens)
            costed.append(Arm(s.flavour, s.k, s.head, tokens, batches, steps,
                              (steps + batches) / tokens if tokens else 0.0))

    contract = check_loop(run, raise_on_failure=False, on_trace=cost)
    return ProveReport(name, contract, costed, time.perf_counter() - started)
