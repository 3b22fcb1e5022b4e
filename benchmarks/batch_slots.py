"""The batch engine in process, by slots: eight greedy answers decoded with 1, 2, 4 and 8 slots
(and plain `onebit.run` one after another), the arms alternated round by round.

Prints tokens/s per arm, median [min .. max] over rounds, each arm's ratio to one slot per
round, the passes it took, and whether every answer equalled plain `onebit.run`'s.

    .venv/bin/python benchmarks/batch_slots.py [--rounds 3] [--tokens 64] [--head auto]

With `--head auto` every sequence drafts with prompt lookup under a cost policy of its own,
timed by the sequence's share of each pass (what `onebit serve --head auto --parallel N` runs):
the table then also gives the drafts sent per token, which should fall as the batch fills.
"""

from __future__ import annotations

import argparse
import statistics
import time

PROMPTS = ["Give me three tips for sleeping better.", "Explain what a compiler does.",
           "Write a short poem about autumn leaves", "List the planets of the solar system.",
           "Describe a cat.", "Why is the sky blue?", "How do I bake bread?",
           "Tell me about Rome."]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--head", choices=("none", "auto"), default="none")
    args = parser.parse_args()
    import onebit
    from onebit.batch import BatchEngine, BatchRequest
    from onebit.hub import model_path
    from onebit.text.generate import model_tokenizer, prompt_ids

    model = onebit.load_model(model_path("smollm2", pull=True), kernel="int8")
    tok = model_tokenizer(model)
    ids = [prompt_ids(model, tok, p, args.tokens)[0] for p in PROMPTS]

    def plain():
        start = time.perf_counter()
        out = [list(onebit.run(model, None, i, max_tokens=args.tokens, k=0).tokens) for i in ids]
        return sum(map(len, out)) / (time.perf_counter() - start), len(out) * args.tokens, out

    from onebit.serve.heads import batched_head

    factory, k = batched_head(args.head)
    sent: dict[str, float] = {}

    def batched(slots: int):
        engine = BatchEngine(model, slots=slots)
        start = time.perf_counter()
        handles = [engine.submit(BatchRequest.of(prompt=i, max_tokens=args.tokens, head=factory,
                                              k=k)) for i in ids]
        engine.run_until_idle()
        out = [h.result().tokens for h in handles]
        sent[f"{slots} slots"] = engine.stats.proposed / max(1, engine.stats.tokens)
        return sum(map(len, out)) / (time.perf_counter() - start), engine.stats.passes, out

    arms = {"plain onebit.run": plain, **{f"{s} slots": (lambda s=s: batched(s))
                                          for s in (1, 2, 4, 8)}}
    plain()  # warm: compile and touch the caches
    batched(8)
    speed = {a: [] for a in arms}
    passes, same = {}, {a: True for a in arms}
    reference = None
    for _ in range(args.rounds):
        for name, arm in arms.items():
            rate, n, out = arm()
            speed[name].append(rate)
            passes[name] = n
            reference = reference or out
            same[name] &= out == reference
    base = speed["1 slots"]
    print(f"{args.rounds} rounds, eight {args.tokens}-token greedy answers, SmolLM2 Q4_1, int8, "
          f"head {args.head}\n")
    print("| arm | tokens/s | / one slot | passes | drafts sent / token | answers = plain |")
    print("|---|---:|---:|---:|---:|---|")
    for name in arms:
        s = speed[name]
        ratios = [a / b for a, b in zip(s, base, strict=True)]
        print(f"| {name} | {statistics.median(s):.0f} [{min(s):.0f} .. {max(s):.0f}] | "
              f"{statistics.median(ratios):.2f} [{min(ratios):.2f} .. {max(ratios):.2f}] | "
              f"{passes[name]} | {sent.get(name, 0.0):.2f} | {'yes' if same[name] else 'NO'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
