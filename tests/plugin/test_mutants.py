"""The hand-written mutant catalogues (mutants/*/NN-name.diff) and their runner
(pytest_onebit.mutants)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from onebit.commands import mutants as mutants_command
from pytest_onebit.loop.checks import CHECKS
from pytest_onebit.mutants import (
    ERROR,
    KILLED,
    OFF_TARGET,
    SURVIVED,
    Catalogue,
    CatalogueError,
    ShadowError,
    SuiteRun,
    apply_diff,
    find_catalogues,
    load_catalogue,
    make_scratch,
    parse_junit,
    parse_mutant,
    run_catalogue,
    select,
    verdict_of,
)
from pytest_onebit.mutants.scratch import check_shadowing, diff_targets

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "mutants" / "loop"
COPIED = load_catalogue(CATALOGUE).config.copy
INVARIANTS = tuple(f"I{i}" for i in range(1, 14))

# The first eight come from the engine's history; other tests apply them by these names.
HISTORY = (
    "01-commit-take-rows",
    "02-draft-vs-next-row",
    "03-drop-t1-row",
    "04-always-two-pass",
    "05-k-all-rows",
    "06-next-t1-row0",
    "07-plain-step-no-commit-rows",
    "08-no-budget-clamp",
)

GOOD_HEADER = "# mutant: a bug\n# breaks: I1\n# why: because\n"
GOOD_DIFF = "--- a/onebit/loop.py\n+++ b/onebit/loop.py\n@@ -1,1 +1,1 @@\n-x\n+y\n"


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under the copied project parts of `root`."""
    out = {}
    for name in (*COPIED, "mutants"):
        path = root / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts or ".hypothesis" in f.parts:
                continue
            out[str(f.relative_to(root))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


# ---------------------------------------------------------------------------------------------
# The catalogue itself


def test_catalogue_parses():
    """Every file of mutants/ has a well-formed header (mutant, breaks, why) and a unified diff
    of project files, and the first eight mutants of the engine's history are there."""
    catalogue = load_catalogue(CATALOGUE)
    names = [m.name for m in catalogue.mutants]
    assert set(HISTORY) <= set(names)
    for m in catalogue.mutants:
        assert m.description and m.why and m.breaks, m.name
        assert all(f.split("/")[0] in ("onebit", "pytest_onebit") for f in m.files), m.files
        assert m.diff.startswith("--- a/"), m.name


def test_every_invariant_is_named_by_some_mutant():
    """I1..I13 each appear in the `# breaks:` header of at least one mutant, so the catalogue
    exercises every named check."""
    named = {inv for m in load_catalogue(CATALOGUE).mutants for inv in m.breaks}
    assert set(INVARIANTS) - named == set()
    assert set(INVARIANTS) <= {c.invariant for c in CHECKS.values()}


def test_every_mutant_applies_to_the_current_source(tmp_path):
    """Each mutant still applies to the project as it is now (a stale one would be an error
    verdict in the runner); checked with git apply in scratch copies, not the working tree."""
    for m in load_catalogue(CATALOGUE).mutants:
        scratch = make_scratch(ROOT, tmp_path / m.number / "project", COPIED)
        assert apply_diff(scratch, m.diff) is None, m.name
        for rel in m.files:
            assert (scratch / rel).read_bytes() != (ROOT / rel).read_bytes(), (m.name, rel)


@pytest.mark.parametrize(
    ("filename", "text", "complaint"),
    [
        ("01-x.diff", "# breaks: I1\n# why: w\n" + GOOD_DIFF, "lacks `# mutant:`"),
        ("01-x.diff", "# mutant: m\n# breaks: i13\n# why: w\n" + GOOD_DIFF, "i13"),
        ("01-x.diff", "# mutant: m\n# breaks: I1 I1\n# why: w\n" + GOOD_DIFF, "twice"),
        ("01-x.diff", GOOD_HEADER, "no diff"),
        ("01-x.diff", GOOD_HEADER + "just words\n", "not a unified diff"),
        ("01-x.diff", GOOD_HEADER + GOOD_DIFF.replace("/onebit/", "/../etc/"), "may change"),
        ("01-x.diff", GOOD_HEADER + "# late: header\n" + GOOD_DIFF, "unknown header"),
        ("01-x.diff", "# mutant: m\nbreaks: I1\n" + GOOD_DIFF, "lacks"),
        ("x.diff", GOOD_HEADER + GOOD_DIFF, "NN-short-name"),
    ],
)
def test_a_malformed_catalogue_file_is_an_error(tmp_path, filename, text, complaint):
    """A catalogue file with a missing or wrong header field, no diff, a path outside the
    project's copied parts, or a bad name raises CatalogueError naming the file."""
    path = tmp_path / filename
    path.write_text(text)
    with pytest.raises(CatalogueError, match=re.escape(complaint)) as info:
        parse_mutant(path, COPIED)
    assert filename in str(info.value)
    with pytest.raises(CatalogueError):
        load_catalogue(tmp_path)


def test_header_continuation_lines_join_the_field(tmp_path):
    """A `#` line indented under a field continues it, so a long `why` can wrap."""
    path = tmp_path / "07-wrapped.diff"
    path.write_text("# mutant: m\n# breaks: I2, I5\n# why: first half\n#   second half\n"
                    + GOOD_DIFF)
    m = parse_mutant(path)
    assert (m.why, m.breaks, m.number, m.files) == (
        "first half second half", ("I2", "I5"), "07", ("onebit/loop.py",))


def test_only_selects_by_name_number_or_part():
    """--only picks a mutant by its full name, its number, or a unique part of its name, and a
    name that matches nothing is an error rather than an empty (passing) run."""
    catalogue = load_catalogue(CATALOGUE).mutants
    picked = select(catalogue, ["01-commit-take-rows", "05", "budget-clamp"])
    assert [m.number for m in picked] == ["01", "05", "08"]
    with pytest.raises(ValueError, match="no mutant matches"):
        select(catalogue, ["no-such-mutant"])


# ---------------------------------------------------------------------------------------------
# The runner's parts


def test_verdicts():
    """killed needs a failing check of an invariant the header names; failures elsewhere are
    off-target; a passing suite is a survivor; a suite that could not run is an error."""
    m = parse_mutant(CATALOGUE / "01-commit-take-rows.diff")  # breaks I2 I3 I5
    assert verdict_of(m, SuiteRun(1, 10, 2, 0, {"I2-state": 1, "I1-text": 1})) == KILLED
    assert verdict_of(m, SuiteRun(1, 10, 1, 0, {"I1-text": 1})) == OFF_TARGET
    assert verdict_of(m, SuiteRun(1, 10, 1, 0, {"other": 1})) == OFF_TARGET
    assert verdict_of(m, SuiteRun(0, 10)) == SURVIVED
    assert verdict_of(m, SuiteRun(None, detail="the diff no longer applies")) == ERROR
    assert verdict_of(m, SuiteRun(2, detail="collection error")) == ERROR


def test_junit_failures_are_counted_per_named_check(tmp_path):
    """The JUnit XML's failing test names map back to their checks (other failing tests count
    as "other"); passing and skipped tests are not failures."""
    xml = tmp_path / "junit.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="t.TestLoop" name="test_I2_state[one-pass-perfect-k7-r8-prefix-n40]">'
        '<failure message="x"/></testcase>'
        '<testcase classname="t.TestLoop" name="test_I2_state[two-pass-perfect-k7-r8-prefix-n40]">'
        '<failure message="x"/></testcase>'
        '<testcase classname="t.TestLoop" name="test_I12_stats[plain-k0-r8-prefix-n40]">'
        '<error message="x"/></testcase>'
        '<testcase classname="t.TestLoop" name="test_I1_text[plain-k0-r8-prefix-n40]"/>'
        '<testcase classname="t" name="test_golden"><failure message="x"/></testcase>'
        '<testcase classname="t" name="test_device"><skipped message="no npu"/></testcase>'
        "</testsuite></testsuites>"
    )
    assert parse_junit(xml) == (6, 4, 1, {"I2-state": 2, "I12-stats": 1, "other": 1})


