"""`onebit mutmut`: the last `mutmut run`'s verdicts as a table, and a gate on survivors."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "mutmut",
        help="report the last `mutmut run` per function and fail above --max-survivors",
        description="Reads mutmut's exported stats and results (run `mutmut run` first) and "
        "prints them per function, with the lines exempt as equivalent and their reasons. "
        "Exits 1 when more mutants survive than --max-survivors.",
    )
    parser.add_argument("--max-survivors", type=int, default=0, metavar="N",
                        help="survivors allowed before the gate fails (default 0)")
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="the project folder mutmut ran in (default: here)")
    parser.add_argument("--format", choices=("text", "md", "json"), default="text")
    return parser


def main(args: argparse.Namespace) -> int:
    from pytest_onebit.mutmut_report import MutmutReportError, read_report

    try:
        report = read_report(args.root, max_survivors=args.max_survivors)
    except MutmutReportError as error:
        print(f"onebit mutmut: {error}")
        return 2
    render = {"text": report.to_text, "md": report.to_markdown, "json": report.to_json}
    print(render[args.format]())
    return 0 if report.ok else 1
