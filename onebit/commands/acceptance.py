"""`onebit acceptance`: how many drafts a head gets right against its target, per prompt.

    onebit acceptance --model DIR --head dflash|mtp|ngram|perfect [--draft DIR] --prompt-ids FILE
                      [--tokens N] [--all-positions] [--format md|json]

A thin face over `onebit.tools.acceptance.score`. Bad input (a prompt file that is empty or
malformed, a token id past the vocabulary, a model or draft that does not load or does not
fit) prints one line on stderr and exits 2, without a traceback.
"""

from __future__ import annotations

import argparse

from onebit.commands.common import add_format, emit, fail
from onebit.tools.inputs import HEADS


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "acceptance",
        help="score a draft head against its target's greedy text, prompt by prompt",
        description="Runs the target greedily on each prompt (one line of token ids each), "
        "then asks the head for drafts position by position as a speculative loop would, and "
        "reports passes, accepted drafts, accepted and tokens per pass, the first draft's hit "
        "rate and the histogram of accepted per pass.",
    )
    add_common_options(parser)
    parser.add_argument("--k", type=int, default=None,
                        help="drafts asked for per pass (default: a DFlash block's B - 1, "
                        "else 7)")
    parser.add_argument("--all-positions", action="store_true",
                        help="draft from every position, not only where a speculative loop "
                        "would start a pass")
    add_format(parser, default="md")
    return parser


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """The options `acceptance` and `sweep` share: target, head, draft, prompts, tokens."""
    parser.add_argument("--model", required=True, metavar="DIR",
                        help="the target model directory (Q4NX container or HF checkpoint)")
    parser.add_argument("--head", required=True, choices=HEADS)
    parser.add_argument("--draft", metavar="DIR", default=None,
                        help="the draft's directory (config.json + *.safetensors), for "
                        "dflash and mtp (mtp without it: the model's own MTP layers)")
    parser.add_argument("--prompt-ids", required=True, metavar="FILE",
                        help="prompts, one per line, as token ids separated by spaces or commas")
    parser.add_argument("--tokens", type=int, default=64,
                        help="greedy tokens after each prompt (default 64)")
    parser.add_argument("--ngram-n", type=int, default=3,
                        help="the n-gram head's longest match (default 3)")
    group = parser.add_argument_group("sampling (docs/sampling.md)")
    group.add_argument("--temperature", type=float, default=0.0,
                       help="sample at this temperature (default 0: greedy)")
    group.add_argument("--top-k", type=int, default=0,
                       help="sample from the k most likely tokens only (default 0: all)")
    group.add_argument("--top-p", type=float, default=1.0,
                       help="sample from the smallest set reaching this mass (default 1.0)")
    group.add_argument("--seed", type=int, default=0,
                       help="the seed of the sampled runs (default 0; prompt i uses seed + i "
                       "in acceptance)")


def sampling_of(args: argparse.Namespace):
    """The `onebit.Sampling` the options ask for, or None for greedy (temperature 0); a
    ValueError naming the bad option otherwise."""
    from onebit.sampling import Sampling

    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    try:
        sampling = Sampling(args.temperature, args.top_k, args.top_p)
    except ValueError as error:
        raise ValueError(str(error).replace("Sampling.", "--").replace("_", "-")) from None
    if sampling.greedy and (args.top_k or args.top_p != 1.0):
        raise ValueError("--top-k and --top-p need --temperature above 0 (0 is greedy)")
    return None if sampling.greedy else sampling


def main(args: argparse.Namespace) -> int:
    from onebit.progress import Progress
    from onebit.tools.acceptance import score
    from onebit.tools.inputs import (
        ToolInputError,
        load_target,
        make_head,
        natural_k,
        read_prompt_ids,
    )
    from onebit.tools.sampled_acceptance import score_sampled

    try:
        if args.tokens < 1:
            raise ToolInputError(f"--tokens must be >= 1, got {args.tokens}")
        if args.k is not None and args.k < 1:
            raise ToolInputError(f"--k must be >= 1, got {args.k}")
        sampling = sampling_of(args)
        target = load_target(args.model)
        prompts = read_prompt_ids(args.prompt_ids, target.vocab_size)
        head = make_head(args.head, target, draft=args.draft, k=args.k or 8,
                         ngram_n=args.ngram_n, prompts=prompts, tokens=args.tokens,
                         model=args.model)
        k = args.k or natural_k(head)
        if sampling is not None and args.all_positions:
            raise ToolInputError("--all-positions walks the greedy text; it does not sample")
        progress = Progress(len(prompts) * args.tokens, "acceptance")
        try:
            if sampling is not None:
                report = score_sampled(target, head, prompts, tokens=args.tokens, k=k,
                                       sampling=sampling, seed=args.seed, head_name=args.head,
                                       model_name=str(args.model), progress=progress)
            else:
                report = score(target, head, prompts, tokens=args.tokens, k=k,
                               all_positions=args.all_positions, head_name=args.head,
                               model_name=str(args.model), progress=progress)
        finally:
            progress.close()
    except (ValueError, OSError) as error:
        return fail("acceptance", error)
    emit(report.render(args.format))
    return 0
