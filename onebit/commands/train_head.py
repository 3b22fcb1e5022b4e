"""`onebit train-head [--model PATH]`: train a draft head for a base, on this machine.

    onebit train-head                 # SmolLM2: about 10 minutes on two cores
    onebit train-head --prompts 64 --epochs 2 --out /tmp/head   # a quick one
    onebit train-head --word-prompts 24000 --budget 2h30m       # as long as it takes, resumable

The base answers the project's prompt set greedily; a small EAGLE-style head learns to draft
those answers from the base's own rows (onebit.train). The head goes to
`$ONEBIT_HOME/heads/<file>-<sha256 prefix>/`, where `onebit generate` and `chat` find it for
that file: `--head auto` (and `trained`) then draft with it. Torch (CPU) is needed to train,
never to draft: `pip install "onebit[train]"`.
"""

from __future__ import annotations

import argparse
import sys

from onebit.commands.common import duration, fail, positive


def add_parser(sub) -> argparse.ArgumentParser:
    from onebit.train.recipe import Recipe

    d = Recipe()
    parser = sub.add_parser("train-head", help="train a draft head for a model (needs torch)",
                            description="Distil the base's greedy answers to the project's "
                            "prompts, fit an EAGLE-style draft head to them, report its "
                            "acceptance on held-out answers per draft position, and save it "
                            "where generate / chat find it.")
    parser.add_argument("--model", help="a GGUF file (default: SmolLM2-135M-Instruct, pulled "
                        "on first use)")
    parser.add_argument("--out", help="the head's directory (default: $ONEBIT_HOME/heads/"
                        "<file>-<sha256 prefix>, where generate finds it)")
    parser.add_argument("--prompts", type=positive("--prompts"), default=d.prompts,
                        help=f"training prompts the base answers (default {d.prompts})")
    parser.add_argument("--word-prompts", type=int, default=d.word_prompts,
                        help=f"more prompts, each around a word of the base's vocabulary "
                        f"(default {d.word_prompts}; docs/heads.md measures 440)")
    parser.add_argument("--held-out", type=positive("--held-out"), default=d.held_out,
                        help=f"held-out prompts (written apart from the training ones) the "
                        f"acceptance is measured on (default and most: {d.held_out})")
    parser.add_argument("--max-tokens", type=positive("--max-tokens"), default=d.max_tokens,
                        help=f"the longest answer (default {d.max_tokens})")
    parser.add_argument("--draft-vocab", type=positive("--draft-vocab"), default=d.draft_vocab,
                        help=f"the head's vocabulary, the base's most used tokens (default "
                        f"{d.draft_vocab})")
    parser.add_argument("--intermediate", type=positive("--intermediate"),
                        default=d.intermediate, help=f"the head's MLP width (default "
                        f"{d.intermediate})")
    parser.add_argument("--epochs", type=positive("--epochs"), default=d.epochs,
                        help=f"passes over the data (default {d.epochs})")
    parser.add_argument("--budget", type=duration("--budget"), default=None,
                        help="the head's time (90s, 30m, 2h30m), counting what earlier runs "
                        f"of the same work directory spent: distilling stops after "
                        f"{d.distil_share * 100:.0f}%% of it and the fit is shortened to end "
                        "in time (default: no limit)")
    parser.add_argument("--work", help="where the distilled answers and the fit's checkpoint "
                        "are kept (default: $ONEBIT_HOME/train/<file>-<sha256 prefix>-<prompts "
                        "sha256 prefix>); the same command run again resumes from there")
    parser.add_argument("--restart", action="store_true", help="discard what an earlier run "
                        "left in the work directory and start afresh")
    parser.add_argument("--shard", type=positive("--shard"), default=d.shard,
                        help=f"prompts distilled per shard, the unit a run resumes from "
                        f"(default {d.shard})")
    parser.add_argument("--max-shards", type=positive("--max-shards"), default=None,
                        help="train on at most this many shards of answers (default: every "
                        "prompt): the data named exactly, where --budget stops wherever the "
                        "machine's speed puts it")
    parser.add_argument("--float16", action="store_true", help="store the weights as float16: "
                        "half the file, as the head shipped with onebit is stored (they are "
                        "quantised to q8_0 to draft either way)")
    parser.add_argument("--seed", type=int, default=d.seed, help="the seed (default 0)")
    parser.add_argument("--threads", type=positive("--threads"), default=d.threads,
                        help=f"torch's CPU threads (default {d.threads})")
    return parser


def main(args: argparse.Namespace) -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        return fail("train-head", RuntimeError(
            "training needs torch (CPU): pip install \"onebit[train]\"; drafting with a trained "
            "head does not"))
    import numpy as np

    from onebit.commands.generate import default_kernel
    from onebit.heads.errors import DraftError
    from onebit.progress import Progress
    from onebit.text.load import load_text_model
    from onebit.train.recipe import Recipe, train_head

    try:
        recipe = Recipe(prompts=args.prompts, word_prompts=args.word_prompts,
                        held_out=args.held_out, max_tokens=args.max_tokens,
                        draft_vocab=args.draft_vocab, intermediate=args.intermediate,
                        epochs=args.epochs, seed=args.seed, threads=args.threads,
                        budget=args.budget, shard=args.shard, max_shards=args.max_shards)
        recipe.check()
        model = load_text_model(args.model, kernel=default_kernel())
        work = args.work
        if args.restart:
            work = _discard(model, recipe, work)
        trained = train_head(model, model.source_path, recipe, out=args.out, work=work,
                             dtype=np.float16 if args.float16 else np.float32,
                             say=lambda line: print(line, file=sys.stderr, flush=True),
                             progress=lambda label, total: Progress(total, label))
    except KeyboardInterrupt:
        return 130
    except (ValueError, RuntimeError, OSError, DraftError) as error:
        return fail("train-head", error)
    r = trained.report
    print(f"held-out acceptance per draft position (given the earlier ones right): "
          f"{', '.join(f'{p:.1%}' for p in r.conditional)}", file=sys.stderr)
    print(f"all right up to that position: {', '.join(f'{p:.1%}' for p in r.cumulative)}; "
          f"{r.held_out} held-out positions, {r.trained} trained; "
          f"{trained.seconds['total']:.0f} s", file=sys.stderr)
    print(trained.path)
    return 0


def _discard(model, recipe, work):
    """Remove the work directory this run would resume from (only the files a run writes
    there: a directory that is not a store is refused, not emptied)."""
    import shutil
    from pathlib import Path

    from onebit.train.prompts import HELD_OUT, vocabulary_words
    from onebit.train.recipe import training_prompts, work_dir
    from onebit.train.store import MANIFEST

    if work is None:
        words = vocabulary_words(model.tokenizer.decode, model.vocab_size) \
            if recipe.word_prompts else []
        work = work_dir(model.source_path, training_prompts(recipe, words),
                        HELD_OUT[: recipe.held_out])
    work = Path(work)
    if work.exists():
        if not (work / MANIFEST).exists():
            raise ValueError(f"--restart: {work} is not a train-head work directory (no "
                             f"{MANIFEST}); not removing it")
        shutil.rmtree(work)
    return work
