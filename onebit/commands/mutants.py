"""`onebit mutants`: run the hand-written mutant catalogue against the conformance suite."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def project_root() -> Path | None:
    """The project checkout the installed package lives in (an editable install), or None."""
    import onebit

    root = Path(onebit.__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "tests").is_dir():
        return root
    return None


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "mutants",
        help="apply each hand-written mutant to a scratch copy and show which checks catch it",
        description="Applies every mutants/NN-name.diff to a scratch copy of the project "
        "(never the working tree), runs the conformance suite there, and prints "
        "mutant | breaks | failing checks | failed | verdict. Exits 1 if the unmutated suite "
        "fails, or a mutant survives, is caught only by checks its header does not name, or "
        "no longer applies.",
    )
    parser.add_argument("--format", choices=("text", "md", "json"), default="text",
                        help="plain table (default), Markdown for a pull request, or JSON")
    parser.add_argument("--jobs", type=int, default=2, metavar="N",
                        help="mutants run at a time, each in its own pytest process (default 2)")
    parser.add_argument("--catalogue", type=Path, default=None, metavar="DIR",
                        help="the folder of *.diff mutants (default: ROOT/mutants)")
    parser.add_argument("--root", type=Path, default=None, metavar="DIR",
                        help="the project checkout to copy (default: the one onebit is "
                        "installed from)")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help="run only this mutant (full name, number such as 03, or part of "
                        "a name); repeatable")
    parser.add_argument("--tests", action="append", default=None, metavar="PATH",
                        help="test paths to run in each copy (default tests/toy_base); "
                        "repeatable")
    return parser


def main(args: argparse.Namespace) -> int:
    from pytest_onebit.mutants import CatalogueError, ShadowError, run_catalogue

    root = args.root if args.root is not None else project_root()
    if root is None:
        print("onebit mutants: cannot find the project checkout from the installed package; "
              "pass --root DIR", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print(f"onebit mutants: --jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return 2
    try:
        report = run_catalogue(
            root,
            args.catalogue if args.catalogue is not None else Path(root) / "mutants",
            jobs=args.jobs,
            test_paths=tuple(args.tests or ("tests/toy_base",)),
            only=args.only,
        )
    except (CatalogueError, ShadowError, FileNotFoundError, ValueError) as error:
        print(f"onebit mutants: {error}", file=sys.stderr)
        return 2
    render = {"text": report.to_text, "md": report.to_markdown, "json": report.to_json}
    print(render[args.format]())
    return 0 if report.ok else 1
