"""The contract judges and never crashes: whatever a loop under test returns or raises, and
however its module fails to load, the answer is failed checks naming the field or the
exception, or one line and exit 2; and known failures are declared with reasons."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

import onebit
from pytest_onebit.loop.checks import CHECKS
from pytest_onebit.loop.runner import XFAIL, XPASS, LoopContractError, check_loop
from pytest_onebit.loop.scenarios import Scenario, standard_scenarios

# A few scenarios that between them reach every check (I10 needs a stop, I11 a 1-row base).
SOME = [Scenario(), Scenario(flavour="two-pass", head="half", k=4),
        Scenario(head="garbage", k=4), Scenario(stop_at=6, k=4),
        Scenario(head="perfect", k=7, max_batch_rows=1)]


@dataclass
class BareResult:
    """What a loop written from the documented names alone might return, minus `stopped`."""

    tokens: list
    stats: object = field(default=None)


def run_without_stopped(base, head, prompt, **kw):
    result = onebit.run(base, head, prompt, **kw)
    return BareResult(result.tokens, result.stats)


def failures_by_check(report) -> dict[str, str]:
    return {f.check: f.message for f in report.failures}


def test_every_scenario_set_reaches_every_check():
    """The few scenarios these tests use apply every check at least once, so "no failure"
    below means every check ran."""
    applied = {name for s in SOME for name, c in CHECKS.items() if c.applies(s)}
    assert applied == set(CHECKS)


def test_a_result_without_stopped_fails_only_the_check_that_reads_it():
    """A result with tokens and stats but no `stopped` fails I10-consumer-stop with a message
    naming `stopped`, and every other check passes."""
    report = check_loop(run_without_stopped, SOME, raise_on_failure=False)
    found = failures_by_check(report)
    assert set(found) == {"I10-consumer-stop"}
    assert "has no `stopped`" in found["I10-consumer-stop"]


@pytest.mark.parametrize(
    ("returned", "says"),
    [
        (None, "returned None"),
        (BareResult("abc"), "result.tokens is not a sequence of token ids"),
        (42, "has no `tokens`"),
    ],
)
def test_a_malformed_result_fails_every_check_naming_the_field(returned, says):
    """A loop returning None, a result whose tokens are not ids, or an int fails every check
    that ran with a message naming what is wrong; nothing raises out of check_loop."""

    def broken(base, head, prompt, **kw):
        onebit.run(base, head, prompt, **kw)
        return returned

    report = check_loop(broken, SOME, raise_on_failure=False)
    assert len(report.failures) == report.ran
    assert all(says in f.message for f in report.failures), report.failures[0].message


def test_missing_stats_fields_fail_the_stats_check_naming_them():
    """stats without `steps` fails I12-stats naming `steps`; the token checks still pass."""

    def no_steps(base, head, prompt, **kw):
        result = onebit.run(base, head, prompt, **kw)
        stats = {n: getattr(result.stats, n) for n in ("batches", "rounds", "proposed",
                                                       "accepted", "passes_per_token")}
        return BareResult(result.tokens, type("Stats", (), stats)())

    found = failures_by_check(check_loop(no_steps, SOME, raise_on_failure=False))
    assert "I12-stats" in found and "has no `steps`" in found["I12-stats"]
    assert "I1-text" not in found


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyError("k"), SystemExit(3)])
def test_a_loop_that_raises_fails_every_check_naming_the_exception(error):
    """A loop that raises (even SystemExit) fails every check with the exception's type and
    message; check_loop itself returns normally."""

    def raising(*args, **kwargs):
        raise error

    report = check_loop(raising, SOME, raise_on_failure=False)
    assert len(report.failures) == report.ran > 0
    assert all(f"the loop raised {type(error).__name__}" in f.message for f in report.failures)


def test_expected_failures_are_xfail_and_a_stale_one_is_reported():
    """A check declared in expected_failed_checks with a reason is xfail when it fails (the
    report is ok), and xpass when it passes, which fails the report and says so."""
    reason = "our loop has no `stopped` yet"
    report = check_loop(run_without_stopped, SOME,
                        expected_failed_checks={"I10-consumer-stop": reason})
    assert report.ok and report.status("I10-consumer-stop") == XFAIL
    with pytest.raises(LoopContractError, match="declared as expected failures but passed: "
                                                "I8-pass-law-garbage"):
        check_loop(onebit.run, SOME, expected_failed_checks={"I8-pass-law-garbage": "why"})
    report = check_loop(onebit.run, SOME, raise_on_failure=False,
                        expected_failed_checks={"I8-pass-law-garbage": "why"})
    assert report.status("I8-pass-law-garbage") == XPASS and not report.ok


@pytest.mark.parametrize("expected", [{"I99-nothing": "x"}, {"I1-text": ""}])
def test_expected_failures_need_known_checks_and_reasons(expected):
    """An expected failure naming no check, or without a reason, is a ValueError."""
    with pytest.raises(ValueError, match="expected_failed_checks"):
        check_loop(onebit.run, SOME, expected_failed_checks=expected)


@pytest.mark.slow  # pytest on the loop contract in a subprocess (4 s)
def test_loop_contract_declares_expected_failures_as_xfail(pytester):
    """`LoopContract.expected_failed_checks` makes that check's failing tests xfail with the
    reason, and its passing ones XPASS, reported with the reason but not failing the run (a
    check may fail on some scenarios only); a name that is no check is a collection error."""
    pytester.makepyfile(test_declared_in_process="""
