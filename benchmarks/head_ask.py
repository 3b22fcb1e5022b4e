"""What asking the trained head costs, on SmolLM2: `propose` timed as the loop meets it (right
after a base step, the head's weights out of the nearest caches) and hot (asked again at
once), for 1 .. 4 drafts, in steps of the base; with the lm_head rows in the base's own q8_0
blocks and quantised again to q4_1, alternated; and how often the two agree on a draft.

    .venv/bin/python benchmarks/head_ask.py [--head-dir DIR] [--positions 200]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main(argv: list[str] | None = None) -> None:
    import onebit
    from onebit.heads.eagle import load_head
    from onebit.heads.registry import trained_head_dir
    from onebit.hub import model_path
    from onebit.text.load import load_text_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dir", help="a head directory (default: the one generate finds)")
    parser.add_argument("--positions", type=int, default=200)
    args = parser.parse_args(argv)
    model = load_text_model(None, kernel="int8")
    path = model_path()
    folder = args.head_dir or trained_head_dir(model)
    heads = {kind or "q8_0": load_head(folder, model, base_path=path, lm_kind=kind)
             for kind in (None, "q4_1")}
    gen = onebit.generate(model, "Explain how a refrigerator keeps food cold.", max_tokens=
                          args.positions, head="none")
    ids = list(gen.prompt_ids) + list(gen.result.tokens)
    start = len(gen.prompt_ids)
    step = []
    cold = {name: {k: [] for k in range(1, 5)} for name in heads}
    hot = {name: {k: [] for k in range(1, 5)} for name in heads}
    agree = total = 0
    model.reset()
    for h in heads.values():
        h.reset()
    rows = model.verify(ids[:start], 0)
    model.commit_verify(start)
    for h in heads.values():
        h.commit_rows(ids[:start], model.last_hidden_rows(), start)
    del rows
    for t in range(start, len(ids) - 1):
        t0 = time.perf_counter()
        model.verify([ids[t]], t)
        model.commit_verify(1)
        step.append(time.perf_counter() - t0)
        for h in heads.values():
            h.commit_rows([ids[t]], model.last_hidden_rows(), 1)
        k = 1 + (t % 4)
        drafts = {}
        for name, h in (heads.items() if t % 2 else reversed(list(heads.items()))):
            model.verify([ids[t + 1]], t + 1)  # a base pass between asks: caches as in the loop
            t0 = time.perf_counter()
            drafts[name] = h.propose(ids[t + 1], t + 1, k, None)
            cold[name][k].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            h.propose(ids[t + 1], t + 1, k, None)
            hot[name][k].append(time.perf_counter() - t0)
        a, b = drafts.values()
        agree += sum(x == y for x, y in zip(a, b, strict=False))
        total += min(len(a), len(b))
    s = statistics.median(step)
    print(f"a base step (one row): {s * 1e3:.2f} ms at the median")
    print("| lm rows | drafts | asked after a step, ms (steps) | hot, ms |")
    print("|---|---:|---:|---:|")
    for name in heads:
        for k in range(1, 5):
            c, w = statistics.median(cold[name][k]), statistics.median(hot[name][k])
            print(f"| {name} | {k} | {c * 1e3:.3f} ({c / s:.3f}) | {w * 1e3:.3f} |")
    print(f"drafts the two agree on: {agree} of {total}")


if __name__ == "__main__":
    main()
