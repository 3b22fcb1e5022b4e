"""The mutmut gate: mutmut's listing read back per function, and a verdict CI can trust."""


import re

from pytest_onebit.mutants.mutmut_report import (
    MutmutReport,
    find_exemptions,
    function_of,
    parse_results,
    selected,
)

LISTING = """\
    onebit.loop.xǁ_Decodeǁpropose__mutmut_17: killed
    onebit.loop.xǁ_Decodeǁpropose__mutmut_18: survived
    onebit.loop.x_greedy__mutmut_3: timeout
    onebit.fallback.xǁFallbackǁround_cost__mutmut_2: not checked
"""


def test_mutant_keys_name_their_function():
    """mutmut's mangled keys map back to dotted function names (methods and functions)."""
    assert function_of("onebit.loop.xǁ_Decodeǁpropose__mutmut_17") == "onebit.loop._Decode.propose"
    assert function_of("onebit.loop.x_greedy__mutmut_3") == "onebit.loop.greedy"
    assert function_of("onebit.loop.x__argmax_row__mutmut_5") == "onebit.loop._argmax_row"


def test_results_listing_is_parsed():
    """Every `key: status` line of `mutmut results --all true` is read, statuses with spaces
    included."""
    statuses = parse_results(LISTING + "some banner line\n")
    assert len(statuses) == 4
    assert statuses["onebit.fallback.xǁFallbackǁround_cost__mutmut_2"] == "not checked"


def test_gate_counts_survivors_and_refuses_an_unfinished_run():
    """The gate passes with survivors up to the limit, fails above it, and never passes a
    run that left mutants unchecked (a stopped run is no verdict)."""
    finished = dict(list(parse_results(LISTING).items())[:3])
    assert not MutmutReport(finished, {}, max_survivors=0).ok
    assert MutmutReport(finished, {}, max_survivors=1).ok
    unfinished = MutmutReport(parse_results(LISTING), {}, max_survivors=5)
    assert not unfinished.ok
    assert "did not finish (1 not checked): no verdict" in unfinished.closing_line()
    rows = {f: v for f, _, v in unfinished.rows()}
    assert rows["onebit.loop._Decode.propose"] == "survivors"
    assert rows["onebit.fallback.Fallback.round_cost"] == "unfinished"
    assert rows["onebit.loop.greedy"] == "all caught"


def test_exemptions_are_listed_with_their_reasons(tmp_path):
    """Lines marked `# pragma: no mutate` are listed with the reason written after them, so a
    reviewer sees every exemption; one without a reason says so."""
    source = tmp_path / "pkg"
    source.mkdir()
    (source / "m.py").write_text(
        "x = 1  # pragma: no mutate - equivalent: x is never read\n"
        "y = 2\n"
        "z = 3  # pragma: no mutate\n"
    )
    found = find_exemptions(tmp_path, ["pkg"])
    assert [(e.where, e.reason) for e in found] == [
        ("pkg/m.py:1", "equivalent: x is never read"), ("pkg/m.py:3", "(no reason given)")]
    report = MutmutReport({}, {}, found)
    assert re.search(r"pkg/m.py:1 +equivalent: x is never read", report.to_text())


def test_only_keeps_the_mutants_a_selective_run_checked():
    """--only globs (the names `mutmut run` takes) keep the matching mutants: a run limited to
    _Decode.propose is judged on its two mutants, the unchecked ones elsewhere set aside; no
    glob keeps everything."""
    statuses = parse_results(LISTING)
    picked = selected(statuses, ["onebit.loop.xǁ_Decodeǁpropose*"])
    assert sorted(picked) == ["onebit.loop.xǁ_Decodeǁpropose__mutmut_17",
                              "onebit.loop.xǁ_Decodeǁpropose__mutmut_18"]
    assert MutmutReport(picked, {}, max_survivors=1).ok
    assert not MutmutReport(statuses, {}, max_survivors=1).ok  # fallback's is not checked
    assert selected(statuses, []) == statuses
    assert selected(statuses, ["onebit.loop.x_greedy*", "onebit.fallback*"]).keys() == {
        "onebit.loop.x_greedy__mutmut_3", "onebit.fallback.xǁFallbackǁround_cost__mutmut_2"}