def test_a_copy_without_the_package_does_not_shadow_the_install(tmp_path):
    """The shadowing check fails loudly when the scratch copy would not be imported (here: a
    scratch dir without the packages, so the installed ones would be the code under test)."""
    (tmp_path / "project").mkdir()
    with pytest.raises(ShadowError, match="does not shadow"):
        check_shadowing(tmp_path / "project", ["onebit"])


LINKED_DIFF = """--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 2
"""


def test_a_linked_copy_is_unshared_before_a_mutant_is_applied(tmp_path):
    """A scratch copy's files are hard links to the project's (the cheap copy `onebit prove`
    makes once per mutant), yet applying a mutant changes the copy alone: the file the diff
    names gets a private copy first, the project's file keeps its bytes, and the files the diff
    does not name stay linked."""
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (project / "pkg" / "other.py").write_text("X = 1\n")
    scratch = make_scratch(project, tmp_path / "scratch", ["pkg"])
    if (project / "pkg" / "mod.py").stat().st_nlink == 1:
        pytest.skip("this filesystem makes no hard links: the copy is a plain copy")
    assert apply_diff(scratch, LINKED_DIFF) is None
    assert (scratch / "pkg" / "mod.py").read_text() == "def f():\n    return 2\n"
    assert (project / "pkg" / "mod.py").read_text() == "def f():\n    return 1\n"
    assert (project / "pkg" / "mod.py").stat().st_nlink == 1
    assert (project / "pkg" / "other.py").stat().st_nlink == 2


