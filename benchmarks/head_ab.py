"""Plain decode against every head on SmolLM2, alternated: prompt lookup alone, the trained head
alone and under the cost policy, and the default (`--head auto`: prompt lookup under it).

Each prompt is decoded by every arm in turn, `--rounds` times (A B C .. A B C ..); the table
gives each arm's decode tokens/s over plain's per prompt (median and [min .. max] of the
rounds) and checks that every arm's text equals plain decode's. Below it: each arm's median and
worst ratio over the prompts, and the trained head's acceptance per draft position (draft i
right given drafts 1 .. i-1 were, over every proposal it made, sent or not). The prompts are
ordinary chat requests, none of them in the training set (onebit/train/prompts.py).

    .venv/bin/onebit train-head            # once: the head this measures
    .venv/bin/python benchmarks/head_ab.py [--rounds 2] [--tokens 160]
"""

from __future__ import annotations

import argparse

import numpy as np

# the same ten chat prompts as policy_ab.py (none of them in onebit/train/prompts.py)
# and its A B C .. table
from policy_ab import PROMPTS, alternate  # noqa: E402 (benchmarks/ is the script's own folder)


class Scored:
    """Wraps a head to score every proposal against the text committed after it."""

    def __init__(self, inner, k: int) -> None:
        self.inner, self.k = inner, k
        self.hits = [0] * k
        self.trials = [0] * k
        self.pending: list[tuple[int, list[int]]] = []
        self.text: list[int] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def reset(self) -> None:
        self.inner.reset()
        self.text, self.pending = [], []

    def commit_rows(self, tokens, rows, count) -> None:
        self.inner.commit_rows(tokens, rows, count)
        self.text.extend(int(t) for t in tokens[:count])
        waiting = []
        for first, drafts in self.pending:
            if first + len(drafts) <= len(self.text):
                for i, d in enumerate(drafts):
                    self.trials[i] += 1
                    if self.text[first + i] != d:
                        break
                    self.hits[i] += 1
            else:
                waiting.append((first, drafts))
        self.pending = waiting

    def propose(self, token, pos, k, hidden):
        drafts = self.inner.propose(token, pos, k, hidden)
        self.pending.append((pos + 1, [int(t) for t in drafts]))
        return drafts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--k", type=int, default=3, help="drafts a round for the bare heads")
    parser.add_argument("--head-dir", help="the trained head to time (default: the one "
                        "`onebit train-head` saved for SmolLM2's file)")
    args = parser.parse_args()

    from onebit.heads import NgramHead
    from onebit.heads.eagle import load_head
    from onebit.heads.policy import CONFIDENCE_BINS, PolicyHead
    from onebit.text.generate import auto_head, trained_head
    from onebit.text.load import load_text_model

    model = load_text_model(None, kernel="int8")

    def head():
        if args.head_dir:
            return load_head(args.head_dir, model, base_path=model.source_path)
        return trained_head(model)

    trained = head()
    if trained is None:
        raise SystemExit("no trained head for SmolLM2: run `onebit train-head` first")
    scored = Scored(head(), trained.k)
    arms = {
        "plain": (None, 1),
        "ngram": (NgramHead(n=3, k=8), 7),
        "trained": (scored, args.k),
        "trained+policy": (PolicyHead(trained, max_k=trained.k), trained.k),
        "auto": (auto_head(model), 7),  # the default: prompt lookup under the policy
    }
    alternate(model, PROMPTS[: args.prompts], arms, rounds=args.rounds, tokens=args.tokens)
    acc = [h / t if t else 0.0 for h, t in zip(scored.hits, scored.trials, strict=True)]
    print("trained head's acceptance per draft position (given the earlier ones right):",
          ", ".join(f"{a:.1%} of {t}" for a, t in zip(acc, scored.trials, strict=True)))
    for name in ("trained+policy", "auto"):
        policy = arms[name][0]
        print(f"{name}: cost per width",
              {n: f"{c * 1e3:.2f} ms" for n, c in sorted(policy.cost.items())},
              f"head {policy.head_cost() * 1e3:.2f} ms a proposal,",
              f"rounds sending 0, 1, 2.. drafts {np.bincount(policy.sent).tolist()}")
    policy = arms["trained+policy"][0]
    print("trained+policy: per confidence bin (edges "
          f"{', '.join(str(e) for e in CONFIDENCE_BINS)}): acceptance",
          [round(float(x), 2) for x in policy.bin_acceptance()],
          "share of first drafts", [round(float(x), 2)
                                    for x in policy.first_bins / policy.first_bins.sum()])


if __name__ == "__main__":
    main()
