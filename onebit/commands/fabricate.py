"""`onebit fabricate`: write a random model, or a random draft for one, so the tools have
something to run on.

    onebit fabricate qwen3 DIR [--hidden 1024 --layers 4 --intermediate 2816 --vocab 8192]
    onebit fabricate qwen3_5 DIR [--float] [--mtp [N]]
    onebit fabricate gemma4 DIR [--float]          # sliding + global layers, PLE, shared KV
    onebit fabricate gemma3 DIR [--float]          # sliding + global layers, two RoPE bases
    onebit fabricate gemma2 DIR [--float]          # alternating layers, attention soft-capping
    onebit fabricate phi3 DIR [--float]            # Llama's layer, fused qkv and gate_up
    onebit fabricate gemma2 DIR --gguf             # a tiny GGUF file (DIR/model.gguf), as
    onebit fabricate phi3 DIR --gguf               #   llama.cpp's converter writes one (Q8_0)
    onebit fabricate dflash DIR --target MODEL_DIR [--block-size 8]
    onebit fabricate mtp DIR --target MODEL_DIR

Target sizes default to the tiny test models (`onebit.models.tiny_config`); any size can be
raised for benchmarks (the first example is about 46 M parameters). Projections that tile
into Q4NX's 32 x 256 blocks are quantised, the rest stored as bf16; `--float` writes a
HuggingFace-layout float checkpoint instead. `--mtp` writes a Qwen3.5 checkpoint as Qwen
publishes it, with N (default 1) MTP layers of its own (`onebit acceptance --head mtp` drafts
with them when no --draft is given). A draft is sized from its target (hidden size, layers,
vocabulary) and written as z-lab and Qwen publish theirs: config.json + BF16 safetensors.
`--gguf` writes a GGUF file instead, `DIR/model.gguf`, for the families llama.cpp names alike
(`onebit.gguf.fabricate`: Q8_0 matrices, F32 norms, the tensor names, fusions and metadata
llama.cpp's converter writes; sizes default to its tiny test model's).
"""

from __future__ import annotations

import argparse
import os
import shutil
from math import prod
from pathlib import Path

from onebit.commands.common import emit, fail, positive
from onebit.models.registry import FAMILY_NAMES

TARGETS = FAMILY_NAMES  # every registered model family
DRAFTS = ("dflash", "mtp")
GGUF_TARGETS = ("llama", "qwen3", "gemma3", "gemma2", "phi3")  # family = GGUF architecture
GGUF_SIZES = {"hidden": "hidden", "layers": "layers", "heads": "heads", "kv_heads": "kv_heads",
              "head_dim": "head_dim", "intermediate": "ffn", "vocab": "vocab"}
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
    for option, field in SIZE_OPTIONS.items():
        flag = f"--{option.replace('_', '-')}"
        parser.add_argument(flag, dest=option, type=positive(flag), default=None, metavar="N",
                            help=f"the target's {field} (default: the tiny test model's)")
    parser.add_argument("--float", dest="quantized", action="store_false",
                        help="a HuggingFace float checkpoint instead of a Q4NX container")
    parser.add_argument("--convention", choices=("unsigned", "signed"), default="unsigned")
    parser.add_argument("--gguf", action="store_true",
                        help=f"write DIR/model.gguf as llama.cpp's converter would "
                             f"({', '.join(GGUF_TARGETS)})")
    parser.add_argument("--target", type=Path, default=None, metavar="MODEL_DIR",
                        help="the model a draft is made for (dflash, mtp)")
    parser.add_argument("--block-size", type=int, default=None,
                        help="DFlash block size B (B - 1 drafts per pass)")
    parser.add_argument("--mtp", type=int, nargs="?", const=1, default=None, metavar="N",
                        help="qwen3_5: add N (default 1) MTP layers, published layout")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main(args: argparse.Namespace) -> int:
    if args.seed < 0:
        return fail("fabricate", f"--seed must be >= 0, got {args.seed}")
    if args.block_size is not None and (args.kind != "dflash" or args.block_size < 2):
        return fail("fabricate", f"--block-size {args.block_size}: a dflash draft's block holds "
                    "B >= 2 tokens (B - 1 drafts per pass)" if args.kind == "dflash"
                    else f"--block-size is for a dflash draft, not {args.kind}")
    try:
        if getattr(args, "gguf", False):
            message = gguf_target(args)
        else:
            message = draft(args) if args.kind in DRAFTS else target(args)
    except (ValueError, OSError) as error:  # the model and draft errors are ValueErrors
        return fail("fabricate", error)
    emit(message)
    return 0


