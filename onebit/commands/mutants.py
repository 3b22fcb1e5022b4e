"""`onebit mutants`: run the hand-written mutant catalogues against the suites that must kill
them."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from onebit.commands.common import add_format, emit, fail, positive, project_root


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "mutants",
        help="apply each hand-written mutant to a scratch copy and show which checks catch it",
        description="Applies every NN-name.diff of each catalogue (a folder under mutants/ "
        "with a catalogue.toml) to a scratch copy of the project (never the working tree), "
        "runs the catalogue's suite there (every catalogue's runs in one queue), and prints "
        "mutant | breaks | failing checks | "
        "failed | verdict. Exits 1 if an unmutated suite fails, or a mutant survives, is "
        "caught only by checks its header does not name, or no longer applies; 2 for bad "
        "input.",
    )
    add_format(parser)
    parser.add_argument("--jobs", type=positive("--jobs"), default=default_jobs(), metavar="N",
                        help="runs at a time, each in its own pytest process (default: the "
                        f"cores and one more, {default_jobs()} here)")
    parser.add_argument("--catalogue", type=Path, action="append", default=None, metavar="DIR",
                        help="a catalogue folder (repeatable; default: every catalogue under "
                        "ROOT/mutants)")
    parser.add_argument("--root", type=Path, default=None, metavar="DIR",
                        help="the project checkout to copy (default: the one onebit is "
                        "installed from)")
    parser.add_argument("--only", action="append", default=None, metavar="NAME",
                        help="run only this mutant (full name, number such as 03, or part of "
                        "a name); repeatable")
    parser.add_argument("--tests", action="append", default=None, metavar="ARG",
                        help="pytest arguments for each copy, instead of the catalogue's "
                        "`tests`; repeatable")
    add_run_options(parser, default_stop="never")
    return parser


STOPS = ("first-kill", "named", "never")  # pytest_onebit.mutants.suite_run.STOP_MODES


def default_jobs() -> int:
    """Runs at a time: the cores and one more. A run often waits on another's compile of the
    same kernel (the kernel cache's machine-wide lock) while its core idles; a run more fills
    it (`onebit prove` cold on two cores: 141 s with three, 147 with two)."""
    return (os.cpu_count() or 1) + 1


def add_run_options(parser: argparse.ArgumentParser, default_stop: str) -> None:
    """--stop and --no-fork, shared with `onebit prove`."""
    parser.add_argument("--stop", choices=STOPS, default=default_stop,
                        help="how far each mutant's run goes: `first-kill` stops at the first "
                        "failing test of a check the mutant's header names, `named` once all "
                        "the named checks' tests ran (those run first either way), `never` "
                        f"runs the whole suite and credits every failing check (default "
                        f"{default_stop}); a mutant no named check kills always runs it all")
    parser.add_argument("--no-fork", dest="fork", action="store_false",
                        help="start each run as a fresh `python -m pytest` instead of forking "
                        "it from a warm interpreter")


def catalogue_folders(root: Path, chosen: list[Path] | None) -> list[Path]:
    from pytest_onebit.mutants import find_catalogues

    if chosen:
        return [folder for c in chosen for folder in find_catalogues(c)]
    return find_catalogues(root / "mutants")


def run_all(root: Path, folders: list[Path], *, jobs: int, only=None, tests=None,
            on_report=None, stop: str = "never", fork: bool = True) -> list:
    """Every catalogue in `folders`, their runs in one queue; `on_report` sees each report, in
    order, as it is done."""
    from pytest_onebit.mutants import load_catalogue, run_catalogues

    catalogues = [load_catalogue(folder, root) for folder in folders]
    return run_catalogues(root, catalogues, jobs=jobs, only=only, test_paths=tests,
                          on_report=on_report, stop=stop, fork=fork)


def main(args: argparse.Namespace) -> int:
    from pytest_onebit.mutants import CatalogueError, ShadowError

    root = args.root if args.root is not None else project_root()
    if root is None:
        return fail("mutants", "cannot find the project checkout from the installed package; "
                    "pass --root DIR")
    if not Path(root).is_dir():
        return fail("mutants", f"--root {root} is not a folder")
    as_json = args.format == "json"
    try:
        reports = run_all(Path(root), catalogue_folders(Path(root), args.catalogue),
                          jobs=args.jobs, only=args.only, tests=args.tests,
                          stop=args.stop, fork=args.fork,
                          on_report=None if as_json else lambda r: emit(r.render(args.format)
                                                                         + "\n"))
    except (CatalogueError, ShadowError, OSError, ValueError) as error:
        return fail("mutants", error)
    if as_json:
        emit(json.dumps({"ok": all(r.ok for r in reports),
                         "catalogues": [json.loads(r.to_json()) for r in reports]}, indent=2))
    return 0 if all(r.ok for r in reports) else 1
