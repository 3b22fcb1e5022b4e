"""One user's speed on any GGUF: onebit's forward against llama.cpp's on the same file, 2
threads, rounds alternated A B A B (issue 66: Gemma 3 270M).

    .venv/bin/python benchmarks/llama_server_speed.py [--model gemma3|smollm2|FILE.gguf]
        [--rounds 5] [--tokens 64] [--llama-server PATH]

Each round measures, on the same 128 prompt ids (onebit's tokenizer's, sent to llama-server as
ids, so both engines read the same tokens):
- llama.cpp (arm A): one llama-server process, `-t 2 --parallel 1`, a `/completion` of the 128
  ids with `n_predict` tokens, greedy, `cache_prompt` off; its own `timings` give the prefill
  (`prompt_ms`) and the decode's time per token (`predicted_ms / predicted_n`), so no HTTP time
  is counted;
- onebit (arm B): `benchmarks/verify_cost.py` in a fresh process, one round: a step after the
  prompt (its decode's time per token), verify(8) / step, and the 128-token prefill as the loop
  makes it (two batches of 64).
- the floor (read_floor.py): the file's matrices over this machine's streaming read bandwidth
  with the same threads, measured in the same round, the least time any engine's step can take.
Prints each figure's median [min .. max] over rounds and onebit / llama.cpp round by round,
against issue 66's targets: decode at least 1.5x llama.cpp's tokens/s (a step at most 0.67x
its time per token), the 128-token prefill at most 0.5x its time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import urllib.request
from pathlib import Path

from read_floor import read_bandwidth, weight_bytes

HERE = Path(__file__).resolve().parent
PROMPT_TEXT = "Write a long explanation of how photosynthesis works in plants. " * 12


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


def llama_round(url: str, ids: list[int], tokens: int) -> dict[str, float]:
    body = {"prompt": ids, "n_predict": tokens, "temperature": 0, "cache_prompt": False,
            "ignore_eos": True}
    request = urllib.request.Request(url + "/completion", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        timings = json.loads(response.read())["timings"]
    if timings["prompt_n"] != len(ids):
        raise SystemExit(f"llama-server evaluated {timings['prompt_n']} prompt tokens, "
                         f"not {len(ids)}")
    return {"step": timings["predicted_ms"] / timings["predicted_n"],
            "prefill128": timings["prompt_ms"]}


def onebit_round(model: Path, threads: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, str(HERE / "verify_cost.py"), "--model", str(model),
                           "--rounds", "1", "--json", "--threads", str(threads)],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"verify_cost.py failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])[0]


def main() -> int:
    from onebit.hub import MODELS, model_path
    from onebit.text.load import load_text_model
    from pytest_onebit.peers.server_process import ServerProcess, find_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3",
                        help="a known model's name (pulled if missing) or a GGUF file")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64, help="llama.cpp's decode length")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--llama-server", help="the binary (default: found as onebit peer "
                        "finds it)")
    args = parser.parse_args()
    model = model_path(args.model, pull=True) if args.model in MODELS else Path(args.model)
    ids = load_text_model(model, progress=False).tokenizer.encode(PROMPT_TEXT)[:128]
    binary = find_server(args.llama_server)
    if binary is None:
        raise SystemExit("no llama-server binary: pass --llama-server (docs/tools.md builds one)")
    server = ServerProcess([str(binary), "-m", str(model), "-t", str(args.threads),
                            "--parallel", "1", "-c", "1024", "--no-webui"],
                           name="llama-server", ready_timeout=600).start()
    llama: list[dict[str, float]] = []
    onebit: list[dict[str, float]] = []
    floors: list[float] = []
    size = weight_bytes(model)
    try:
        llama_round(server.url, ids, 8)  # warm-up
        for r in range(args.rounds):
            llama.append(llama_round(server.url, ids, args.tokens))
            onebit.append(onebit_round(model, args.threads))
            floors.append(size / read_bandwidth(args.threads, 1024, 1)[0] / 1e6)
            print(f"round {r + 1}: llama.cpp step {llama[-1]['step']:.2f} ms, prefill "
                  f"{llama[-1]['prefill128']:.0f} ms; onebit step {onebit[-1]['step']:.2f} ms, "
                  f"prefill {onebit[-1]['prefill128']:.0f} ms", file=sys.stderr, flush=True)
    finally:
        server.stop()
    print(f"\n{model.name}, {args.threads} threads, {args.rounds} rounds A B A B; median "
          "[min .. max]\n")
    print("| figure | llama.cpp | onebit | onebit / llama.cpp | target |")
    print("|---|---:|---:|---:|---|")
    for key, label, bound in (("step", "decode ms a token", 1 / 1.5),
                              ("prefill128", "128-token prefill ms", 0.5)):
        ratios = [b[key] / a[key] for a, b in zip(llama, onebit, strict=True)]
        met = "met" if statistics.median(ratios) <= bound else "not met"
        print(f"| {label} | {spread([a[key] for a in llama])} | "
              f"{spread([b[key] for b in onebit])} | {spread(ratios, '{:.3f}')} | "
              f"at most {bound:.2f}: {met} |")
    print(f"\nread floor ({size / 1e6:.1f} MB of matrices a token over the streaming read "
          f"bandwidth): {spread(floors)} ms a token; 1.5x llama.cpp's tokens/s needs "
          f"{spread([a['step'] / 1.5 for a in llama])} ms")
    tps = [a["step"] / b["step"] for a, b in zip(llama, onebit, strict=True)]
    print(f"\ndecode tokens/s, onebit / llama.cpp: {spread(tps)} (target at least 1.5)")
    print(f"onebit verify(8) / step: {spread([b['verify8'] / b['step'] for b in onebit])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
