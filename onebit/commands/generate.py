"""`onebit generate [--model PATH] "prompt"`: text in, streamed text out.

The text goes to stdout as it is decoded; tokens/s, base passes per token and the head's
acceptance go to stderr, so `onebit generate ... > answer.txt` keeps only the answer. Without
--model it uses SmolLM2, pulled into the cache on first use.
"""

from __future__ import annotations

import argparse
import sys

from onebit.commands.common import fail, positive, quiet_stdout
from onebit.commands.compile_notice import watching_compiles
from onebit.heads.registry import HEAD_NAMES
from onebit.models.kernels import KERNELS, numba_available

MAX_PROMPT_FILE = 16 << 20


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """What `generate` and `chat` share: the model, the head and the sampling knobs."""
    parser.add_argument("--model", help="a GGUF file, a checkpoint directory, or a model "
                        "`onebit pull` knows (smollm2, gemma3), pulled on first use (default: "
                        "smollm2, SmolLM2-135M-Instruct)")
    parser.add_argument("--kernel", choices=KERNELS,
                        help="the products' kernel (default: int8 when numba is installed, "
                        "integer dot products on the file's own blocks as llama.cpp computes "
                        "them; numba: the float reference; numpy: no compiler)")
    parser.add_argument("--system", help="a system turn before the prompt")
    parser.add_argument("--max-tokens", type=positive("--max-tokens"), default=256,
                        help="most tokens to generate (default 256)")
    parser.add_argument("--head", choices=HEAD_NAMES, default="auto",
                        help="the draft head (default auto: prompt lookup under the cost policy, "
                        "which drafts only when it measures that it pays; ngram and trained run "
                        "under it too; none: plain decode)")
    parser.add_argument("--draft", help="the draft's weights directory (--head mtp|dflash)")
    parser.add_argument("--k", type=positive("--k"), help="drafts per round (default: the "
                        "head's own, 7 for prompt lookup)")
    parser.add_argument("--temperature", type=float, default=0.0,
                        help="0 (default) is greedy; above 0 samples")
    parser.add_argument("--top-k", type=int, default=0, help="keep the k likeliest (0: all)")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus mass (1.0: all)")
    parser.add_argument("--seed", type=int, help="the sampler's seed")


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser("generate", help="generate text from a prompt, streamed",
                            description="Generate text after a prompt, through the speculative "
                            "loop: the text to stdout, the speed and cost to stderr.")
    parser.add_argument("prompt", nargs="?", help="the prompt (or --prompt-file)")
    parser.add_argument("--prompt-file", help="read the prompt from this UTF-8 file")
    parser.add_argument("--prediction", metavar="FILE", help="a UTF-8 file holding a guess of "
                        "the answer (OpenAI's predicted outputs: an edit's original text): its "
                        "tokens are the drafts, and the text is the text without it")
    parser.add_argument("--chat", action=argparse.BooleanOptionalAction, default=None,
                        help="wrap the prompt in the model's chat template (default: when the "
                        "model has one); --no-chat sends the text as it is")
    add_model_options(parser)
    return parser


def read_prompt_file(path: str, option: str = "--prompt-file") -> str:
    """The prompt file's text; a ValueError naming the option, the file and the byte where
    UTF-8 breaks."""
    from onebit.text.errors import PromptError

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PROMPT_FILE + 1)
    except OSError as e:
        raise PromptError(f"{option} {path}: {e.strerror or e}") from None
    if len(data) > MAX_PROMPT_FILE:
        raise PromptError(f"{option} {path} is over {MAX_PROMPT_FILE} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PromptError(f"{option} {path} is not valid UTF-8 "
                          f"(byte {e.start}: {data[e.start:e.start + 1]!r})") from None


def default_kernel() -> str:
    """The kernel the text commands load with when --kernel is not given: the fastest there is,
    as `load_model`'s own default (`onebit.models.default_kernel`); int8 is the computation
    llama.cpp makes on the same file (on float weights it runs the float kernel). `--kernel
    numba` (or "auto") names the float reference."""
    return "int8" if numba_available() else "numpy"


def load_for_text(args: argparse.Namespace):
    """The model `generate` and `chat` run: --model (or the default model) with --kernel."""
    from onebit.text.load import load_text_model

    return load_text_model(args.model, kernel=args.kernel or default_kernel())


def sampling_of(args: argparse.Namespace):
    import onebit

    if args.temperature == 0 and args.top_k == 0 and args.top_p == 1.0:
        return None
    return onebit.Sampling(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p)


def write(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()


def report(gen, head: str, compiled_seconds: float = 0.0) -> str:
    """The stderr line after a generation: decode speed (the tokens after the first, which
    the prompt's passes produce), passes per token, the time to the first token (the prefill,
    and on an empty kernel cache the kernels' compile, whose seconds follow), and the head's
    acceptance."""
    s = gen.result.stats
    line = (f"[{s.emitted} tokens, {gen.decode_tokens_per_second:.1f} tokens/s, "
            f"{s.passes_per_token:.3f} passes/token, first token after "
            f"{gen.prefill_seconds * 1e3:.0f} ms ({s.prefill_passes} prefill passes)")
    if compiled_seconds:
        line += f", {compiled_seconds:.1f} s compiling kernels"
    if head != "none":
        line += f", acceptance {s.acceptance_rate:.1%} ({s.accepted}/{s.proposed})"
    return line + "]"


def run_generation(model, prompt, args, *, chat, watch=None) -> object:
    """One generation streamed to stdout, the report to stderr; returns the Generation.
    `watch` (compile_notice.CompileWatch) gives the seconds it spent compiling."""
    import onebit

    gen = onebit.generate(model, prompt, chat=chat, system=args.system,
                          max_tokens=args.max_tokens, head=args.head, k=args.k,
                          sampling=sampling_of(args), seed=args.seed, draft=args.draft,
                          on_text=write, prediction=getattr(args, "prediction_text", None))
    write("\n")
    compiled = watch.take() if watch is not None else 0.0
    print(report(gen, args.head, compiled), file=sys.stderr, flush=True)
    return gen


def main(args: argparse.Namespace) -> int:
    try:
        if (args.prompt is None) == (args.prompt_file is None):
            raise ValueError("give a prompt or --prompt-file, not both or neither")
        prompt = args.prompt if args.prompt is not None else read_prompt_file(args.prompt_file)
        if args.prediction is not None:
            args.prediction_text = read_prompt_file(args.prediction, "--prediction")
        model = load_for_text(args)
        with watching_compiles() as watch:
            run_generation(model, prompt, args, chat=args.chat, watch=watch)
    except KeyboardInterrupt:
        return 130
    except (ValueError, RuntimeError, OSError) as error:
        return fail("generate", error)
    return 0
