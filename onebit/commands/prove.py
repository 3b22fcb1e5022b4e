"""`onebit prove`: the bundled loop (or another) held to the whole contract on the toy base."""

from __future__ import annotations

import argparse
import importlib


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "prove",
        help="hold the loop to invariants I1..I12 on the toy base and print the pass laws",
        description="Runs every conformance check of design/loop.md on every standard "
        "scenario and prints checks passed / failed per invariant, then the cost of each arm "
        "in base passes per token. Exits 1 if any check fails.",
    )
    parser.add_argument("--loop", default="onebit.loop:run", metavar="MODULE:FUNC",
                        help="the run() implementation to prove (default onebit.loop:run)")
    parser.add_argument("--format", choices=("text", "md", "json"), default="text")
    return parser


def load(spec: str):
    module_name, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as error:
        raise SystemExit(f"onebit prove: cannot load --loop {spec!r}: {error}") from None


def main(args: argparse.Namespace) -> int:
    from pytest_onebit.prove import prove

    report = prove(load(args.loop), name=args.loop)
    render = {"text": report.to_text, "md": report.to_markdown, "json": report.to_json}
    print(render[args.format]())
    return 0 if report.ok else 1
