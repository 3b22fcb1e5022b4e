"""`onebit peer transformers|llama_cpp|openai`: hold another engine's own speculative decoding
to the contract, black-box, and print the check x arm table (docs/peers.md). `openai` holds
any OpenAI-compatible server (`--url`) to its own plain decode; it exits 2 when the server
cannot be reached.

The harness is imported only when the command runs: the engine does not depend on it."""

from __future__ import annotations

import argparse

from onebit.commands.common import BAD_INPUT, FAILED, OK, add_format, emit, fail
from onebit.commands.prove import parse_expected

PEER_NAMES = ("transformers", "llama_cpp", "openai")


def _delta(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--delta wants a number, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"--delta must be in (0, 1), got {value}")
    return value


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "peer", help="hold transformers' or llama.cpp's speculative decoding to the contract",
        description="Run another engine's own speculative decoding black-box and judge it "
        "by the contract: a table of check x arm (passed, failed with the first divergence, "
        "or not applicable with the reason). Exit 1 when a check fails.")
    parser.add_argument("peer", choices=PEER_NAMES, help="the engine to hold to the contract")
    add_format(parser, choices=("text", "md", "json"), default="text")
    parser.add_argument("--arm", action="append", default=[], metavar="NAME",
                        help="run only this arm (repeatable; default every arm)")
    parser.add_argument("--delta", type=_delta, metavar="TV",
                        help="the total-variation distance the sampling test must detect "
                        "(99 %% power, false alarms <= 1e-3; the sample size follows; "
                        "default 0.25; openai --sampled: 0.5)")
    parser.add_argument("--expect-fail", action="append", default=[], metavar="CHECK=REASON",
                        help="declare a check as an expected failure (an open upstream "
                        "bug); the run fails if it passes everywhere (stale)")
    served = parser.add_argument_group("openai", "holding an OpenAI-compatible server")
    served.add_argument("--url", help="the server (http://HOST:PORT, or its /v1)")
    served.add_argument("--plain-url", help="a server of the same model without speculation "
                        "(default: --url with \"speculative\": false in each request)")
    served.add_argument("--check", action="append", default=[], metavar="NAME",
                        help="run only this check (repeatable; default every check)")
    served.add_argument("--sampled", action="store_true",
                        help="run S1-distribution too (hundreds of short sampled requests)")
    return parser


def main(args: argparse.Namespace) -> int:
    from pytest_onebit.peers import LlamaCppPeer, TransformersPeer, run_peer

    if args.peer == "openai" and args.url is None:
        return fail("peer", "openai needs --url (the server to hold)")
    if args.peer != "openai" and (args.url or args.plain_url or args.check or args.sampled):
        return fail("peer", f"--url, --plain-url, --check and --sampled are for the openai "
                    f"peer, not {args.peer}")
    try:
        if args.peer == "openai":
            from pytest_onebit.peers.openai_peer import OpenAIPeer

            peer = OpenAIPeer(args.url, args.plain_url, arms=tuple(args.arm) or None,
                              only=tuple(args.check) or None, sampled=args.sampled,
                              delta=args.delta)
        elif args.peer == "transformers":
            peer = TransformersPeer(delta=args.delta, arms=tuple(args.arm) or None)
        else:
            peer = LlamaCppPeer()
        expected = parse_expected(args.expect_fail)
        report = run_peer(peer, expected)
    except ValueError as error:
        return fail("peer", error)
    emit(report.render(args.format))
    if args.peer == "openai" and report.unavailable:
        fail("peer", report.unavailable)
        return BAD_INPUT
    return OK if report.ok else FAILED
