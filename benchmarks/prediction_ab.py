"""Predicted outputs against the default head and plain decoding, on edits: a text with a few
spelling mistakes, the model asked to give it back corrected, and the text itself (mistakes
and all) sent as the prediction, as an editor would send it.

One process, the model loaded once; each round runs the arms back to back in the order
none, auto, prediction (A B C A B C), on every text. Prints per text the decode tokens/s of
each arm (median [min .. max] over the rounds), the prediction's and auto's rate over plain's
per round (median [min .. max]), whether every arm gave the same text in every round, and the
prediction's acceptance.

    .venv/bin/python benchmarks/prediction_ab.py [--rounds 3] [--tokens 200]
"""

from __future__ import annotations

import argparse
import statistics

TEXTS = [
    "The quick brown fox jumps over the lazy dog. It was a sunny day and the fox was very "
    "hapy to be outside. The dog did not mind at all, because it was sleeping under a big "
    "tree near the river, where the water was cool and clear.",
    "def mean(values):\n    total = 0\n    for value in values:\n        total += value\n"
    "    return total / len(valuse)\n\n\ndef median(values):\n    ordered = sorted(values)\n"
    "    middle = len(ordered) // 2\n    return ordered[middle]\n",
    "Dear Anna,\n\nThank you for your letter. I am glad to hear that your new job is going "
    "well. We shuld meet next week for coffee, if you have time. I will be in town on Tuesday "
    "and Wednesday.\n\nBest wishes,\nTom",
]
ASK = "Repeat the following text exactly, correcting only its spelling mistakes:\n\n"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f} .. {max(values):.2f}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=200)
    args = parser.parse_args(argv)

    import onebit
    from onebit.text.load import load_text_model

    model = load_text_model(None, kernel="int8")
    onebit.generate(model, "Warm up.", max_tokens=8)  # compile and page in before timing
    arms = ("none", "auto", "prediction")
    print(f"SmolLM2 (int8, {model.max_batch_rows()}-row verify), {args.rounds} rounds of "
          f"none / auto / prediction, {args.tokens} tokens at most\n")
    print("| text | none tokens/s | auto tokens/s | prediction tokens/s | auto / none | "
          "prediction / none | same text | prediction accepted |")
    print("|---|---:|---:|---:|---:|---:|---|---:|")
    for t, text in enumerate(TEXTS):
        rates = {a: [] for a in arms}
        texts = {a: set() for a in arms}
        accepted = []
        for _ in range(args.rounds):
            for arm in arms:
                kwargs = ({"head": "none"} if arm == "none" else {"head": "auto"}
                          if arm == "auto" else {"prediction": text})
                gen = onebit.generate(model, ASK + text, max_tokens=args.tokens, **kwargs)
                rates[arm].append(gen.decode_tokens_per_second)
                texts[arm].add(gen.text)
                if arm == "prediction":
                    s = gen.result.stats
                    accepted.append(s.accepted / max(1, s.proposed))
        same = len(set().union(*texts.values())) == 1
        ratio = {a: [x / y for x, y in zip(rates[a], rates["none"], strict=True)]
                 for a in ("auto", "prediction")}
        print(f"| {t} | {spread(rates['none'])} | {spread(rates['auto'])} | "
              f"{spread(rates['prediction'])} | {spread(ratio['auto'])} | "
              f"{spread(ratio['prediction'])} | {'yes' if same else 'NO'} | "
              f"{statistics.median(accepted):.0%} |")


if __name__ == "__main__":
    main()
