"""Running a peer's arms and the table they make: check x arm, with expected failures
declared through the contract core (`Contract.expected`) and judged by its `Report`: an
expected failure that passes everywhere is stale, and fails the report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from onebit.report import Document, Rendered, Table, cols
from pytest_onebit.contract.core import Contract
from pytest_onebit.contract.report import XPASS, Finding, Report
from pytest_onebit.peers.judge import CHECK_DOCS
from pytest_onebit.peers.protocol import FAILED, NOT_APPLICABLE, PASSED, Outcome, Peer


def peer_contract(peer: Peer) -> Contract:
    """The peer's checks as a core `Contract`: a case is one arm's outcomes (`arm.judge()`),
    and each check fails with its cell's first divergence. Its registry validates declared
    expected failures (`Contract.expected`: a known check and a reason each)."""
    contract = Contract(f"{peer.name} peer", prepare=lambda arm, _scenario: arm.judge())
    docs = {**CHECK_DOCS, **getattr(peer, "check_docs", {})}
    for name in peer.checks:
        def verify(outcomes: Mapping[str, Outcome], name: str = name) -> None:
            outcome = outcomes.get(name)
            if outcome is not None and outcome.status == FAILED:
                raise AssertionError(outcome.detail)

        verify.__doc__ = docs.get(name, name)
        contract.check(name)(verify)
    return contract


@dataclass
class PeerReport(Rendered):
    peer: str
    version: str
    checks: tuple[str, ...]
    arms: list[str] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    cells: dict[tuple[str, str], Outcome] = field(default_factory=dict)  # (check, arm)
    expected: dict[str, str] = field(default_factory=dict)
    unavailable: str | None = None

    def cell(self, check: str, arm: str) -> Outcome:
        return self.cells.get((check, arm), Outcome(NOT_APPLICABLE, "not run by this arm"))

    def verdicts(self) -> Report:
        """The table as the core's one `Report`: each passed or failed cell a run, each failed
        cell a `Finding` (its arm as the scenario), a check no arm judged not applicable. Its
        statuses (xfail / xpass for a declared check) and `ok` are the table's."""
        report = Report(f"{self.peer} peer", ran_by_check=dict.fromkeys(self.checks, 0),
                        expected_failed_checks=dict(self.expected))
        for check in self.checks:
            for arm in self.arms:
                cell = self.cell(check, arm)
                if cell.status == NOT_APPLICABLE:
                    continue
                report.ran += 1
                report.ran_by_check[check] += 1
                if cell.status == FAILED:
                    report.failures.append(Finding(check, arm, cell.detail))
            if not report.ran_by_check[check]:
                report.not_applicable[check] = self.unavailable or "no arm judged it"
        return report

    def status(self, check: str) -> str:
        """The core's status of `check` over every arm: passed, failed, not applicable, or
        xfail / xpass when declared."""
        return self.verdicts().status(check)

    @property
    def ok(self) -> bool:
        return self.verdicts().ok

    def failures(self) -> list[tuple[str, str, str]]:
        return [(c, a, self.cell(c, a).detail) for c in self.checks for a in self.arms
                if self.cell(c, a).status == FAILED]

    def document(self) -> Document:
        title = f"onebit peer {self.peer} ({self.version})"
        data = {"peer": self.peer, "version": self.version, "ok": self.ok,
                "unavailable": self.unavailable, "expected_failed_checks": self.expected,
                "arms": {a: self.notes.get(a, "") for a in self.arms},
                "checks": {c: {"status": self.status(c),
                               "arms": {a: vars(self.cell(c, a)) for a in self.arms}}
                           for c in self.checks}}
        if self.unavailable:
            return Document(title, [f"not applicable: {self.unavailable}"],
                            "nothing ran", data)
        short = {PASSED: "passed", FAILED: "FAILED", NOT_APPLICABLE: "-"}
        rows = [[c, *[short[self.cell(c, a).status] for a in self.arms], self.status(c)]
                for c in self.checks]
        blocks: list = [Table(cols("check", *self.arms, "verdict", code=("check",)), rows)]
        failures = self.failures()
        if failures:
            blocks.append(Table(cols("check", "arm", "first divergence", code=("check",)),
                                [[c, a, d] for c, a, d in failures], title="Failures"))
        measured = [[c, a, self.cell(c, a).detail] for c in self.checks for a in self.arms
                    if self.cell(c, a).status == PASSED
                    and not self.cell(c, a).detail.endswith("run(s)")
                    and self.cell(c, a).detail]
        if measured:  # what a passing cell measured: margins, distances, where a stop fell
            blocks.append(Table(cols("check", "arm", "measured", code=("check",)), measured,
                                title="Passed, with what was measured"))
        if self.expected:
            blocks.append(Table(cols("check", "declared expected failure", code=("check",)),
                                [[c, why] for c, why in self.expected.items()]))
        blocks.append(Table(cols("arm", "what it runs"),
                            [[a, self.notes.get(a, "")] for a in self.arms], title="Arms"))
        bad = [c for c in self.checks if self.status(c) in (FAILED, XPASS)]
        closing = ("every check passed or was not applicable" if self.ok else
                   f"failed: {', '.join(bad)}" + (" (xpass: a stale expected failure)"
                                                  if any(self.status(c) == XPASS for c in bad)
                                                  else ""))
        return Document(title, blocks, closing, data)


def run_peer(peer: Peer, expected_failed_checks: Mapping[str, str] | None = None
             ) -> PeerReport:
    """Judge every arm of `peer`; a peer that cannot run here gives a report saying why. A
    peer with a `close()` (one that started servers) is closed however the run ends."""
    expected = peer_contract(peer).expected(expected_failed_checks)
    try:
        reason = peer.unavailable()
        if reason is not None:
            return PeerReport(peer.name, "-", peer.checks, expected=expected,
                              unavailable=reason)
        report = PeerReport(peer.name, peer.version(), peer.checks, expected=expected)
        for arm in peer.arms():
            outcomes = arm.judge()
            report.arms.append(arm.name)
            report.notes[arm.name] = arm.note
            for check, outcome in outcomes.items():
                report.cells[(check, arm.name)] = outcome
        return report
    finally:
        close = getattr(peer, "close", None)
        if close is not None:
            close()
