"""llama-server: with speculation on, a greedy answer near the end of the slot's context is
cut shorter than the same server's answer without speculation.

Found by `onebit peer llama-server` (check I11-context). Two servers of one binary and one model,
one with `--spec-type ngram-simple` (2-token keys), one without; the same greedy request, a
prompt of the slot's context less 6 tokens and `max_tokens` 24. Without speculation the answer
runs until the context is full; with it, the answer stops earlier. The difference follows from
`get_n_draft_max` leaving room for drafts (`n_ctx - n_tokens - 2`) while the context-full stop
(`n_tokens + 1 >= n_ctx`) is read after a whole accepted block.

    python3 repros/llama_server_context_edge.py --server-bin PATH/llama-server --model FILE.gguf

Exit 1 and the two answers when they differ, 0 when they agree. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

EDGE = 6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary: str, model: str, *spec: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([binary, "-m", model, "-c", "512", "-np", "1", "-t", "2",
                                "--no-warmup", "--host", "127.0.0.1", "--port", str(port),
                                *spec], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as answer:
                if answer.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the server did not become healthy")


def post(url: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(url + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.loads(answer.read())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-bin", default=os.environ.get("ONEBIT_LLAMA_SERVER"))
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    servers = [start(args.server_bin, args.model),
               start(args.server_bin, args.model, "--spec-type", "ngram-simple",
                     "--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8")]
    try:
        (_, plain), (_, spec) = servers
        n_ctx = json.loads(urllib.request.urlopen(plain + "/v1/models").read())
        n_ctx = int(n_ctx["data"][0]["meta"]["n_ctx"])
        unit = post(plain, "/tokenize", {"content": "A: hello\nB: hello\nA: hello\nB: hello\nA:"})
        prompt = (unit["tokens"] * n_ctx)[: n_ctx - EDGE]
        body = {"prompt": prompt, "max_tokens": 4 * EDGE, "temperature": 0,
                "return_tokens": True, "verbose": True}
        answers = {name: post(url, "/v1/completions", body)
                   for name, url in (("plain", plain), ("speculative", spec))}
        ids = {name: a["__verbose"]["tokens"] for name, a in answers.items()}
        for name, a in answers.items():
            finish = a["choices"][0]["finish_reason"]
            print(f"{name:12s} {len(ids[name])} tokens, finish {finish!r}: {ids[name]}")
        print(f"({len(prompt)}-token prompt, {n_ctx}-token slot)")
        return 0 if ids["plain"] == ids["speculative"] else 1
    finally:
        for process, _ in servers:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(10)


if __name__ == "__main__":
    sys.exit(main())
