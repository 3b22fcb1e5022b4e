"""Where a served token's time goes: the same greedy request decoded by `onebit generate`'s
path and by each layer of onebit serve, arms alternated A B C D E, `--rounds` times.

Arms, each adding one layer to the one before, all in one process on one batch engine of one
slot, whose driver thread runs every pass (the compiled kernels keep one OpenMP team; calling
them from two threads of one process slows both: docs/batching.md):
- `loop`: the request's ids straight to the batch engine (`BatchRequest`, no head): the
  forward, the loop, the slot's hand-over;
- `engine`: `Engine.complete`: + the chat template, detokenizing, stop strings;
- `engine + logprobs`: + the scores kept for logprobs (`ScoredBase`, 2 alternatives);
- `HTTP`: the same engine's server, non-streamed, over 127.0.0.1, from a client in a process of
  its own (`CLIENT`, as a user's): + uvicorn, starlette, JSON;
- `HTTP stream`: the same, streamed, as served by default: + SSE events, one at most every
  20 ms after the first (`--stream-interval`, onebit.serve.stream);
- `HTTP stream, every piece`: streamed with `--stream-interval 0`, an event per piece of text.

Each round also runs `onebit generate` on the same request `--generates` times, each in a
process of its own (the decode's tokens/s it prints), the number a served answer is held to:
the arms alternate with it round by round. Prints each arm's tokens/s, median [min .. max]
over its samples (a round of an arm, or one generate run), its time per token over the
loop's, so a loss coming back shows in the layer that brought it, and its rate over
`onebit generate`'s median.

    .venv/bin/python benchmarks/serve_overhead.py [--rounds 5] [--tokens 128] [--requests 4]
        [--generates 2] [--parallel N]

`--parallel N`: the engine (and so both servers) has N slots, as `onebit serve --parallel N`,
and each request still comes alone: what one user pays for a server that can batch (issue 64:
within 10 % of `onebit generate`).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time

PROMPT = "Explain how a refrigerator keeps food cold."

#: the HTTP arms' client, a process of its own (standard library only): argv url, stream (1/0),
#: requests, body; prints the tokens, its seconds, and each streamed answer's rate past its
#: first token (the first event with text: the prefill is behind it)
CLIENT = r"""
import json, sys, time, urllib.request
url, stream, n, body = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), json.loads(sys.argv[4])
tokens, rates, start = 0, [], time.perf_counter()
for _ in range(n):
    request = urllib.request.Request(url + "/v1/chat/completions",
                                     data=json.dumps({**body, "stream": stream}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        if not stream:
            tokens += json.loads(response.read())["usage"]["completion_tokens"]
            continue
        first = made = None
        for line in response:
            if first is None and b'"content": "' in line and b'"content": ""' not in line:
                first = time.perf_counter()
            if line.startswith(b"data: {") and b'"token_ids"' in line:
                made = len(json.loads(line[6:])["choices"][0]["token_ids"])
    tokens += made
    rates.append((made - 1) / (time.perf_counter() - first))
print(json.dumps({"tokens": tokens, "seconds": time.perf_counter() - start,
                  "after_first": rates}))
"""


def spread(values: list[float]) -> str:
    return (f"{statistics.median(values):.0f} [{min(values):.0f} .. "
            f"{max(values):.0f}]")


def generate_rate(tokens: int) -> float:
    """`onebit generate` on the request in a process of its own (two OpenMP teams in one
    process slow each other: docs/batching.md): the decode's tokens/s it prints."""
    run = subprocess.run([sys.executable, "-m", "onebit.cli", "generate", "--head", "none",
                          "--max-tokens", str(tokens), "--chat", PROMPT],
                         capture_output=True, text=True)
    said = re.search(r"([0-9.]+) tokens/s", run.stderr)
    if run.returncode != 0 or said is None:
        raise SystemExit(f"onebit generate failed: {run.stderr[-300:]}")
    return float(said.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--requests", type=int, default=4, help="requests per arm per round")
    parser.add_argument("--generates", type=int, default=2,
                        help="onebit generate runs per round, each in its own process")
    parser.add_argument("--parallel", type=int, default=1,
                        help="the engine's slots, as onebit serve --parallel (default 1)")
    args = parser.parse_args()

    from onebit.batch import BatchRequest
    from onebit.serve import Engine, create_app
    from onebit.serve.requests import parse
    from onebit.serve.server import ServerThread
    from onebit.text.load import load_text_model

    model = load_text_model(None, kernel="int8")
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": args.tokens,
            "temperature": 0}
    engine = Engine(model, head="none", parallel=args.parallel)
    params = engine.prepare(parse("chat", body))

    def loop() -> int:
        handle = engine.batch.submit(BatchRequest(params))
        return len(handle.result().tokens)

    after_first: dict[str, list[float]] = {}  # a streamed arm: its rate past its first token

    def client(url: str, stream: bool, arm: str):
        """`n` requests from a client process of its own, as a user's would be (a client in
        this process would take the GIL from the decode at every event): (tokens, seconds)."""
        def requests(n: int) -> tuple[int, float]:
            run = subprocess.run([sys.executable, "-c", CLIENT, url, "1" if stream else "0",
                                  str(n), json.dumps(body)], capture_output=True, text=True)
            if run.returncode != 0:
                raise SystemExit(f"the client failed: {run.stderr[-300:]}")
            said = json.loads(run.stdout)
            if stream:
                after_first.setdefault(arm, []).extend(said["after_first"])
            return said["tokens"], said["seconds"]

        return requests

    def timed(one):
        def requests(n: int) -> tuple[int, float]:
            start = time.perf_counter()
            return sum(one() for _ in range(n)), time.perf_counter() - start

        return requests

    server = ServerThread(create_app(engine)).start()
    each = ServerThread(create_app(engine, stream_interval=0)).start()
    with_logprobs = {**body, "logprobs": True, "top_logprobs": 2}
    arms = {
        "loop": timed(loop),
        "engine": timed(lambda: len(engine.complete(parse("chat", body)).token_ids)),
        "engine + logprobs": timed(
            lambda: len(engine.complete(parse("chat", with_logprobs)).token_ids)),
        "HTTP": client(server.url, False, "HTTP"),
        "HTTP stream": client(server.url, True, "HTTP stream"),
        "HTTP stream, every piece": client(each.url, True, "HTTP stream, every piece"),
    }
    speed = {a: [] for a in ["onebit generate", *arms]}
    try:
        for arm in arms.values():
            arm(1)  # warm
        for values in after_first.values():
            values.clear()
        for _ in range(args.rounds):
            speed["onebit generate"] += [generate_rate(args.tokens)
                                         for _ in range(args.generates)]
            for name, arm in arms.items():
                tokens, seconds = arm(args.requests)
                speed[name].append(tokens / seconds)
    finally:
        server.stop()
        each.stop()
    base = statistics.median(speed["loop"])
    print(f"\n{args.rounds} rounds x {args.requests} requests of {args.tokens} greedy tokens, "
          f"SmolLM2 Q4_1, int8, 2 threads, an engine of {args.parallel} slot(s), each request "
          "alone\n")
    alone = statistics.median(speed["onebit generate"])
    print("| arm | tokens/s | time per token / loop's | rate / onebit generate's |")
    print("|---|---:|---:|---:|")
    for name, values in speed.items():
        rate = statistics.median(values)
        print(f"| {name} | {spread(values)} | {base / rate:.2f} | {rate / alone:.2f} |")
    print("\nPast the first token (a streamed answer's decode, as `onebit generate` counts its "
          "tokens/s: the tokens after the first over the time after it), median [min .. max] "
          "over requests:\n")
    print("| arm | tokens/s past the first | / onebit generate's |")
    print("|---|---:|---:|")
    for name, values in after_first.items():
        print(f"| {name} | {spread(values)} | {statistics.median(values) / alone:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
