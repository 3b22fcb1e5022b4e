"""Repeated structure, served (issue 64): one system prompt and one JSON output form over many
short documents, sent one after another to `onebit serve --head none`, `--head auto` and
`--head suffix` (the request's own suffix tree and the server's cache of recent answers), one
client, greedy, A B C A B C.

Every server is its own process, all started before the first round and idle while another is
measured; each is warmed with two requests of a form the sets never use. Each round sends every
arm the same `--documents` documents, new ones each round (so the suffix cache holds the
earlier rounds' answers to other documents, never the answer to this one). Prints each arm's
completion tokens/s over the round's wall time, median [min .. max] over rounds, its ratio to
`none` round by round, and whether every answer's text was the same in every arm.

    .venv/bin/python benchmarks/suffix_served.py [--rounds 3] [--documents 50]
        [--model smollm2|FILE.gguf] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path

SYSTEM = ("Extract the person's name, city, date and what happened from the note. Answer with "
          'one JSON object: {"name": ..., "city": ..., "date": ..., "event": ...}.')
NAMES = ["Maria", "Tom", "Priya", "Lukas", "Amara", "Kenji", "Sofia", "Omar", "Ingrid", "Diego",
         "Mei", "Ahmed", "Claire", "Nikolai", "Fatima", "Jonas", "Aiko", "Pedro", "Leila", "Sam"]
CITIES = ["Lisbon", "Leeds", "Chennai", "Munich", "Lagos", "Osaka", "Madrid", "Cairo", "Oslo",
          "Lima", "Seoul", "Dubai", "Lyon", "Kyiv", "Tunis", "Bergen", "Kyoto", "Porto", "Tehran"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
EVENTS = ["moved to {city}", "opened a bakery in {city}", "gave a concert in {city}",
          "started a new job in {city}", "ran a marathon in {city}", "graduated in {city}",
          "visited a museum in {city}", "bought a flat in {city}"]


def documents(count: int, offset: int) -> list[str]:
    """`count` short notes, the `offset`-th on: a name, a city, a date and an event each,
    drawn in a fixed order (the same every run)."""
    notes = []
    for i in range(offset, offset + count):
        name, city = NAMES[i % len(NAMES)], CITIES[(7 * i) % len(CITIES)]
        event = EVENTS[(3 * i) % len(EVENTS)].format(city=city)
        date = f"{1 + (5 * i) % 28} {MONTHS[(11 * i) % 12]} {2015 + i % 9}"
        notes.append(f"On {date}, {name} {event}." if i % 2 else f"{name} {event} on {date}.")
    return notes


def ask(url: str, note: str, tokens: int) -> dict:
    body = {"messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": note}],
            "max_tokens": tokens, "temperature": 0, "model": "m"}
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def one_round(url: str, notes: list[str], tokens: int) -> tuple[float, list[str]]:
    start = time.perf_counter()
    bodies = [ask(url, note, tokens) for note in notes]
    seconds = time.perf_counter() - start
    done = sum(b["usage"]["completion_tokens"] for b in bodies)
    return done / seconds, [b["choices"][0]["message"]["content"] for b in bodies]


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


def main() -> int:
    from onebit.hub import MODELS, model_path
    from pytest_onebit.peers.server_process import ServerProcess

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--documents", type=int, default=50)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--model", default="smollm2")
    args = parser.parse_args()
    model = model_path(args.model, pull=True) if args.model in MODELS else Path(args.model)
    arms = ("none", "auto", "suffix")
    servers = {head: ServerProcess(
        [sys.executable, "-m", "onebit.cli", "serve", "--log-level", "warning", "--model",
         str(model), "--head", head, "--parallel", "0"], name=f"onebit --head {head}",
        ready_timeout=600).start() for head in arms}
    speed: dict[str, list[float]] = {a: [] for a in arms}
    same: list[bool] = []
    try:
        for server in servers.values():  # warm-up, on a form no round uses
            for text in ("Say hello.", "Count to five."):
                body = {"messages": [{"role": "user", "content": text}], "max_tokens": 8,
                        "temperature": 0, "model": "m"}
                urllib.request.urlopen(urllib.request.Request(
                    server.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"}), timeout=600).read()
        for r in range(args.rounds):
            notes = documents(args.documents, r * args.documents)
            texts = {}
            for head, server in servers.items():
                rate, texts[head] = one_round(server.url, notes, args.tokens)
                speed[head].append(rate)
                print(f"round {r + 1} --head {head}: {rate:.1f} tokens/s", file=sys.stderr,
                      flush=True)
            same.append(texts["none"] == texts["auto"] == texts["suffix"])
    finally:
        for server in servers.values():
            server.stop()
    print(f"\n{args.rounds} rounds of {args.documents} documents, one JSON form, greedy, "
          f"{model.name}, one client; completion tokens/s median [min .. max]; ratio to none "
          f"per round\n")
    print("| --head | tokens/s | / none |")
    print("|---|---:|---:|")
    for head in arms:
        ratios = [b / a for a, b in zip(speed["none"], speed[head], strict=True)]
        print(f"| {head} | {spread(speed[head])} | {spread(ratios, '{:.2f}')} |")
    print(f"\nthe same text in every arm: {sum(same)}/{len(same)} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
