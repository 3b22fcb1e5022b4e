"""The plugin as a user meets it: installed, loaded in a fresh project, pointed at loops."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import onebit.loop
from pytest_onebit.loop.suite import check_test_name

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
CATALOGUE = ROOT / "mutants" / "loop"

# A module name the outer session cannot already hold (tests/toy_base has a test_contract):
# in-process runs share sys.modules with it.
CONTRACT_FILE_NAME = "test_loop_held_in_process"
CONTRACT_TEST = """
from pytest_onebit import LoopContract

class TestLoop(LoopContract):
    pass
"""


CONTRACT_FILE = {CONTRACT_FILE_NAME: CONTRACT_TEST}


def failed_checks(output: str) -> set[str]:
    """The check names of the failed contract tests in a `-rf` summary."""
    return {m.replace("_", "-") for m in re.findall(r"FAILED \S+::test_(I\d+_[a-z_]+)\[", output)}


def test_fixtures_and_options_load_in_a_fresh_project(pytester):
    """Installing onebit is all it takes: a project with no conftest gets the `onebit_`
    fixtures and the options in a fresh interpreter; the device rig (its option, marker and
    fixtures) comes only with `-p pytest_onebit.device`."""
    pytester.makepyfile(
        """
        import onebit

        def test_parts(onebit_toy_base, onebit_oracle, onebit_perfect_head,
                       onebit_garbage_head, onebit_half_head, onebit_plain_decode,
                       onebit_loop):
            base = onebit_toy_base(max_batch_rows=4)
            truth = onebit_oracle(onebit_toy_base(), [1, 2, 3], 20)
            result = onebit_loop(base, onebit_perfect_head(truth, "two-pass"), [1, 2, 3],
                                 max_tokens=12, k=3)
            assert result.tokens == onebit_plain_decode([1, 2, 3], 12).tokens
            assert onebit_loop is onebit.run
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers")
    result.assert_outcomes(passed=1)
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    assert "--onebit-loop=MODULE:FUNC" in help_text and "--onebit-device" not in help_text
    with_rig = pytester.runpytest_subprocess("-p", "pytest_onebit.device", "--help")
    assert "--onebit-device" in with_rig.stdout.str()


def test_the_plugin_registers_only_onebit_fixtures(pytester):
    """Every fixture the plugin adds to a user's session is named `onebit_...`, and none of
    the device rig's is there unless asked for: a project's own `toy_base` or `oracle` is
    never shadowed by onebit."""
    pytester.makepyfile("def test_x(): pass")
    listed = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider").stdout.str()
    ours = re.findall(r"^(\w+)(?: \[\w+ scope\])? -- .*pytest_onebit", listed, re.M)
    assert ours and all(name.startswith("onebit_") for name in ours), ours
    assert "onebit_device_model" not in ours


@pytest.mark.slow  # two pytest subprocesses, 5-7 s
def test_device_marker_deselects_and_skips_with_the_probe_reason(pytester):
    """`-m "not device"` deselects device tests; `-m device` runs them into a skip whose reason
    is the probe's first failed check (here: no NPU device node)."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.device
        def test_on_npu(onebit_device_base):
            raise AssertionError("must not run without a device")

        def test_anywhere():
            pass
        """
    )
    no_device = pytester.runpytest_subprocess("-p", "pytest_onebit.device", "-m", "not device")
    no_device.assert_outcomes(passed=1, deselected=1)
    on_device = pytester.runpytest_subprocess("-p", "pytest_onebit.device", "-m", "device",
                                              "-rs")
    on_device.assert_outcomes(skipped=1, deselected=1)
    on_device.stdout.fnmatch_lines(["*SKIPPED*no NPU: no NPU device node: /dev/accel/accel* "
                                    "matches nothing*"])


def test_bad_loop_option_is_a_usage_error(pytester):
    """A --onebit-loop that does not name a callable stops the run with a usage error."""
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_subprocess("--onebit-loop=onebit.loop:nothing_here")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*onebit.loop has no callable 'nothing_here'*"])


