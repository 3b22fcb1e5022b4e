"""`onebit mutmut`: the last `mutmut run`'s verdicts as a table, and a gate on survivors."""

from __future__ import annotations

import argparse
from pathlib import Path

from onebit.commands.common import add_format, emit, fail


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "mutmut",
        help="report the last `mutmut run` per function and fail above --max-survivors",
        description="Reads mutmut's exported stats and results (run `mutmut run` first) and "
        "prints them per function, with the lines exempt as equivalent and their reasons. "
        "Exits 1 when more mutants survive than --max-survivors, 2 when there is nothing to "
        "read.",
    )
    parser.add_argument("--max-survivors", type=int, default=0, metavar="N",
                        help="survivors allowed before the gate fails (default 0)")
    parser.add_argument("--only", action="append", default=[], metavar="GLOB",
                        help="judge only the mutants whose key matches GLOB (repeatable): the "
                        "names given to `mutmut run`, e.g. 'onebit.loop.x__settled*'")
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="the project folder mutmut ran in (default: here)")
    add_format(parser)
    return parser


def main(args: argparse.Namespace) -> int:
    from pytest_onebit.mutants.mutmut_report import MutmutReportError, read_report

    if args.max_survivors < 0:
        return fail("mutmut", f"--max-survivors must be >= 0, got {args.max_survivors}")
    if not args.root.is_dir():
        return fail("mutmut", f"--root {args.root} is not a folder")
    try:
        report = read_report(args.root, max_survivors=args.max_survivors, only=args.only)
    except MutmutReportError as error:
        return fail("mutmut", error)
    emit(report.render(args.format))
    return 0 if report.ok else 1
