"""Plain decode against prompt lookup alone and under `PolicyHead`, on SmolLM2, A B C A B C.

Each prompt is decoded by every arm in turn, `--rounds` times; the table gives each arm's decode
tokens/s over plain's, per prompt (median and [min .. max] of the rounds), and checks that every
arm's text equals plain decode's. The policy keeps what it measured across prompts, as a served
model would.

    .venv/bin/python benchmarks/policy_ab.py [--rounds 3] [--tokens 160]
"""

from __future__ import annotations

import argparse
import statistics

PROMPTS = [
    "Give me three tips for sleeping better.",
    "Explain how a refrigerator keeps food cold.",
    "Write a short email asking my manager for a day off on Friday.",
    "What is a good recipe for a simple tomato soup?",
    "Summarize the plot of Romeo and Juliet in a few sentences.",
    "Write a Python function that checks whether a number is prime.",
    "How do I stay motivated when learning a new language?",
    "Explain the difference between weather and climate.",
    "List five things to pack for a weekend camping trip.",
    "Why is the sky blue?",
]


def alternate(model, prompts, arms, *, rounds: int, tokens: int) -> None:
    """Decode each prompt with every arm in turn (`arms`: name -> (head, k), "plain" among
    them), `rounds` times, and print the table of each arm's decode tokens/s over plain's
    (median and [min .. max] of the rounds), whether every arm's text was plain's, and each
    arm's median, worst and best over the prompts. Any arm whose text changes between its own
    rounds stops the run."""
    import onebit

    onebit.generate(model, "Hello", max_tokens=8)  # compile / warm
    names = [a for a in arms if a != "plain"]
    print(f"| prompt | {' | '.join(a + ' / plain' for a in names)} | plain tok/s | same text |")
    print(f"|---|{'---|' * len(names)}---|---|")
    all_ratios = {a: [] for a in names}
    for i, prompt in enumerate(prompts):
        speed = {a: [] for a in arms}
        texts = {}
        for _ in range(rounds):
            for name, (head, k) in arms.items():
                gen = onebit.generate(model, prompt, max_tokens=tokens, head=head, k=k)
                speed[name].append(gen.decode_tokens_per_second)
                texts.setdefault(name, gen.text)
                assert gen.text == texts[name]
        same = all(t == texts["plain"] for t in texts.values())
        cells = []
        for name in names:
            ratios = [s / p for s, p in zip(speed[name], speed["plain"], strict=True)]
            all_ratios[name].append(statistics.median(ratios))
            cells.append(f"{statistics.median(ratios):.2f} [{min(ratios):.2f} .. "
                         f"{max(ratios):.2f}]")
        print(f"| {i + 1} | {' | '.join(cells)} | {statistics.median(speed['plain']):.0f} | "
              f"{'yes' if same else 'NO'} |", flush=True)
    for name, ratios in all_ratios.items():
        print(f"{name}: median {statistics.median(ratios):.2f}, worst {min(ratios):.2f}, "
              f"best {max(ratios):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    args = parser.parse_args()

    from onebit.heads import NgramHead
    from onebit.heads.policy import PolicyHead
    from onebit.text.load import load_text_model

    model = load_text_model(None, kernel="int8")
    policy = PolicyHead(NgramHead(n=3, k=8))
    arms = {"plain": None, "ngram": NgramHead(n=3, k=8), "policy": policy}
    alternate(model, PROMPTS[: args.prompts], {name: (head, 7) for name, head in arms.items()},
              rounds=args.rounds, tokens=args.tokens)
    print("policy's measured cost per width (s):",
          {n: round(c * 1e3, 2) for n, c in sorted(policy.cost.items())}, "ms")
    print("policy's acceptance per slot:", [round(x, 2) for x in policy.acceptance()[1:]])


if __name__ == "__main__":
    main()
