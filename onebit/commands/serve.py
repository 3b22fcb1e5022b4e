"""`onebit serve [--model PATH] [--host 127.0.0.1] [--port N] [--head ...] [--kernel ...]`:
an OpenAI-compatible HTTP server over one model (docs/serve.md).

It binds to loopback unless --host says otherwise: without `--api-key` it has no
authentication, so reaching it from other machines is a choice to make, not a default. One
model; one request at a time, or `--parallel N` at once (continuous batching: every answer
still exactly its answer alone). `--cors-origin` lets pages of those origins call it.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import os
import sys

from onebit.commands.common import fail, positive
from onebit.models.kernels import KERNELS
from onebit.serve.heads import DEFAULT_HEAD, SERVE_HEADS
from onebit.serve.server import LOOPBACK
from onebit.serve.stream import STREAM_INTERVAL

#: the slots `onebit serve` opens when --parallel is not given and the model can batch
AUTO_PARALLEL = 4
#: where --api-key is read from when not given: a key on the command line is in `ps`' output
API_KEY_ENV = "ONEBIT_API_KEY"


def parallel_for(requested: int | None, model, head: str) -> int | None:
    """The slots to serve with: --parallel N as given (0: one at a time, None), or by default
    AUTO_PARALLEL where the model runs several sequences (`sequence_stack`) and the head can be
    batched."""
    from onebit.serve.heads import BATCHED_HEADS

    if requested is not None:
        return requested or None
    stack = getattr(model, "sequence_stack", None)
    if head in BATCHED_HEADS and callable(stack) and stack(1) is not None:
        return AUTO_PARALLEL
    return None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port wants an integer, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be in [1, 65535], got {value}")
    return value


def _api_key(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("--api-key is empty")
    return text


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API",
                            description="Serve one model over /v1/completions and "
                            "/v1/chat/completions (streamed or not), /v1/models and /health, "
                            "speculating with a draft head; requests are served one at a time, "
                            "or N at once with --parallel N.")
    parser.add_argument("--model", help="a GGUF file or a checkpoint directory (default: "
                        "SmolLM2-135M-Instruct, pulled on first use)")
    parser.add_argument("--host", default=LOOPBACK, help="the address to bind (default "
                        f"{LOOPBACK}: this machine only; without --api-key the server has no "
                        "authentication)")
    parser.add_argument("--port", type=_port, default=8000, help="the port (default 8000)")
    parser.add_argument("--head", choices=SERVE_HEADS, default=DEFAULT_HEAD,
                        help=f"the draft head (default {DEFAULT_HEAD}: prompt lookup under the "
                        "cost policy, drafts sent only where they pay, sampled requests plain; "
                        "ngram: prompt lookup, every draft sent; none: plain decode). A "
                        "request's \"speculative\": false decodes plainly")
    parser.add_argument("--draft", help="the draft's weights directory (--head mtp|dflash)")
    parser.add_argument("--k", type=positive("--k"), help="drafts per round (default: the "
                        "head's own)")
    parser.add_argument("--parallel", type=positive("--parallel", least=0), metavar="N",
                        help="decode up to N requests at once, each in a slot of its own, in "
                        "one pass of the model (continuous batching; needs a model that runs "
                        "several sequences: the int8 kernel's compiled stack, or Gemma; heads "
                        "none, auto, ngram); 0: one at a time. Default: "
                        f"{AUTO_PARALLEL} where the model and head allow it, else one at a time")
    parser.add_argument("--queue", type=positive("--queue", least=0), default=64, metavar="N",
                        help="with --parallel: requests that may wait for a slot; past that "
                        "a request gets a 429 (default 64)")
    parser.add_argument("--context", type=positive("--context"), metavar="N",
                        help="with --parallel: the positions one slot holds, prompt and answer "
                        "(default: the model's context); the KV memory is bounded by N x "
                        "slots, printed at start")
    parser.add_argument("--stream-interval", type=positive("--stream-interval", least=0),
                        metavar="MS", default=round(STREAM_INTERVAL * 1000),
                        help="a streamed answer's text goes out at most once every MS "
                        "milliseconds after its first piece, the pieces between joined in one "
                        "event (default %(default)s; 0: an event per piece). Each event costs "
                        "the decode a socket write (docs/serve.md)")
    parser.add_argument("--kernel", choices=KERNELS, help="the products' kernel (default: "
                        "int8 when numba is installed, as onebit generate)")
    parser.add_argument("--api-key", metavar="KEY", type=_api_key,
                        default=os.environ.get(API_KEY_ENV) or None,
                        help="answer /v1/* only with the header 'Authorization: Bearer KEY' "
                        "(else a 401 in OpenAI's error JSON; /health and /metrics stay open). "
                        f"Default: ${API_KEY_ENV} where set, else no key")
    parser.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                        help="let web pages of ORIGIN (https://host:port, or * for any) call "
                        "the server from a browser (CORS; repeatable)")
    parser.add_argument("--log-level", default="info",
                        choices=("critical", "error", "warning", "info", "debug"),
                        help="uvicorn's log level (default info)")
    return parser


def _missing_stack() -> str | None:
    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        return (f"{' and '.join(missing)} not installed: pip install 'onebit[serve]'")
    return None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def main(args: argparse.Namespace) -> int:
    missing = _missing_stack()
    if missing:
        return fail("serve", missing)
    from onebit.commands.generate import load_for_text
    from onebit.serve import Engine, create_app
    from onebit.serve.server import serve

    try:
        model = load_for_text(args)
        parallel = parallel_for(args.parallel, model, args.head)
        engine = Engine(model, head=args.head, draft=args.draft, k=args.k,
                        name=args.model or "SmolLM2-135M-Instruct", parallel=parallel,
                        queue=args.queue, context=args.context if parallel else None)
    except (ValueError, RuntimeError, OSError) as error:
        return fail("serve", error)
    if not _is_loopback(args.host) and args.api_key is None:
        print(f"onebit serve: warning: binding {args.host}: anyone who can reach it can use "
              "the model (no authentication: --api-key KEY asks for one)", file=sys.stderr)
    bound = engine.kv_bound()
    at_once = (f"{parallel} requests at once, {args.queue} more may wait"
               + (f", KV cache at most {bound / 2**20:.0f} MiB" if bound else "")
               if parallel else "one request at a time")
    print(f"onebit serve: http://{args.host}:{args.port}/v1 (head {args.head}, {at_once}; "
          f"metrics at /metrics)", file=sys.stderr, flush=True)
    try:
        app = create_app(engine, stream_interval=args.stream_interval / 1000,
                         api_key=args.api_key, cors_origins=tuple(args.cors_origin))
        serve(app, host=args.host, port=args.port, log_level=args.log_level)
    except (OSError, SystemExit) as error:  # a port in use: uvicorn logs it and exits 1
        code = getattr(error, "code", None)
        if isinstance(error, SystemExit) and code in (0, None):
            return 0
        return fail("serve", f"cannot serve on {args.host}:{args.port}: {error}")
    return 0
