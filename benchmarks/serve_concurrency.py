"""Served throughput, one client and many at once: onebit serve one at a time against
`--parallel N`, and llama-server `--parallel N` where its binary is found, A B A B.

Every server runs in its own process (the compiled kernels' OpenMP threads belong to the
process that calls them), all started before the first round and idle while another is
measured. Each round gives every arm, in turn: 8 greedy chat requests one after another (1
client), then the same 8 at once (8 clients); tokens/s is completion tokens over wall time.
The table gives each arm's median and [min .. max] over rounds, each ratio to onebit one at a
time per round, and whether every answer sent together equalled the same request alone.

    .venv/bin/python benchmarks/serve_concurrency.py [--rounds 3] [--tokens 128]
        [--parallel 8] [--head none] [--llama-server PATH] [--model smollm2|gemma3|FILE.gguf]

`--model`: a model `onebit pull` knows (pulled if missing) or a GGUF file; every server loads
the same file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

from policy_ab import PROMPTS as CHAT_PROMPTS  # a script's folder is on its path

# the first eight of policy_ab.py's ordinary chat prompts
PROMPTS = CHAT_PROMPTS[:8]


def post(url: str, prompt: str, tokens: int) -> dict:
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": tokens,
            "temperature": 0, "model": "m"}
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def answer_of(body: dict):
    choice = body["choices"][0]
    return choice.get("token_ids") or choice["message"]["content"]


def one_client(url: str, tokens: int) -> tuple[float, list]:
    start = time.perf_counter()
    bodies = [post(url, p, tokens) for p in PROMPTS]
    seconds = time.perf_counter() - start
    return sum(b["usage"]["completion_tokens"] for b in bodies) / seconds, bodies


def many_clients(url: str, tokens: int) -> tuple[float, list]:
    bodies: list = [None] * len(PROMPTS)

    def ask(i: int) -> None:
        bodies[i] = post(url, PROMPTS[i], tokens)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(PROMPTS))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    return sum(b["usage"]["completion_tokens"] for b in bodies) / seconds, bodies


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} [{min(values):.0f} .. {max(values):.0f}]"


def ratio_spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f} .. {max(values):.2f}]"


def main() -> int:
    from pytest_onebit.peers.server_process import ServerProcess, find_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--head", default="none", help="onebit serve's --head (default none)")
    parser.add_argument("--llama-server", help="the llama-server binary (default: found as "
                        "onebit peer finds it; the arm is left out when there is none)")
    parser.add_argument("--model", default="smollm2",
                        help="a known model's name (pulled if missing) or a GGUF file")
    args = parser.parse_args()
    from onebit.hub import MODELS, model_path

    model = model_path(args.model, pull=True) if args.model in MODELS else Path(args.model)
    onebit = [sys.executable, "-m", "onebit.cli", "serve", "--log-level", "warning",
              "--model", str(model), "--head", args.head]
    arms = {"onebit one at a time": [*onebit, "--parallel", "0"],
            f"onebit --parallel {args.parallel}": [*onebit, "--parallel", str(args.parallel)]}
    binary = find_server(args.llama_server)
    if binary is not None:
        arms[f"llama-server --parallel {args.parallel}"] = [
            str(binary), "-m", str(model), "-t", "2", "--parallel", str(args.parallel),
            "-c", str(1024 * args.parallel), "--no-webui"]
    servers = {name: ServerProcess(argv, name=name, ready_timeout=600).start()
               for name, argv in arms.items()}
    try:
        for server in servers.values():  # warm: eight requests each
            many_clients(server.url, 16)
        speed: dict[str, dict[str, list[float]]] = {a: {"1": [], "8": []} for a in arms}
        equal: dict[str, list[bool]] = {a: [] for a in arms}
        for r in range(args.rounds):
            for name, server in servers.items():
                alone_speed, alone = one_client(server.url, args.tokens)
                together_speed, together = many_clients(server.url, args.tokens)
                speed[name]["1"].append(alone_speed)
                speed[name]["8"].append(together_speed)
                equal[name].append(all(answer_of(a) == answer_of(b)
                                       for a, b in zip(alone, together, strict=True)))
                print(f"round {r + 1} {name}: 1 client {alone_speed:.0f} tokens/s, 8 clients "
                      f"{together_speed:.0f}", file=sys.stderr, flush=True)
    finally:
        for server in servers.values():
            server.stop()
    base = speed["onebit one at a time"]
    print(f"\n{args.rounds} rounds, {args.tokens}-token greedy chat answers, {model.name}, "
          f"2 threads; tokens/s median [min .. max]; ratio to onebit one at a time, per round\n")
    print("| server | 1 client | 8 clients | 8 / 1 | 1 client / onebit's | 8 clients / "
          "onebit's | together = alone |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name in arms:
        s = speed[name]
        print(f"| {name} | {spread(s['1'])} | {spread(s['8'])} | "
              f"{ratio_spread([b / a for a, b in zip(s['1'], s['8'], strict=True)])} | "
              f"{ratio_spread([a / b for a, b in zip(s['1'], base['1'], strict=True)])} | "
              f"{ratio_spread([a / b for a, b in zip(s['8'], base['8'], strict=True)])} | "
              f"{sum(equal[name])}/{len(equal[name])} rounds |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
