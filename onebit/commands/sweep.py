"""`onebit sweep`: the loop at k = 1 .. 8 (or any range) for a head on a base, timed.

    onebit sweep --model DIR --head dflash|mtp|ngram|perfect [--draft DIR] --prompt-ids FILE
                 [--tokens N] [--k 1..8] [--repeats R] [--fallback WINDOW] [--plot FILE.png]
                 [--format md|json]

One row per k (accepted, proposed, batches, steps, passes per token, tokens per pass, ms per
token as the median of the repeats with their spread), a plain decode row, the break-even k
and the best k (see `onebit.tools.sweep`). `--plot` needs matplotlib (optional); without it
the plot is skipped with a message and the table is still printed. Bad input prints one line
on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import sys

from onebit.commands.acceptance import add_common_options, sampling_of
from onebit.commands.common import add_format, emit, fail


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "sweep",
        help="run the loop at a range of k with a head, count passes and time tokens",
        description="For each k, decodes --tokens tokens after every prompt with the head, "
        "--repeats times; prints exact pass counts, the median time per token with its "
        "spread, plain decode's, the break-even k and the best k.",
    )
    add_common_options(parser)
    parser.add_argument("--k", default="1..8", metavar="RANGE",
                        help="the ks: a range 1..8, a list 1,2,4, or both (default 1..8)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed runs per k (default 3); the median is shown")
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="also draw passes and ms per token against k (needs matplotlib)")
    parser.add_argument("--fallback", type=int, default=None, metavar="WINDOW",
                        help="run with onebit.Fallback(window=WINDOW): after WINDOW losing "
                        "rounds in a row, a run switches to plain steps")
    add_format(parser, default="md")
    return parser


def main(args: argparse.Namespace) -> int:
    from onebit.fallback import Fallback
    from onebit.progress import Progress
    from onebit.tools.inputs import ToolInputError, load_target, make_head, read_prompt_ids
    from onebit.tools.sweep import check_plot_target, parse_ks, plot, sweep

    try:
        ks = parse_ks(args.k)
        sampling = sampling_of(args)
        if args.plot:
            check_plot_target(args.plot)
        fallback = None if args.fallback is None else Fallback(window=args.fallback)
        if args.tokens < 1:
            raise ToolInputError(f"--tokens must be >= 1, got {args.tokens}")
        if args.repeats < 1:
            raise ToolInputError(f"--repeats must be >= 1, got {args.repeats}")
        target = load_target(args.model)
        most = target.max_batch_rows()  # a two-pass round verifies k rows, a one-pass k + 1
        ks = parse_ks(args.k, most, f"the model verifies at most {most} rows in one pass")
        prompts = read_prompt_ids(args.prompt_ids, target.vocab_size)
        head = make_head(args.head, target, draft=args.draft, k=max(ks), ngram_n=args.ngram_n,
                         prompts=prompts, tokens=args.tokens, model=args.model)
        progress = Progress((len(ks) + 1) * args.repeats * len(prompts), "sweep")
        try:
            report = sweep(target, head, prompts, ks=ks, tokens=args.tokens,
                           repeats=args.repeats, head_name=args.head,
                           model_name=str(args.model), progress=progress,
                           fallback=fallback, sampling=sampling, seed=args.seed)
        finally:
            progress.close()
    except (ValueError, OSError) as error:
        return fail("sweep", error)
    emit(report.render(args.format))
    if args.plot:
        try:
            why = plot(report, args.plot)
        except (OSError, ValueError) as error:  # checked before the run; the disk may fill
            return fail("sweep", f"--plot {args.plot}: {error}")
        if why:
            print(f"onebit sweep: plot skipped: {why}", file=sys.stderr)
        else:
            print(f"onebit sweep: plot written to {args.plot}", file=sys.stderr)
    return 0