import pytest
from pytest_onebit import LoopContract, Scenario
from tests_judging_loops import run_without_stopped

class TestNoStopped(LoopContract):
    scenarios = [Scenario(stop_at=6, k=4)]
    expected_failed_checks = {"I10-consumer-stop": "our loop has no stopped"}

    @pytest.fixture
    def loop(self):
        return run_without_stopped

class TestStale(LoopContract):
    scenarios = [Scenario(head="garbage", k=4)]
    expected_failed_checks = {"I8-pass-law-garbage": "believed broken"}
""")
    pytester.makepyfile(test_typo_in_process="""
from pytest_onebit import LoopContract

class TestTypo(LoopContract):
    expected_failed_checks = {"I7-pass-lawz": "typo"}
""")
    pytester.makepyfile(tests_judging_loops="""
import onebit
from dataclasses import dataclass

@dataclass
class BareResult:
    tokens: list
    stats: object

def run_without_stopped(base, head, prompt, **kw):
    result = onebit.run(base, head, prompt, **kw)
    return BareResult(result.tokens, result.stats)
""")
    # each class: 10 checks apply to its scenario, 3 have none (skipped)
    result = pytester.runpytest_subprocess("-rxX", "-p", "no:cacheprovider",
                                           "test_declared_in_process.py")
    result.assert_outcomes(passed=18, xfailed=1, xpassed=1, skipped=6)
    result.stdout.fnmatch_lines(["*XFAIL*test_I10_consumer_stop*our loop has no stopped*",
                                 "*XPASS*test_I8_pass_law_garbage*believed broken*"])
    typo = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_typo_in_process.py")
    assert typo.ret == pytest.ExitCode.INTERRUPTED
    typo.stdout.fnmatch_lines(["*unknown loop check(s) ['I7-pass-lawz']*"])


def prove(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onebit.cli", "prove", "--quick", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("module", "spec", "says"),
    [
        ("raise RuntimeError('no device here')", "engine_mod:run",
         "importing engine_mod raised RuntimeError: no device here"),
        ("import not_a_module_anywhere", "engine_mod:run", "cannot import engine_mod"),
        ("run = 3", "engine_mod:run", "engine_mod.run is a int, not a callable"),
        ("", "engine_mod:run", "engine_mod has no callable 'run'"),
        ("", "engine_mod", "wants MODULE:FUNC"),
    ],
)
def test_prove_with_a_loop_that_cannot_be_loaded_is_one_line_and_exit_2(tmp_path, module,
                                                                        spec, says):
    """`onebit prove --loop` with a module that raises at import, cannot import, or lacks a
    callable exits 2 with one line on stderr naming the problem, and no traceback."""
    (tmp_path / "engine_mod.py").write_text(module + "\n")
    done = prove("--loop", spec, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.slow  # two whole contracts in fresh processes, 13-17 s
def test_prove_imports_a_loop_from_the_current_directory(tmp_path):
    """The console script imports `--loop` from the current directory as `python -m` does: a
    module next to the user proves, and a broken one fails with exit 1 (not 2)."""
    (tmp_path / "my_engine.py").write_text("from onebit import run\n")
    good = prove("--loop", "my_engine:run", cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert "0 failed: the loop keeps the contract" in good.stdout
    (tmp_path / "bad_engine.py").write_text(
        "import onebit\n\ndef run(*a, **k):\n    r = onebit.run(*a, **k)\n"
        "    r.tokens.append(0)\n    return r\n")
    bad = prove("--loop", "bad_engine:run", cwd=tmp_path)
    assert bad.returncode == 1 and "THE LOOP BREAKS THE CONTRACT" in bad.stdout


def test_pytest_with_a_loop_module_that_raises_is_a_usage_error(pytester):
    """--onebit-loop naming a module that raises at import stops pytest with a usage error
    (exit 4) and one line naming the exception, not an INTERNALERROR."""
    pytester.makepyfile(engine_raises="raise ImportError('needs a GPU')")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("--onebit-loop=engine_raises:run")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*importing engine_raises raised ImportError: needs a GPU*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_standard_grid_is_unchanged():
    """The split kept the standard grid: 151 scenarios (130, 15 for the batched prefill and 6
    whose base has verify_last, so the prefill goes through it), ids unique, the first is the
    one-pass perfect head at k = 1. The knob scenarios are a grid of their own."""
    grid = standard_scenarios()
    assert len(grid) == 151 and grid[0].id == "one-pass-perfect-k1-r8-prefix-n40"
    assert sum(s.verify_last for s in grid) == 6
    assert not any(s.knobs for s in grid)


FORWARDING_LOOPS = """
import onebit