def test_an_unlinked_copy_shares_nothing(tmp_path):
    """`link=False` copies every file, so nothing the copy does can reach the project."""
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    make_scratch(project, tmp_path / "scratch", ["pkg"], link=False)
    assert (project / "pkg" / "mod.py").stat().st_nlink == 1


def test_the_pool_runs_the_most_urgent_waiting_task_first():
    """PriorityPool (the runner's threads): with its one worker held busy, the tasks queued
    behind it run lowest priority first and, within a priority, in the order submitted; a
    task's exception reaches its future; a closed pool takes no task."""
    import threading

    from pytest_onebit.mutants.jobs import PriorityPool

    gate, order = threading.Event(), []
    with PriorityPool(1) as pool:
        held = pool.submit(gate.wait)
        futures = [pool.submit(order.append, name, priority=priority)
                   for name, priority in (("m1", 1), ("m2", 1), ("baseline", 0), ("m3", 1))]
        failing = pool.submit(lambda: 1 / 0)
        gate.set()
        for future in (held, *futures):
            future.result(timeout=10)
        with pytest.raises(ZeroDivisionError):
            failing.result(timeout=10)
    assert order == ["baseline", "m1", "m2", "m3"]
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(print)


def test_diff_targets_names_each_path_once():
    """The paths a diff touches, read from its ---/+++ lines: prefixes and timestamps dropped,
    /dev/null (a created or deleted file) left out, each path once."""
    diff = ("--- a/x/y.py\t2026-01-01\n+++ b/x/y.py\n@@ -1 +1 @@\n-a\n+b\n"
            "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+c\n")
    assert diff_targets(diff) == ["x/y.py", "new.py"]


def test_the_cli_parses_its_options_and_rejects_an_unknown_mutant(capsys):
    """`onebit mutants` has --format/--jobs/--catalogue/--root/--only with the documented
    defaults, finds the project root from the installed package, and exits non-zero (before
    running anything) when --only names no mutant."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    assert mutants_command.add_parser(sub).prog.endswith("mutants")
    args = parser.parse_args(["mutants"])
    assert (args.format, args.jobs, args.catalogue, args.root, args.only) == (
        "text", mutants_command.default_jobs(), None, None, None)
    assert mutants_command.default_jobs() == (os.cpu_count() or 1) + 1
    assert mutants_command.project_root() == ROOT
    args = parser.parse_args(["mutants", "--only", "no-such-mutant", "--format", "json"])
    assert mutants_command.main(args) == 2
    assert "no mutant matches" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# End to end: two real mutants and a stale one, against a copy of the project


STALE = """# mutant: a mutant written against an older loop.py
# breaks: I1
# why: the engine moved on under it
--- a/onebit/loop.py
+++ b/onebit/loop.py
@@ -284,3 +284,3 @@
         take = 0
-        while take < len(drafts) and drafts[take] == choices[take] and True:
+        while take < len(drafts) and drafts[take] == choices[take + 1] and True:
             take += 1
