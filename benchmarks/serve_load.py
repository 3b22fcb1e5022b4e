"""Served load with a real client: aggregate tokens/s and p50 / p99 time to first token and
per-token latency at 1, 2, 4, 8 and 16 concurrent clients, onebit serve `--parallel N`
against llama-server `--parallel N` on the same GGUF, two threads each, alternated.

The load is the `openai` package (`pip install "onebit[load]"`): each client streams greedy
chat completions of `--tokens` tokens, one after another, `--requests` each. Every server runs
in its own process, all started first and idle while another is measured; for each client
count, each round runs every server in turn (A B A B). Time to first token is from sending
the request to the first content chunk; per-token latency is a request's time from its first
content chunk to its last over the tokens after the first (vLLM's TPOT), so it does not
depend on how many tokens a server puts in a chunk (onebit serve sends a chunk at most every
20 ms, llama-server one a token); the chunk gap is the time between two content chunks, what a
reader sees as the stream's stutter.

    .venv/bin/python benchmarks/serve_load.py [--rounds 2] [--tokens 128] [--parallel 8]
        [--clients 1,2,4,8,16] [--requests 2] [--llama-server PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

from policy_ab import PROMPTS as CHAT_PROMPTS  # a script's folder is on its path

# the first eight of policy_ab.py's ordinary chat prompts
PROMPTS = CHAT_PROMPTS[:8]


def one_request(client, prompt: str, tokens: int) -> tuple[float, float | None, list[float],
                                                          int]:
    """(time to first token, time per token after it or None, gaps between content chunks,
    completion tokens) of one streamed greedy chat completion."""
    start = time.perf_counter()
    first, last, gaps, count, usage = None, None, [], 0, None
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": prompt}], max_tokens=tokens,
        temperature=0, stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
        if not chunk.choices or not chunk.choices[0].delta.content:
            continue
        now = time.perf_counter()
        if first is None:
            first = now
        else:
            gaps.append(now - last)
        last = now
        count += 1
    made = usage if usage is not None else count
    if first is None:
        return time.perf_counter() - start, None, gaps, made
    tpot = (last - first) / (made - 1) if made > 1 and last > first else None
    return first - start, tpot, gaps, made


def load(url: str, clients: int, requests: int, tokens: int) -> dict:
    import openai

    ttft, tpot, gaps, total = [], [], [], [0]
    lock = threading.Lock()

    def client_loop(c: int) -> None:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=5,
                               timeout=600)
        for r in range(requests):
            first, per_token, between, n = one_request(
                client, PROMPTS[(c + r) % len(PROMPTS)], tokens)
            with lock:
                ttft.append(first)
                if per_token is not None:
                    tpot.append(per_token)
                gaps.extend(between)
                total[0] += n

    threads = [threading.Thread(target=client_loop, args=(c,)) for c in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    return {"rate": total[0] / seconds, "ttft": ttft, "tpot": tpot, "gaps": gaps}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> int:
    from onebit.hub import model_path
    from pytest_onebit.peers.server_process import ServerProcess, find_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--clients", default="1,2,4,8,16")
    parser.add_argument("--requests", type=int, default=2, help="requests per client")
    parser.add_argument("--head", default="none")
    parser.add_argument("--llama-server")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    model = model_path("smollm2", pull=True)
    arms = {f"onebit --parallel {args.parallel}": [
        sys.executable, "-m", "onebit.cli", "serve", "--log-level", "warning", "--head",
        args.head, "--parallel", str(args.parallel), "--queue", "64"]}
    binary = find_server(args.llama_server)
    if binary is not None:
        arms[f"llama-server --parallel {args.parallel}"] = [
            str(binary), "-m", str(model), "-t", "2", "--parallel", str(args.parallel),
            "-c", str(1024 * args.parallel), "--no-webui"]
    else:
        print("no llama-server binary (docs/tools.md, 'Building llama-server'): onebit only",
              file=sys.stderr)
    servers = {n: ServerProcess(argv, name=n, ready_timeout=600).start()
               for n, argv in arms.items()}
    results: dict = {(n, c): [] for n in arms for c in counts}
    try:
        for server in servers.values():
            load(server.url, 8, 1, 16)  # warm
        for c in counts:
            for r in range(args.rounds):
                for name, server in servers.items():
                    got = load(server.url, c, args.requests, args.tokens)
                    results[(name, c)].append(got)
                    print(f"{c} clients, round {r + 1}, {name}: {got['rate']:.0f} tokens/s",
                          file=sys.stderr, flush=True)
    finally:
        for server in servers.values():
            server.stop()
    print(f"\nSmolLM2-135M-Instruct Q4_1, 2 threads each, streamed greedy chat of {args.tokens} "
          f"tokens, {args.requests} requests per client, {args.rounds} rounds alternated; "
          "tokens/s median [min .. max] over rounds; latencies pooled over rounds, ms\n")
    print("| server | clients | tokens/s | TTFT p50 | TTFT p99 | per token p50 | "
          "per token p99 | chunk gap p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in counts:
        for name in arms:
            runs = results[(name, c)]
            rates = [x["rate"] for x in runs]
            ttft = [t for x in runs for t in x["ttft"]]
            tpot = [t for x in runs for t in x["tpot"]]
            gaps = [g for x in runs for g in x["gaps"]]
            print(f"| {name} | {c} | {statistics.median(rates):.0f} [{min(rates):.0f} .. "
                  f"{max(rates):.0f}] | {1e3 * pct(ttft, .5):.0f} | {1e3 * pct(ttft, .99):.0f} "
                  f"| {1e3 * pct(tpot, .5):.1f} | {1e3 * pct(tpot, .99):.1f} "
                  f"| {1e3 * pct(gaps, .99):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
