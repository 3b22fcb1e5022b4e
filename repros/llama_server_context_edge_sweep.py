"""llama-server: with any speculation that gets drafts accepted, a greedy answer near the end of
the slot's context is cut shorter than plain decoding's, at some distances from the end and
not others. The sweep of `llama_server_context_edge.py` (one distance, n-gram speculation) over
distances 2 to 11 and three prompts, with the speculation given on the command line.

Found by `onebit peer llama-server` (check I11-context), on the `draft-mtp` arm: there one
distance (6) passed while 9 of these 30 cases cut the answer short. Two servers of one binary
and one model, one with the given speculation flags, one without; each case is one greedy
completion of a prompt of the slot's context less EDGE tokens (the prompt repeated), 24 tokens
asked.

    python3 repros/llama_server_context_edge_sweep.py --server-bin PATH/llama-server \
        --model FILE.gguf -- --spec-type draft-mtp --spec-draft-n-max 4

(the flags after `--` go to the speculative server; default: `--spec-type ngram-simple` with
2-token keys). Exit 1 when any answer is cut short, with each differing case (both answers, the
server's draft counts for that request), 0 when none is. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama_server_context_edge import post, start  # noqa: E402  (the sibling repro's helpers)

EDGES = range(2, 12)
PROMPTS = ("A: hello\nB: hello\nA: hello\nB: hello\nA:", "1, 2, 3, 4, 5, 6, 7, 8,",
           "Once upon a time")
NGRAM = ("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2",
         "--spec-ngram-simple-size-m", "8")


def sweep(plain: str, spec: str) -> tuple[int, int]:
    """Every (prompt, edge) case on both servers; prints the differing ones. (cut short, all)

    Only an answer cut short (the speculative ids a proper prefix of plain's) is counted: an
    answer that goes on with other tokens is printed but not counted, since the plain server
    itself gives either of two near-tied tokens there depending on how the slot's cache was
    filled (docs/peers.md, "The MTP, DFlash and DSpark arms")."""
    n_ctx = json.loads(urllib.request.urlopen(plain + "/v1/models").read())
    n_ctx = int(n_ctx["data"][0]["meta"]["n_ctx"])
    bad = cases = 0
    for text in PROMPTS:
        unit = post(plain, "/tokenize", {"content": text})["tokens"]
        for edge in EDGES:
            prompt = (unit * n_ctx)[: n_ctx - edge]
            body = {"prompt": prompt, "max_tokens": 24, "temperature": 0,
                    "return_tokens": True, "verbose": True}
            answers = {name: post(url, "/v1/completions", body)
                       for name, url in (("plain", plain), ("speculative", spec))}
            ids = {name: a["__verbose"]["tokens"] for name, a in answers.items()}
            cases += 1
            plain_ids, spec_ids = ids["plain"], ids["speculative"]
            if plain_ids != spec_ids:
                cut = len(spec_ids) < len(plain_ids) and plain_ids[:len(spec_ids)] == spec_ids
                bad += cut
                kind = "CUT SHORT" if cut else "other tokens (not counted)"
                timings = answers["speculative"].get("timings", {})
                print(f"{kind}: {text[:12]!r} edge {edge} ({len(prompt)}-token prompt, "
                      f"{n_ctx}-token slot): plain {len(plain_ids)} {plain_ids}, speculative "
                      f"{len(spec_ids)} {spec_ids} (drafted "
                      f"{timings.get('draft_n')}, accepted {timings.get('draft_n_accepted')})")
    return bad, cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-bin", default=os.environ.get("ONEBIT_LLAMA_SERVER"))
    parser.add_argument("--model", required=True)
    parser.add_argument("spec", nargs=argparse.REMAINDER,
                        help="after --: the speculative server's flags")
    args = parser.parse_args()
    flags = [f for f in args.spec if f != "--"] or list(NGRAM)
    servers = [start(args.server_bin, args.model), start(args.server_bin, args.model, *flags)]
    try:
        (_, plain), (_, spec) = servers
        bad, cases = sweep(plain, spec)
        print(f"{bad} of {cases} cases cut short ({' '.join(flags)})")
        return 1 if bad else 0
    finally:
        for process, _ in servers:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(10)


if __name__ == "__main__":
    sys.exit(main())