def broken_loop(pytester, mutant: str) -> str:
    """Apply a catalogue mutant of onebit/loop.py to a copy, as a module of its own name."""
    scratch = pytester.path / "scratch"
    (scratch / "onebit").mkdir(parents=True)
    shutil.copy(onebit.loop.__file__, scratch / "onebit" / "loop.py")
    subprocess.run(["git", "apply", str(CATALOGUE / f"{mutant}.diff")], cwd=scratch, check=True)
    module = "broken_" + mutant.replace("-", "_")
    shutil.copy(scratch / "onebit" / "loop.py", pytester.path / f"{module}.py")
    return f"{module}:run"


# The six broken loops of the loop issue, and an invariant each must be caught by.
BROKEN = {
    "01-commit-take-rows": "I2-state",
    "02-draft-vs-next-row": "I1-text",
    "06-next-t1-row0": "I1-text",
    "05-k-all-rows": "I4-batch-bound",
    "08-no-budget-clamp": "I9-budget",
    "07-plain-step-no-commit-rows": "I5-drafter-rows",
}


@pytest.mark.parametrize("mutant", sorted(BROKEN))
def test_suite_fails_a_broken_loop_naming_the_invariant(pytester, mutant):
    """--onebit-loop pointed at a deliberately broken loop makes the contract suite fail, and
    the failing test ids name the invariant that loop breaks. (Only that check's tests run
    here, selected by name with -k; `onebit mutants` runs the whole suite per mutant.)"""
    pytester.makepyfile(**CONTRACT_FILE)
    pytester.syspathinsert()
    spec = broken_loop(pytester, mutant)
    # In-process (the plugin is already imported) to spare an interpreter start per loop.
    result = pytester.runpytest_inprocess(f"--onebit-loop={spec}", "-q", "--tb=no", "-rf",
                                          "-p", "no:cacheprovider",
                                          "-k", check_test_name(BROKEN[mutant]))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert failed_checks(result.stdout.str()) == {BROKEN[mutant]}


def test_suite_passes_a_differently_written_correct_loop(pytester):
    """The suite tests the contract, not onebit's way of writing it: an independent correct
    loop passes every check."""
    pytester.makepyfile(**CONTRACT_FILE)
    shutil.copy(HERE / "alt_loop.py", pytester.path / "alt_loop.py")
    pytester.syspathinsert()
    result = pytester.runpytest_inprocess("--onebit-loop=alt_loop:run", "-q", "-p",
                                          "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    assert result.parseoutcomes()["passed"] > 1000


def test_loop_fixture_override_binds_another_loop(pytester):
    """A subclass can bind its loop directly by overriding the `loop` fixture, and can narrow
    the scenarios; the test ids carry the check's name."""
    shutil.copy(HERE / "alt_loop.py", pytester.path / "alt_loop.py")
    pytester.makepyfile(
        """
        import pytest
        import alt_loop
        from pytest_onebit import LoopContract, Scenario

        class TestAlt(LoopContract):
            scenarios = [Scenario("two-pass", "half", 3)]

            @pytest.fixture
            def loop(self):
                return alt_loop.run
        """
    )
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    # (`?` stands for the brackets, which fnmatch would read as a character class)
    result.stdout.fnmatch_lines([
        "*TestAlt::test_I7_pass_law?no-scenario? SKIPPED*",
        "*TestAlt::test_I12_stats?two-pass-half-k3-r8-prefix-n40? PASSED*",
    ])
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.slow  # 11 s; .ci/run also runs the device suite on torch and the emulated NPU
def test_device_tests_pass_on_the_host_backend(pytester):
    """`--onebit-device=host` runs the device tests on the NumPy forward (a fabricated
    Qwen3.5 hybrid), so the device suite is itself exercised where there is no NPU."""
    result = pytester.runpytest_inprocess(str(ROOT / "tests" / "device"), "-m", "device",
                                          "--onebit-device=host", "-p", "no:cacheprovider")
    # the 10 device tests and the 8 base checks (B1..B8: the forward has verify_last)
    result.assert_outcomes(passed=18)