def greedy_only(base, head, prompt, *, max_tokens, k, on_token=None):
    return onebit.run(base, head, prompt, max_tokens=max_tokens, k=k, on_token=on_token)


def run(*args, **kwargs):  # a signature that says nothing: only trying tells
    return greedy_only(*args, **kwargs)


def broken(*args, **kwargs):
    raise RuntimeError("the device went away")
"""


def test_prove_a_forwarding_greedy_only_loop_finds_sampling_not_applicable(tmp_path):
    """`onebit prove --loop M:run` on a `def run(*args, **kwargs)` that forwards to a
    greedy-only loop: the I checks pass, every S check is "not applicable" with the reason
    (found by calling it with sampling=, not read from the signature), no traceback escapes,
    and the loop keeps the contract (exit 0). The same loop through `check_sampling` is a
    report with the reason and no failure."""
    (tmp_path / "fwd_engine.py").write_text(FORWARDING_LOOPS)
    done = prove("--loop", "fwd_engine:run", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    assert "Traceback" not in done.stderr + done.stdout
    rows = {row["check"]: row for row in json.loads(done.stdout)["contract"]["checks"]}
    for name in ("S1-distribution", "S2-seeded", "S3-greedy-limit", "S4-leaf-state"):
        assert rows[name]["status"] == "not applicable", rows[name]
        assert "unexpected keyword argument 'sampling'" in rows[name]["reason"], rows[name]
    assert rows["I1-text"]["status"] == "passed" and rows["I1-text"]["passed"] > 0


def test_a_raising_loop_fails_the_loop_and_sampling_checks_naming_it(tmp_path, monkeypatch):
    """A loop that raises is judged, never a crash: every I and S check fails, each finding
    names the exception, in check_loop, check_sampling and `onebit prove` (exit 1)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "fwd_engine_raises.py").write_text(FORWARDING_LOOPS)
    from fwd_engine_raises import broken

    from pytest_onebit import check_sampling

    loop = check_loop(broken, raise_on_failure=False)
    sampled = check_sampling(broken, raise_on_failure=False)
    for report in (loop, sampled):
        assert set(report.statuses().values()) == {"failed"}, report.statuses()
        assert all("RuntimeError: the device went away" in f.message for f in report.failures)
    done = prove("--loop", "fwd_engine_raises:broken", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr + done.stdout
    assert "S2-seeded" in done.stdout and "RuntimeError: the device went away" in done.stdout


@pytest.mark.parametrize("error", [KeyError("k"), SystemExit(3)])
def test_check_sampling_judges_a_loop_that_raises_anything(error):
    """check_sampling on a loop that raises (even SystemExit, even in S2 and S3, which call
    the loop themselves) returns a report whose every check failed naming the exception."""

    def raising(*args, **kwargs):
        raise error

    from pytest_onebit import check_sampling

    report = check_sampling(raising, raise_on_failure=False)
    assert set(report.statuses().values()) == {"failed"}
    assert all(type(error).__name__ in f.message for f in report.failures)


def test_sampling_contract_skips_a_loop_that_cannot_sample_with_the_reason(pytester):
    """SamplingContract held to a forwarding greedy-only loop skips every S test with the
    reason found by trying it: no test fails and nothing escapes as an error."""
    pytester.makepyfile(fwd_engine=FORWARDING_LOOPS)
    pytester.makepyfile(test_sampled=(
        "from pytest_onebit import SamplingContract\n\n\n"
        "class TestForwarding(SamplingContract):\n    pass\n"))
    result = pytester.runpytest_subprocess("--onebit-loop=fwd_engine:run", "-p",
                                           "no:cacheprovider", "-rs", "-k", "S2 or S3")
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) > 0 and "failed" not in outcomes and "passed" not in outcomes
    result.stdout.fnmatch_lines(["*SKIPPED*S2-seeded is not applicable: the loop does not "
                                 "sample*unexpected keyword argument 'sampling'*"])


@pytest.mark.slow  # `onebit prove` in subprocesses (5 s)
def test_prove_declares_expected_failures_of_either_contract():
    """`prove`'s expected failures reach the contract that owns each check: a sampling check
    declared on a loop that keeps it is a stale xpass that fails the proof, with its reason in
    the report; a name of neither contract is a ValueError naming it."""
    from pytest_onebit.loop.prove import prove

    report = prove(onebit.run, expected_failed_checks={"S3-greedy-limit": "believed broken"})
    assert report.sampling.status("S3-greedy-limit") == XPASS and not report.ok
    assert "S3-greedy-limit: believed broken" in report.to_text()
    with pytest.raises(ValueError, match=r"unknown check\(s\) \['S9-nothing'\]"):
        prove(onebit.run, expected_failed_checks={"S9-nothing": "x"})
