"""`onebit fabricate`: write a random model, or a random draft for one, so the tools have
something to run on.

    onebit fabricate qwen3 DIR [--hidden 1024 --layers 4 --intermediate 2816 --vocab 8192]
    onebit fabricate qwen3_5 DIR [--float]
    onebit fabricate dflash DIR --target MODEL_DIR [--block-size 8]
    onebit fabricate mtp DIR --target MODEL_DIR

Target sizes default to the tiny test models (`onebit.models.tiny_config`); any size can be
raised for benchmarks (the first example is about 46 M parameters). Projections that tile
into Q4NX's 32 x 256 blocks are quantised, the rest stored as bf16; `--float` writes a
HuggingFace-layout float checkpoint instead. A draft is sized from its target (hidden size,
layers, vocabulary) and written as config.json + safetensors.
"""

from __future__ import annotations

import argparse
from math import prod
from pathlib import Path

from onebit.commands.common import emit, fail

TARGETS = ("qwen3", "qwen3_5")
DRAFTS = ("dflash", "mtp")
SIZE_OPTIONS = {  # option -> ModelConfig field
    "hidden": "hidden_size",
    "layers": "num_hidden_layers",
    "heads": "num_attention_heads",
    "kv_heads": "num_key_value_heads",
    "head_dim": "head_dim",
    "intermediate": "intermediate_size",
    "vocab": "vocab_size",
}


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("fabricate", help="write a random model (or a draft for one) to DIR",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=TARGETS + DRAFTS)
    parser.add_argument("dir", type=Path)
    for option in SIZE_OPTIONS:
        parser.add_argument(f"--{option.replace('_', '-')}", dest=option, type=int, default=None,
                            help="target size" if option == "hidden" else argparse.SUPPRESS)
    parser.add_argument("--float", dest="quantized", action="store_false",
                        help="a HuggingFace float checkpoint instead of a Q4NX container")
    parser.add_argument("--convention", choices=("unsigned", "signed"), default="unsigned")
    parser.add_argument("--target", type=Path, default=None, metavar="MODEL_DIR",
                        help="the model a draft is made for (dflash, mtp)")
    parser.add_argument("--block-size", type=int, default=None,
                        help="DFlash block size B (B - 1 drafts per pass)")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main(args: argparse.Namespace) -> int:
    try:
        message = draft(args) if args.kind in DRAFTS else target(args)
    except (ValueError, OSError) as error:  # the model and draft errors are ValueErrors
        return fail("fabricate", error)
    emit(message)
    return 0


def target(args: argparse.Namespace) -> str:
    from onebit.models import fabricate_model, load_model
    from onebit.models.weights import expected_shapes

    overrides = {field: getattr(args, option) for option, field in SIZE_OPTIONS.items()
                 if getattr(args, option) is not None}
    path = fabricate_model(args.dir, args.kind, quantized=args.quantized, seed=args.seed,
                           convention=args.convention, **overrides)
    model = load_model(path, q4nx_convention=args.convention)
    files = sorted(p.name for p in Path(path).iterdir())
    size = sum(p.stat().st_size for p in Path(path).iterdir())
    parameters = sum(prod(shape) for shape in expected_shapes(model.config).values())
    return (f"wrote {args.kind} to {path} ({', '.join(files)}; {size / 2**20:.1f} MiB): "
            f"{model.config.num_hidden_layers} layers, hidden {model.config.hidden_size}, "
            f"vocab {model.vocab_size}, {parameters / 1e6:.1f} M parameters")


def draft(args: argparse.Namespace) -> str:
    from onebit.heads import fabricate_dflash, fabricate_mtp
    from onebit.models import load_model

    if args.target is None:
        raise ValueError(f"a {args.kind} draft needs --target MODEL_DIR (the model it drafts for)")
    model = load_model(args.target)
    if args.kind == "dflash":
        extra = {} if args.block_size is None else {"block_size": args.block_size}
        path = fabricate_dflash(args.dir, model, seed=args.seed, **extra)
    else:
        path = fabricate_mtp(args.dir, model, seed=args.seed)
    return f"wrote a random {args.kind} draft for {args.target} to {path}"
