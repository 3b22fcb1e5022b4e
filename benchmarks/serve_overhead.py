"""Where a served token's time goes: the same greedy request decoded by `onebit generate`'s
path and by each layer of onebit serve, arms alternated A B C D E, `--rounds` times.

Arms, each adding one layer to the one before, all in one process on one batch engine of one
slot, whose driver thread runs every pass (the compiled kernels keep one OpenMP team; calling
them from two threads of one process slows both: docs/batching.md):
- `loop`: the request's ids straight to the batch engine (`BatchRequest`, no head): the
  forward, the loop, the slot's hand-over;
- `engine`: `Engine.complete`: + the chat template, detokenizing, stop strings;
- `engine + logprobs`: + the scores kept for logprobs (`ScoredBase`, 2 alternatives);
- `HTTP`: the same engine's server, non-streamed, over 127.0.0.1: + uvicorn, starlette, JSON;
- `HTTP stream`: the same, streamed, as served by default: + SSE events, one at most every
  20 ms after the first (`--stream-interval`, onebit.serve.stream);
- `HTTP stream, every piece`: streamed with `--stream-interval 0`, an event per piece of text.

Prints each arm's tokens/s, median [min .. max] over rounds, and its time per token over the
loop's, so a loss coming back shows in the layer that brought it. `onebit generate` on the
same request is timed first in a process of its own (its own line of tokens/s), the number a
served answer is held to.

    .venv/bin/python benchmarks/serve_overhead.py [--rounds 5] [--tokens 128] [--requests 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request

PROMPT = "Explain how a refrigerator keeps food cold."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--requests", type=int, default=4, help="requests per arm per round")
    args = parser.parse_args()

    generate = subprocess.run([sys.executable, "-m", "onebit.cli", "generate", "--head", "none",
                               "--max-tokens", str(args.tokens), "--chat", PROMPT],
                              capture_output=True, text=True)
    said = [line for line in generate.stderr.splitlines() if "tokens/s" in line]
    print(f"onebit generate (own process): {said[-1] if said else generate.stderr[-300:]}",
          file=sys.stderr)

    from onebit.batch import BatchRequest
    from onebit.serve import Engine, create_app
    from onebit.serve.requests import parse
    from onebit.serve.server import ServerThread
    from onebit.text.load import load_text_model

    model = load_text_model(None, kernel="int8")
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": args.tokens,
            "temperature": 0}
    engine = Engine(model, head="none", parallel=1)
    ids, _ = engine.check(parse("chat", body))

    def loop() -> int:
        handle = engine.batch.submit(BatchRequest(prompt=ids, max_tokens=args.tokens))
        return len(handle.result().tokens)

    def post(url: str, stream: bool) -> int:
        request = urllib.request.Request(url + "/v1/chat/completions",
                                         data=json.dumps({**body, "stream": stream}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as response:
            raw = response.read()
        return args.tokens if stream else json.loads(raw)["usage"]["completion_tokens"]

    server = ServerThread(create_app(engine)).start()
    each = ServerThread(create_app(engine, stream_interval=0)).start()
    with_logprobs = {**body, "logprobs": True, "top_logprobs": 2}
    arms = {
        "loop": loop,
        "engine": lambda: len(engine.complete(parse("chat", body)).token_ids),
        "engine + logprobs": lambda: len(engine.complete(parse("chat", with_logprobs)).token_ids),
        "HTTP": lambda: post(server.url, False),
        "HTTP stream": lambda: post(server.url, True),
        "HTTP stream, every piece": lambda: post(each.url, True),
    }
    speed = {a: [] for a in arms}
    try:
        for arm in arms.values():
            arm()  # warm
        for _ in range(args.rounds):
            for name, arm in arms.items():
                start = time.perf_counter()
                tokens = sum(arm() for _ in range(args.requests))
                speed[name].append(tokens / (time.perf_counter() - start))
    finally:
        server.stop()
        each.stop()
    base = statistics.median(speed["loop"])
    print(f"\n{args.rounds} rounds x {args.requests} requests of {args.tokens} greedy tokens, "
          "SmolLM2 Q4_1, int8, 2 threads\n")
    print("| arm | tokens/s | time per token / loop's |")
    print("|---|---:|---:|")
    for name, values in speed.items():
        print(f"| {name} | {statistics.median(values):.0f} [{min(values):.0f} .. "
              f"{max(values):.0f}] | {base / statistics.median(values):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
