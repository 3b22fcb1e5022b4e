"""`onebit peer transformers|llama_cpp|openai|llama-server`: hold another engine's own
speculative decoding to the contract, black-box, and print the check x arm table
(docs/peers.md). `openai` holds any OpenAI-compatible server (`--url`) to its own plain decode;
`llama-server` starts llama.cpp's server itself, plain and once per speculation arm. Both exit
2 when the peer cannot be run (no server, no binary, no model), with the reason.

The harness is imported only when the command runs: the engine does not depend on it."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading

from onebit.commands.common import BAD_INPUT, FAILED, OK, add_format, emit, fail
from onebit.commands.prove import parse_expected

PEER_NAMES = ("transformers", "llama_cpp", "openai", "llama-server")
SERVED = ("openai", "llama-server")


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
        "peer", help="hold another engine's speculative decoding to the contract "
        "(transformers, llama.cpp, llama-server, any OpenAI-compatible server)",
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
                        "transformers: every sampled arm, default 0.25 for toy-sampled and "
                        "0.05 for toy-sampled-sharp; openai and llama-server --sampled: "
                        "default 0.05 for the one-sample test, 0.5 where the two-sample test "
                        "runs)")
    parser.add_argument("--expect-fail", action="append", default=[], metavar="CHECK=REASON",
                        help="declare a check as an expected failure (an open upstream "
                        "bug); the run fails if it passes everywhere (stale)")
    served = parser.add_argument_group("openai", "holding an OpenAI-compatible server")
    served.add_argument("--url", help="the server (http://HOST:PORT, or its /v1)")
    served.add_argument("--plain-url", help="a server of the same model without speculation "
                        "(default: --url with \"speculative\": false in each request)")
    served.add_argument("--check", action="append", default=[], metavar="NAME",
                        help="run only this check (repeatable; default every check; openai "
                        "and llama-server)")
    served.add_argument("--field", action="append", default=[], metavar="KEY=JSON",
                        help="a field sent in every request, for a server's own switches "
                        "(repeatable; the value is JSON, else a string): vLLM's ids with "
                        "--field return_token_ids=true")
    served.add_argument("--sampled", action="store_true",
                        help="run S1-distribution too (hundreds of short sampled requests; "
                        "openai and llama-server)")
    llama = parser.add_argument_group("llama-server", "starting and holding llama.cpp's server")
    llama.add_argument("--server-bin", metavar="PATH",
                       help="the llama-server binary (default: $ONEBIT_LLAMA_SERVER, then "
                       "llama-server beside this Python, then on PATH)")
    llama.add_argument("--model", metavar="FILE.gguf",
                       help="the target model (default: SmolLM2 from `onebit pull smollm2`)")
    llama.add_argument("--threads", type=int, default=2, metavar="N",
                       help="threads for each server (default 2)")
    llama.add_argument("--llama-cpp-src", metavar="DIR",
                       help="the llama.cpp source tree the binary was built from, whose "
                       "convert_hf_to_gguf.py makes the draft-eagle3, draft-dflash and "
                       "draft-dspark arms' drafts (default: "
                       "$ONEBIT_LLAMA_CPP_SRC, then the nearest folder above the binary "
                       "holding the converter)")
    return parser




@contextlib.contextmanager
def _terminate_as_exit():
    """SIGTERM raises SystemExit while the peer runs, so a peer that started servers stops
    them on its way out (Ctrl-C already does: KeyboardInterrupt). Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, _frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(args: argparse.Namespace) -> int:
    from pytest_onebit.peers import LlamaCppPeer, TransformersPeer, run_peer

    if args.peer == "openai" and args.url is None:
        return fail("peer", "openai needs --url (the server to hold)")
    if args.peer != "openai" and (args.url or args.plain_url or args.field):
        return fail("peer", f"--url, --plain-url and --field are for the openai peer, not "
                    f"{args.peer}")
    if args.peer not in SERVED and (args.check or args.sampled):
        return fail("peer", f"--check and --sampled are for the openai and llama-server "
                    f"peers, not {args.peer}")
    if args.peer != "llama-server" and (args.server_bin or args.model or args.llama_cpp_src):
        return fail("peer", f"--server-bin, --model and --llama-cpp-src are for the "
                    f"llama-server peer, not "
                    f"{args.peer}")
    if args.threads < 1:
        return fail("peer", f"--threads must be at least 1, got {args.threads}")
    try:
        if args.peer == "llama-server":
            from pytest_onebit.peers.llama_server_peer import LlamaServerPeer

            peer = LlamaServerPeer(args.server_bin, args.model, arms=tuple(args.arm) or None,
                                   only=tuple(args.check) or None, sampled=args.sampled,
                                   delta=args.delta, threads=args.threads,
                                   llama_cpp_src=args.llama_cpp_src)
        elif args.peer == "openai":
            from pytest_onebit.peers.openai_client import parse_fields
            from pytest_onebit.peers.openai_peer import OpenAIPeer

            peer = OpenAIPeer(args.url, args.plain_url, arms=tuple(args.arm) or None,
                              only=tuple(args.check) or None, sampled=args.sampled,
                              delta=args.delta, fields=parse_fields(args.field))
        elif args.peer == "transformers":
            peer = TransformersPeer(delta=args.delta, arms=tuple(args.arm) or None)
        else:
            peer = LlamaCppPeer()
        expected = parse_expected(args.expect_fail)
        with _terminate_as_exit():
            report = run_peer(peer, expected)
    except ValueError as error:
        return fail("peer", error)
    emit(report.render(args.format))
    if args.peer in SERVED and report.unavailable:
        fail("peer", report.unavailable)
        return BAD_INPUT
    return OK if report.ok else FAILED
