"""`onebit prove`: the loop held to the whole contract on the toy base, then the mutant
catalogues run against their suites (each check shown to fail on the bug it exists for).

It needs neither pytest nor Hypothesis for the contract: `pip install onebit` and
`onebit prove --quick` hold a loop to every check. The catalogues run pytest in scratch
copies of a source checkout, so they need the `dev` extra.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from onebit.commands.common import add_format, emit, fail, positive, project_root

DEFAULT_LOOP = "onebit.loop:run"


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "prove",
        help="hold the loop to invariants I1..I13 on the toy base, then run the mutant "
        "catalogues",
        description="Runs every conformance check of docs/contract.md on every standard "
        "scenario and prints checks passed / failed per invariant and the cost of each arm in "
        "base passes per token; then, from a source checkout, runs the mutant catalogues and "
        "prints their tables. Exits 1 if a check fails or a mutant survives, 2 for bad input.",
    )
    parser.add_argument("--loop", default=DEFAULT_LOOP, metavar="MODULE:FUNC",
                        help=f"the run() implementation to prove (default {DEFAULT_LOOP}); "
                        "imported with the current directory first on the path, as python -m")
    parser.add_argument("--loop-lib", default=None, metavar="PATH.so[:SYMBOL]",
                        help="prove a compiled loop instead: the library's onebit_run (or "
                        "SYMBOL), through the C ABI of onebit_abi.h (docs/c-abi.md)")
    parser.add_argument("--lib-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="with --loop-lib: the most one run may take (default 10)")
    add_format(parser)
    parser.add_argument("--quick", action="store_true",
                        help="the contract only: skip the mutant catalogues")
    from onebit.commands.mutants import default_jobs

    parser.add_argument("--jobs", type=positive("--jobs"), default=default_jobs(),
                        help=f"mutants run at once (default: the cores and one more, "
                        f"{default_jobs()} here)")
    parser.add_argument("--expect-fail", action="append", default=[], metavar="CHECK=REASON",
                        help="a check known to fail, with the reason (repeatable): reported "
                        "as xfail; if it passes, the proof fails")
    from onebit.commands.mutants import add_run_options

    add_run_options(parser, default_stop="first-kill")
    return parser


def parse_expected(pairs: list[str]) -> dict[str, str]:
    expected = {}
    for pair in pairs:
        name, sep, reason = pair.partition("=")
        if not sep or not name.strip() or not reason.strip():
            raise ValueError(f"--expect-fail wants CHECK=REASON, got {pair!r}")
        expected[name.strip()] = reason.strip()
    return expected


def catalogue_skipped(args: argparse.Namespace, report) -> str | None:
    """Why the catalogues do not run, or None when they do."""
    if args.quick:
        return "--quick"
    if not report.ok:
        return "the contract failed"
    if args.loop != DEFAULT_LOOP or args.loop_lib:
        return "the catalogues mutate onebit's own code, not --loop"
    if project_root() is None:
        return "no source checkout here: the catalogues need one"
    return None


def main(args: argparse.Namespace) -> int:
    from pytest_onebit.loader import LoadError, load_loop
    from pytest_onebit.loop.prove import prove

    try:
        if args.loop_lib:  # a compiled loop (pytest_onebit/native)
            from pytest_onebit.native.prove import prove_library

            report = prove_library(args.loop_lib, timeout=args.lib_timeout,
                                   expected_failed_checks=parse_expected(args.expect_fail))
        else:
            report = prove(load_loop(args.loop), name=args.loop,
                           expected_failed_checks=parse_expected(args.expect_fail))
    except LoadError as error:
        return fail("prove", f"--loop-lib {error}" if args.loop_lib else f"--loop {error}")
    except ValueError as error:
        return fail("prove", error)
    as_json = args.format == "json"  # one JSON document, not several
    if not as_json:
        emit(report.render(args.format))
    catalogues = []
    skipped = catalogue_skipped(args, report)
    if skipped is None:
        from onebit.commands.mutants import catalogue_folders, run_all
        from pytest_onebit.mutants import CatalogueError, ShadowError

        root = project_root()
        assert root is not None
        if not as_json:
            emit(f"\nmutant catalogues ({root / 'mutants'}), {args.jobs} at a time:")
        try:
            catalogues = run_all(Path(root), catalogue_folders(Path(root), None), jobs=args.jobs,
                                 stop=args.stop, fork=args.fork,
                                 on_report=None if as_json else
                                 lambda r: emit("\n" + r.render(args.format)))
        except (CatalogueError, ShadowError, OSError, ValueError) as error:
            return fail("prove", error)
    if as_json:
        emit(json.dumps({
            "contract": json.loads(report.to_json()),
            "catalogues": [json.loads(c.to_json()) for c in catalogues],
            "catalogues_skipped": skipped,
        }, indent=2))
    elif skipped and not args.quick:
        emit(f"\n(mutant catalogues skipped: {skipped})")
    return exit_code(report, catalogues)


def exit_code(report, catalogues) -> int:
    """1 if a check failed or a catalogue is not all killed (a survivor fails the proof)."""
    return 0 if report.ok and all(c.ok for c in catalogues) else 1