"""


@pytest.fixture(scope="module")
def end_to_end(tmp_path_factory):
    """Run the catalogue runner on a copy of the project (so nothing else editing the checkout
    can disturb the comparison) with 01, 11 and a stale mutant; return (root, digests before,
    digests after, report)."""
    root = tmp_path_factory.mktemp("checkout")
    for name in (*COPIED, "mutants"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.is_file():
            shutil.copy2(src, root / name)
    stale = tmp_path_factory.mktemp("stale") / "90-stale-context.diff"
    stale.write_text(STALE)
    loop = load_catalogue(root / "mutants" / "loop", root)
    chosen = select(loop.mutants, ["01", "11"]) + [parse_mutant(stale)]
    before = tree_digest(root)
    # --stop named: each mutant's run is its named checks' tests, each credited in full
    report = run_catalogue(root, catalogue=Catalogue(loop.folder, loop.config, chosen), jobs=2,
                           test_paths=("tests/toy_base/test_contract.py",), stop="named")
    return root, before, tree_digest(root), report


def test_applying_mutants_never_changes_the_working_tree(end_to_end):
    """The runner applies every mutant in a scratch copy: the project it was given is byte for
    byte the same afterwards."""
    root, before, after, report = end_to_end
    assert before and before == after
    assert all(str(root) not in f for f in report.imported_from.values())


def test_the_scratch_copy_is_what_runs(end_to_end):
    """The baseline run imported onebit and the plugin from its scratch copy, not from the
    editable install, and passed there: with `stop="named"` it ran exactly the tests that
    failed under the two mutants that applied, every one of them."""
    _, _, _, report = end_to_end
    assert report.baseline_ok, report.baseline.detail
    failed = {t for r in report.results for t in r.run.failed_ids}
    assert len(failed) == sum(r.run.failed for r in report.results) > 0
    assert set(report.baseline.only) == failed
    assert report.baseline.tests == len(failed)
    for module, path in report.imported_from.items():
        assert "onebit-mutant-baseline-" in path, (module, path)
        assert not path.startswith(str(ROOT)), (module, path)


def test_mutants_are_killed_by_the_checks_they_name(end_to_end):
    """01 (commit take rows) fails I2-state, I3-positions and I5-drafter-rows; 11 (stats count
    proposed as accepted) fails I12-stats only; both are killed."""
    _, _, _, report = end_to_end
    by_name = {r.mutant.name: r for r in report.results}
    r01, r11 = by_name["01-commit-take-rows"], by_name["11-stats-accepted-proposed"]
    assert r01.verdict == KILLED
    assert {"I2-state", "I3-positions", "I5-drafter-rows"} <= set(r01.run.failing_checks)
    assert r01.run.failed == sum(r01.run.failing_checks.values())
    assert r11.verdict == KILLED
    assert set(r11.run.failing_checks) == {"I12-stats"}


def test_a_mutant_that_no_longer_applies_is_an_error(end_to_end):
    """A diff that no longer applies is an ERROR verdict (not a skip), and the report is not
    ok; the text, Markdown and JSON renderings all say so."""
    _, _, _, report = end_to_end
    stale = next(r for r in report.results if r.mutant.name == "90-stale-context")
    assert stale.verdict == ERROR
    assert "no longer applies" in stale.run.detail
    assert not report.ok
    text = report.to_text()
    assert re.search(r"^3 mutants: 2 killed, 0 survived, 1 errors in \d+\.\d s$", text, re.M)
    assert re.search(r"01-commit-take-rows\s+I2 I3 I5\s+.*I2-state:\d+.*killed", text)
    md = report.to_markdown()
    assert md.startswith("## mutant catalogue `loop`")
    assert "| mutant | breaks | failing checks | failed | verdict |" in md
    assert "| `90-stale-context` | I1 |" in md and "| error |" in md
    data = json.loads(report.to_json())
    assert data["ok"] is False and data["counts"] == {
        KILLED: 2, OFF_TARGET: 0, SURVIVED: 0, ERROR: 1}
    assert data["mutants"][0]["failing_checks"]["I2-state"] > 0


# ---------------------------------------------------------------------------------------------
# Another project's catalogue, against its own suite


CALC = "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n"
CALC_TESTS = '''from calc import add, neg


def test_A1_add():
    assert add(2, 3) == 5


def test_A2_neg():
    assert neg(4) == -4


def test_helper_unrelated():
    assert True
'''


def calc_mutant(number: str, name: str, breaks: str, old: str, new: str) -> str:
    return (f"# mutant: {name}\n# breaks: {breaks}\n# why: a fresh project's own bug\n"
            "--- a/calc/__init__.py\n+++ b/calc/__init__.py\n@@ -1,6 +1,6 @@\n"
            + "".join(("-" + line + "\n+" + line.replace(old, new) + "\n") if old in line
                      else " " + line + "\n" for line in CALC.splitlines()))


def make_calc(root: Path, tests: str) -> Path:
    """Write the calc project into `root` (its package, `tests` as its test file) and its
    catalogue folder with mutant 01 (add subtracts, killed by A1); return the folder."""
    (root / "calc").mkdir()
    (root / "calc" / "__init__.py").write_text(CALC)
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(tests)
    folder = root / "mutants" / "calc"
    folder.mkdir(parents=True)
    (folder / "catalogue.toml").write_text('[catalogue]\ndescription = "calc"\n'
                                           'tests = ["tests"]\n')
    (folder / "01-add-subtracts.diff").write_text(
        calc_mutant("01", "add subtracts", "A1", "a + b", "a - b"))
    return folder


@pytest.fixture(scope="module")
def calc_project(tmp_path_factory):
    """A project that is not onebit: a package, its tests named by check (A1, A2), and a
    catalogue with a killed, an off-target and a surviving mutant."""
    root = tmp_path_factory.mktemp("calc")
    folder = make_calc(root, CALC_TESTS)
    (folder / "02-neg-named-wrong.diff").write_text(
        calc_mutant("02", "neg is identity, header names A1", "A1", "-a", "a"))
    (folder / "03-equivalent.diff").write_text(
        calc_mutant("03", "add commutes", "A1", "a + b", "b + a"))
    return root


def test_another_projects_catalogue_runs_against_its_own_suite(calc_project):
    """The runner is not tied to onebit: a fresh project's catalogue (found under mutants/ by
    its catalogue.toml) runs against that project's suite, copies what the project has,
    checks its own package shadows any install, and credits failing tests to the checks
    their names start with: killed, off-target and survived each come out as such."""
    (folder,) = find_catalogues(calc_project / "mutants")
    report = run_catalogue(calc_project, folder, jobs=2)
    verdicts = {r.mutant.number: r.verdict for r in report.results}
    assert report.baseline_ok and report.baseline.tests == 3
    assert set(report.imported_from) == {"calc"}
    assert verdicts == {"01": KILLED, "02": OFF_TARGET, "03": SURVIVED}
    assert report.results[1].run.failing_checks == {"A2-neg": 1}
    assert not report.ok
    assert report.to_text().startswith("mutant catalogue `calc`: calc")


def test_a_stopping_run_checks_each_kill_on_the_unmutated_copy(calc_project):
    """With `stop="first-kill"` (onebit prove) the baseline runs the tests that failed under
    some mutant, unmutated, and nothing else: A1's and A2's tests, not the helper's test,
    which no mutant failed. The verdicts are those of the full run."""
    (folder,) = find_catalogues(calc_project / "mutants")
    report = run_catalogue(calc_project, folder, jobs=2, stop="first-kill")
    verdicts = {r.mutant.number: r.verdict for r in report.results}
    assert verdicts == {"01": KILLED, "02": OFF_TARGET, "03": SURVIVED}
    assert sorted(report.baseline.only) == ["tests/test_calc.py::test_A1_add",
                                            "tests/test_calc.py::test_A2_neg"]
    assert report.baseline_ok and report.baseline.tests == 2
    assert "the 2 tests that failed under a mutant, 2 passed" in report.to_text()


def test_a_kill_by_a_test_that_fails_unmutated_is_no_proof(tmp_path):
    """The targeted baseline keeps the baseline's one job: a test that fails without any
    mutant (here A1 expects 6 from 2 + 3) "kills" the mutant in its run, but the baseline
    reruns that very test unmutated, it fails, and the catalogue is INVALID, not ok."""
    root = tmp_path / "calc"
    root.mkdir()
    folder = make_calc(root, CALC_TESTS.replace("== 5", "== 6"))
    report = run_catalogue(root, folder, jobs=1, stop="first-kill")
    assert report.results[0].verdict == KILLED
    assert report.baseline.only == ("tests/test_calc.py::test_A1_add",)
    assert not report.baseline_ok and not report.ok
    assert "INVALID" in report.summary()


def test_a_malformed_catalogue_toml_is_an_error(tmp_path):
    """catalogue.toml that is not TOML, has unknown keys, or a `tests` that is not a list of
    strings raises CatalogueError naming the file."""
    (tmp_path / "01-x.diff").write_text(GOOD_HEADER + GOOD_DIFF)
    for text, complaint in (("[catalogue\n", "catalogue.toml"),
                            ('[catalogue]\ntest = ["x"]\n', "unknown key"),
                            ('[catalogue]\ntests = "tests"\n', "list of strings")):
        (tmp_path / "catalogue.toml").write_text(text)
        with pytest.raises(CatalogueError, match=re.escape(complaint)):
            load_catalogue(tmp_path)


def test_find_catalogues(tmp_path):
    """A folder of diffs is one catalogue; a folder of catalogue folders is each of them, in
    name order; a folder with neither is an error rather than an empty (passing) run."""
    for name in ("loop", "forward"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "catalogue.toml").write_text("[catalogue]\n")
    (tmp_path / "mutmut-work").mkdir()  # no catalogue.toml: not a catalogue
    assert find_catalogues(tmp_path) == [tmp_path / "forward", tmp_path / "loop"]
    assert find_catalogues(ROOT / "mutants" / "loop") == [ROOT / "mutants" / "loop"]
    with pytest.raises(CatalogueError, match="no sub-folder"):
        find_catalogues(tmp_path / "mutmut-work")
