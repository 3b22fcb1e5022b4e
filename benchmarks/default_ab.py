"""What a new user gets: `onebit generate` with its default head against `--head none`, each
call a process of its own, alternated A B A B, on ten ordinary chat prompts.

Each process loads the model, decodes one answer and prints its decode tokens/s on stderr
(`onebit generate`'s report line); the policy starts from nothing in every process, as it does
for a user's first call. The table gives, per prompt, the default's tokens/s over plain's
(median and [min .. max] over the rounds, each round's pair run back to back), whether the text
was the same in every process, and the default's acceptance; then the median, worst and best
over the prompts.

    .venv/bin/python benchmarks/default_ab.py [--rounds 3] [--tokens 160] [--head auto]
                                              [--against none]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from policy_ab import PROMPTS  # noqa: E402  (beside this file)

REPORT = re.compile(r"\[(\d+) tokens, ([\d.]+) tokens/s, ([\d.]+) passes/token")
ACCEPTANCE = re.compile(r"acceptance ([\d.]+)%")


def generate(prompt: str, head: str, tokens: int) -> tuple[str, float, float, str]:
    """(text, decode tokens/s, passes/token, acceptance) of one `onebit generate` process."""
    run = subprocess.run([sys.executable, "-m", "onebit.cli", "generate", "--max-tokens",
                          str(tokens), "--head", head, prompt], capture_output=True, text=True,
                         timeout=600, env=dict(os.environ))
    if run.returncode != 0:
        raise SystemExit(f"onebit generate --head {head} failed:\n{run.stderr}")
    line = run.stderr.strip().splitlines()[-1]
    match = REPORT.search(line)
    if match is None:
        raise SystemExit(f"no report line in: {line!r}")
    accepted = ACCEPTANCE.search(line)
    return (run.stdout, float(match.group(2)), float(match.group(3)),
            f"{accepted.group(1)}%" if accepted else "-")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--head", default="auto", help="the arm under test (default auto)")
    parser.add_argument("--against", default="none", help="the baseline arm (default none)")
    args = parser.parse_args(argv)
    a, b = args.head, args.against
    generate("Hello", a, 4)  # the kernel cache warm, whatever the first process would pay
    print(f"| prompt | {a} / {b} | {b} tok/s | {a} passes/token | {a} acceptance | same text |")
    print("|---|---|---:|---:|---:|---|")
    medians, all_same = [], True
    for i, prompt in enumerate(PROMPTS[: args.prompts]):
        ratios, base_speeds, passes, accept, texts = [], [], [], [], set()
        for _ in range(args.rounds):
            text_a, speed_a, pass_a, acc_a = generate(prompt, a, args.tokens)
            text_b, speed_b, _, _ = generate(prompt, b, args.tokens)
            ratios.append(speed_a / speed_b)
            base_speeds.append(speed_b)
            passes.append(pass_a)
            accept.append(acc_a)
            texts |= {text_a, text_b}
        same = len(texts) == 1
        all_same &= same
        medians.append(statistics.median(ratios))
        print(f"| {i + 1} | {medians[-1]:.2f} [{min(ratios):.2f} .. {max(ratios):.2f}] | "
              f"{statistics.median(base_speeds):.0f} | {statistics.median(passes):.3f} | "
              f"{accept[len(accept) // 2]} | {'yes' if same else 'NO'} |", flush=True)
    print(f"\n{a} / {b} over the prompts: median {statistics.median(medians):.2f}, worst "
          f"{min(medians):.2f}, best {max(medians):.2f}; the text "
          f"{'was the same in every process' if all_same else 'DIFFERED'}")


if __name__ == "__main__":
    main()
