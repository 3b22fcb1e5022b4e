"""`onebit fabricate`: write a random model of a supported family, so the tools have a target.

Sizes default to the tiny test models (`onebit.models.tiny_config`); any size can be raised
for benchmarks, e.g. `onebit fabricate qwen3 /tmp/m --hidden 1024 --layers 4 --intermediate
2816 --vocab 8192` (about 56 M parameters). Projections that tile into Q4NX's 32 x 256
blocks are quantised, the rest stored as bf16; `--float` writes a HuggingFace-layout float
checkpoint instead.
"""

from __future__ import annotations

import argparse
from pathlib import Path

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
    parser = sub.add_parser("fabricate", help="write a random qwen3 / qwen3_5 model to DIR",
                            description=__doc__)
    parser.add_argument("kind", choices=("qwen3", "qwen3_5"))
    parser.add_argument("dir", type=Path)
    for option in SIZE_OPTIONS:
        parser.add_argument(f"--{option.replace('_', '-')}", dest=option, type=int, default=None)
    parser.add_argument("--float", dest="quantized", action="store_false",
                        help="a HuggingFace float checkpoint instead of a Q4NX container")
    parser.add_argument("--convention", choices=("unsigned", "signed"), default="unsigned")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main(args: argparse.Namespace) -> int:
    from math import prod

    from onebit.models import ModelError, fabricate_model, load_model
    from onebit.models.weights import expected_shapes

    overrides = {field: getattr(args, option) for option, field in SIZE_OPTIONS.items()
                 if getattr(args, option) is not None}
    try:
        path = fabricate_model(args.dir, args.kind, quantized=args.quantized, seed=args.seed,
                               convention=args.convention, **overrides)
        model = load_model(path, q4nx_convention=args.convention)
    except (ModelError, ValueError) as error:
        print(f"onebit fabricate: {error}")
        return 2
    files = sorted(p.name for p in Path(path).iterdir())
    size = sum(p.stat().st_size for p in Path(path).iterdir())
    parameters = sum(prod(shape) for shape in expected_shapes(model.config).values())
    print(f"wrote {args.kind} to {path} ({', '.join(files)}; {size / 2**20:.1f} MiB): "
          f"{model.config.num_hidden_layers} layers, hidden {model.config.hidden_size}, "
          f"vocab {model.vocab_size}, {parameters / 1e6:.1f} M parameters")
    return 0
