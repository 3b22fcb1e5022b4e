"""The `onebit` command: a thin face over library functions (each command is a module in
`onebit.commands` with `add_parser(subparsers)` and `main(args) -> int`)."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("prove", "mutants", "mutmut", "fabricate", "acceptance", "sweep", "peer", "pull",
            "generate", "chat", "serve", "train-head", "export-head")


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error as one line on stderr and exit 2, like every other bad
    input (subcommand parsers inherit the class); --help still prints the usage."""

    def error(self, message: str):  # type: ignore[override]
        print(f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)",
              file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="onebit", description="Speculative decoding that emits exactly what greedy emits."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"onebit.commands.{name.replace('-', '_')}")
        module.add_parser(sub).set_defaults(_main=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args._main(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
