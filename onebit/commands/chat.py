"""`onebit chat`: an interactive loop with history, through the model's chat template.

Each line read is a user turn; the answer streams to stdout and joins the history, so the next
turn sees the whole conversation. It reads stdin, so a pipe drives it too
(`printf 'Hi\\nAnd then?\\n' | onebit chat`). An empty line is skipped; `/reset` clears the
history; end of input or `/quit` ends it.
"""

from __future__ import annotations

import argparse
import sys

from onebit.commands.common import fail
from onebit.commands.compile_notice import watching_compiles
from onebit.commands.generate import add_model_options, load_for_text, run_generation, write


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("chat", help="chat with a model (interactive, or from a pipe)",
                            description="An interactive chat with history: one user turn per "
                            "line of stdin, the answer streamed to stdout.")
    add_model_options(parser)
    return parser


def main(args: argparse.Namespace) -> int:
    try:
        model = load_for_text(args)
    except (ValueError, RuntimeError, OSError) as error:
        return fail("chat", error)
    with watching_compiles() as watch:
        return converse(model, args, watch)


def converse(model, args: argparse.Namespace, watch) -> int:
    """The turns, read from stdin until its end or /quit."""
    interactive = sys.stdin.isatty()
    history: list[dict] = []
    while True:
        if interactive:
            write("> ")
        line = sys.stdin.readline()
        if not line or line.strip() == "/quit":
            return 0
        text = line.rstrip("\n")
        if not text.strip():
            continue
        if text.strip() == "/reset":
            history.clear()
            continue
        history.append({"role": "user", "content": text})
        try:
            gen = run_generation(model, history, args, chat=True, watch=watch)
        except KeyboardInterrupt:
            history.pop()
            write("\n")
            continue
        except (ValueError, RuntimeError) as error:
            history.pop()   # the turn failed: the history stays as it was
            fail("chat", error)
            continue
        history.append({"role": "assistant", "content": gen.text})
