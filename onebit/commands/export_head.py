"""`onebit export-head --out DIR`: write a trained head in a format other engines load.

    onebit export-head --out /tmp/eagle3 --inexact          # SmolLM2's head, speculators layout
    onebit export-head --head DIR --model M.gguf --out OUT --inexact
    onebit export-head --fabricate 7 --out OUT --inexact    # a seeded random head, same shapes

`--format speculators` (the default, and the only one yet) is the speculators EAGLE-3 layout
vLLM serves (`vllm serve OUT`) and llama.cpp's convert_hf_to_gguf.py converts. onebit's head
is not exactly representable in it (docs/heads.md, "Exporting a head: the speculators EAGLE-3
layout"): its taps are normalised and its block has no attention. Without `--inexact` the
command says so and writes nothing; with it, the file is written, its config.json records the
differences, and they are printed on stderr. `onebit.heads.speculators.load_eagle3` reads the
file back into the very head it came from.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from onebit.commands.common import fail

FORMATS = ("speculators",)  # gguf: later


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("export-head", help="write a trained head in the speculators "
                            "EAGLE-3 layout (vLLM, llama.cpp)", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a GGUF file (default: SmolLM2-135M-Instruct, pulled "
                        "on first use)")
    parser.add_argument("--head", default="trained", metavar="trained|DIR",
                        help="the head trained or shipped for the model's file (default), or "
                        "a head directory `onebit train-head` wrote")
    parser.add_argument("--fabricate", type=int, default=None, metavar="SEED",
                        help="export a seeded random head of the --head's shapes instead")
    parser.add_argument("--format", choices=FORMATS, default="speculators",
                        help="the layout to write (default speculators)")
    parser.add_argument("--out", required=True, type=Path, help="the directory to write")
    parser.add_argument("--verifier", default=None, help="the target's name_or_path in "
                        "config.json (default: the model's file; vLLM loads the target from "
                        "it, so give a hub id such as HuggingFaceTB/SmolLM2-135M-Instruct)")
    parser.add_argument("--inexact", action="store_true", help="write the file although an "
                        "engine runs it differently from onebit (the differences go into its "
                        "config.json and onto stderr)")
    return parser


def _head_dir(model, choice: str) -> Path:
    from onebit.heads.errors import DraftError
    from onebit.heads.registry import trained_head_dir

    if choice != "trained":
        return Path(choice)
    found = trained_head_dir(model)
    if found is None:
        raise DraftError(f"no trained head for {getattr(model, 'source_path', 'the model')}: "
                         "make one with `onebit train-head`, or give --head DIR or --fabricate")
    return found


def _fabricated(model, head: str, seed: int, folder: Path) -> Path:
    """A seeded random head of the --head's sizes (fabricate_eagle's when there is none),
    paired with the model's file."""
    from onebit.heads.eagle import fabricate_eagle, file_sha256, load_eagle

    try:
        config, _ = load_eagle(_head_dir(model, head))
        sizes = {"intermediate": config.intermediate_size, "draft_vocab": config.draft_vocab_size}
    except ValueError:
        if head != "trained":
            raise
        sizes = {}
    return fabricate_eagle(folder, model, seed=seed, base_sha256=file_sha256(model.source_path),
                           **sizes)


def main(args: argparse.Namespace) -> int:
    from onebit.commands.generate import default_kernel
    from onebit.heads.eagle import load_head
    from onebit.heads.speculators import export_eagle3
    from onebit.text.load import load_text_model

    if args.fabricate is not None and args.fabricate < 0:
        return fail("export-head", f"--fabricate must be >= 0, got {args.fabricate}")
    try:
        model = load_text_model(args.model, kernel=default_kernel())
        with tempfile.TemporaryDirectory() as scratch:
            folder = (_fabricated(model, args.head, args.fabricate, Path(scratch) / "head")
                      if args.fabricate is not None else _head_dir(model, args.head))
            head = load_head(folder, model, base_path=model.source_path)
            done = export_eagle3(head, args.out, verifier=args.verifier or str(model.source_path),
                                 base_path=model.source_path, inexact=args.inexact)
    except (ValueError, OSError) as error:  # the draft errors are ValueErrors
        return fail("export-head", error)
    for difference in done.differences:
        print(f"onebit export-head: warning: not exact: {difference}", file=sys.stderr)
    print(done.path)
    return 0