def target(args: argparse.Namespace) -> str:
    from onebit.models import fabricate_model, load_model
    from onebit.models.registry import family_named

    overrides = {field: getattr(args, option) for option, field in SIZE_OPTIONS.items()
                 if getattr(args, option) is not None}
    mtp = getattr(args, "mtp", None)
    if mtp is not None and (args.kind != "qwen3_5" or mtp < 1):
        raise ValueError(f"--mtp {mtp}: MTP layers (>= 1) come with a qwen3_5 model only")
    check_fits(args.kind, overrides, args.quantized and mtp is None, args.dir)
    path = fabricate_model(args.dir, args.kind, quantized=args.quantized and mtp is None,
                           seed=args.seed, convention=args.convention, **overrides)
    if mtp is not None:  # the HF layout Qwen3.5's MTP weights ship in
        from onebit.heads import add_own_mtp

        add_own_mtp(path, layers=mtp, seed=args.seed)
    model = load_model(path, q4nx_convention=args.convention)
    files = sorted(p.name for p in Path(path).iterdir())
    size = sum(p.stat().st_size for p in Path(path).iterdir())
    shapes = family_named(args.kind).shapes(model.config)
    parameters = sum(prod(shape) for shape in shapes.values())
    return (f"wrote {args.kind} to {path} ({', '.join(files)}; {size / 2**20:.1f} MiB): "
            f"{model.config.num_hidden_layers} layers, hidden {model.config.hidden_size}, "
            f"vocab {model.vocab_size}, {parameters / 1e6:.1f} M parameters"
            + (f", {mtp} MTP layer(s)" if mtp else ""))


def gguf_target(args: argparse.Namespace) -> str:
    """Write a tiny `kind` GGUF file to DIR/model.gguf and load it back (the reader's checks)."""
    from onebit.gguf.fabricate import fabricate_gguf
    from onebit.models import load_model

    if args.kind not in GGUF_TARGETS:
        raise ValueError(f"--gguf writes one of {', '.join(GGUF_TARGETS)}, not {args.kind}")
    if not args.quantized or getattr(args, "mtp", None) is not None:
        raise ValueError("--gguf writes Q8_0 matrices; --float and --mtp do not apply")
    sizes = {name: getattr(args, option) for option, name in GGUF_SIZES.items()
             if getattr(args, option) is not None}
    if args.dir.exists() and (not args.dir.is_dir() or any(args.dir.iterdir())):
        raise ValueError(f"{args.dir}: exists and is not an empty directory; fabricate writes a "
                         "new model into a new or empty directory")
    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / "model.gguf"
    fabricate_gguf(path, args.kind, seed=args.seed, **sizes)
    model = load_model(path, kernel="numpy")
    return (f"wrote {args.kind} to {path} ({path.stat().st_size / 2**10:.1f} KiB): "
            f"{model.config.num_hidden_layers} layers, hidden {model.config.hidden_size}, "
            f"vocab {model.vocab_size}")


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


def check_fits(kind: str, overrides: dict, quantized: bool, path: Path) -> None:
    """Refuse a model that would not fit, before anything is allocated or written: a
    directory that already holds files, or sizes that need more memory or disk than there
    is (`ValueError` naming the sizes, the need and what is available)."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ValueError(f"{path}: exists and is not an empty directory; fabricate writes a "
                         "new model into a new or empty directory")
    memory, disk = estimate_bytes(kind, overrides, quantized)
    available = available_memory()
    sizes = ", ".join(f"--{option.replace('_', '-')} {overrides[field]}"
                      for option, field in SIZE_OPTIONS.items() if field in overrides)
    what = f"a {kind}" + (f" with {sizes}" if sizes else "")
    if available is not None and memory > available:
        raise ValueError(f"{what} needs about {memory / 2**30:.1f} GiB of memory to fabricate; "
                         f"{available / 2**30:.1f} GiB is available")
    parent = next((p for p in (path.resolve(), *path.resolve().parents) if p.exists()), None)
    free = shutil.disk_usage(parent).free if parent is not None and parent.is_dir() else None
    if free is not None and disk > free:
        raise ValueError(f"{what} takes about {disk / 2**30:.1f} GiB on disk; {parent} has "
                         f"{free / 2**30:.1f} GiB free")


def estimate_bytes(kind: str, overrides: dict, quantized: bool) -> tuple[int, int]:
    """(peak memory, file size) of fabricating, in bytes: all weights as float32, the largest
    tensor's float64 draws and quantising copies, and the serialised file held once in memory
    while it is written. Counted on 12 and 24 layers (whole periods of any layer pattern) and
    extended linearly, so an absurd layer count is never built."""
    from onebit.models import q4nx

    def count(layers: int) -> tuple[int, int, int]:
        shapes = _shapes(kind, {**overrides, "num_hidden_layers": layers})
        sizes = {name: prod(shape) for name, shape in shapes.items()}
        disk = sum(size * q4nx.BLOCK_BYTES // (q4nx.BLOCK_ROWS * q4nx.BLOCK_COLS)
                   if quantized and q4nx.can_quantize(shapes[name]) else
                   (2 if quantized else 4) * size for name, size in sizes.items())
        return sum(sizes.values()), disk, max(sizes.values())

    layers = overrides.get("num_hidden_layers", _config(kind, {}).num_hidden_layers)
    (p12, d12, largest), (p24, d24, _) = count(12), count(24)
    params = p12 + (layers - 12) * (p24 - p12) // 12
    disk = d12 + (layers - 12) * (d24 - d12) // 12
    return 4 * params + 32 * largest + 2 * disk, disk


def _config(kind: str, overrides: dict):
    from onebit.models.registry import family_named

    return family_named(kind).tiny_config(**overrides)


def _shapes(kind: str, overrides: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor a fabricated `kind` with these sizes holds, by name (its family's)."""
    from onebit.models.registry import family_named

    return family_named(kind).shapes(_config(kind, overrides))


def available_memory() -> int | None:
    """Bytes of memory available now (Linux: MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
