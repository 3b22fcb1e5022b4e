"""`onebit prove`: the loop held to the whole contract on the toy base, then the mutant
catalogue run against the suite (each invariant check shown to fail on a broken loop)."""

from __future__ import annotations

import argparse
import json


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "prove",
        help="hold the loop to invariants I1..I12 on the toy base, then run the mutant catalogue",
        description="Runs every conformance check of design/loop.md on every standard "
        "scenario and prints checks passed / failed per invariant and the cost of each arm in "
        "base passes per token; then, from a source checkout, runs the mutant catalogue and "
        "prints its table. Exits 1 if a check fails or a mutant survives.",
    )
    parser.add_argument("--loop", default="onebit.loop:run", metavar="MODULE:FUNC",
                        help="the run() implementation to prove (default onebit.loop:run)")
    parser.add_argument("--format", choices=("text", "md", "json"), default="text")
    parser.add_argument("--quick", action="store_true",
                        help="the contract only: skip the mutant catalogue")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    return parser


def load(spec: str):
    from pytest_onebit.contract import load_loop

    try:
        return load_loop(spec)
    except ValueError as error:
        raise SystemExit(f"onebit prove: --loop {error}") from None


def render(report, fmt: str) -> str:
    return {"text": report.to_text, "md": report.to_markdown, "json": report.to_json}[fmt]()


def main(args: argparse.Namespace) -> int:
    from onebit.commands.mutants import project_root
    from pytest_onebit.prove import prove

    as_json = args.format == "json"  # one JSON document, not two
    report = prove(load(args.loop), name=args.loop)
    if not as_json:
        print(render(report, args.format), flush=True)
    catalogue, skipped = None, None
    if args.quick or not report.ok:
        skipped = "--quick" if args.quick else "the contract failed"
    elif args.loop != "onebit.loop:run":
        skipped = "the catalogue mutates onebit's own loop, not --loop"
    elif (root := project_root()) is None:
        skipped = "no source checkout here: the catalogue needs one"
    else:
        from pytest_onebit.mutants import run_catalogue

        if not as_json:
            print(f"\nmutant catalogue ({root / 'mutants'}), {args.jobs} at a time:", flush=True)
        catalogue = run_catalogue(root, jobs=args.jobs)
        if not as_json:
            print(render(catalogue, args.format))
    if as_json:
        print(json.dumps({
            "contract": json.loads(report.to_json()),
            "catalogue": json.loads(catalogue.to_json()) if catalogue else None,
            "catalogue_skipped": skipped,
        }, indent=2))
    elif skipped and not args.quick:
        print(f"\n(mutant catalogue skipped: {skipped})")
    return 0 if report.ok and (catalogue is None or catalogue.ok) else 1


