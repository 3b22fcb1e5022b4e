"""What a grammar costs, on SmolLM2: the matcher's mask per token along JSON answers, and
decode speed with `response_format`-style schemas, plain against the default head, A B A B.

For each prompt the schema's greedy answer is decoded plainly (`head="none"`) and with the
default head (`"auto"`), alternated `--rounds` times in one process; the table gives each
prompt's default / plain tokens/s (median [min .. max]), whether the texts were the same, and
whether the answer parsed and conformed to its schema (jsonschema). Then the mask's cost:
`Matcher.allowed()` timed at every position of those answers.

    .venv/bin/python benchmarks/grammar_ab.py [--rounds 3] [--tokens 160]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

PERSON = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"},
    "hobbies": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "age", "hobbies"], "additionalProperties": False}
RECIPE = {"type": "object", "properties": {
    "title": {"type": "string"}, "servings": {"type": "integer"},
    "ingredients": {"type": "array", "items": {"type": "object", "properties": {
        "item": {"type": "string"}, "amount": {"type": "string"}},
        "required": ["item", "amount"], "additionalProperties": False}},
    "steps": {"type": "array", "items": {"type": "string"}}},
    "required": ["title", "servings", "ingredients", "steps"], "additionalProperties": False}
EVENTS = {"type": "object", "properties": {"events": {"type": "array", "items": {
    "type": "object", "properties": {"date": {"type": "string"}, "title": {"type": "string"},
                                     "place": {"type": "string"}},
    "required": ["date", "title", "place"], "additionalProperties": False}}},
    "required": ["events"], "additionalProperties": False}
CASES = [
    ("Describe a made-up person as JSON with a name, an age and hobbies.", PERSON),
    ("Give me a recipe for pancakes as JSON.", RECIPE),
    ("List three events of a small town's summer festival as JSON.", EVENTS),
    ("Describe a retired teacher who loves gardening, as JSON.", PERSON),
    ("Give me a recipe for a simple tomato soup as JSON.", RECIPE),
]


def main(argv: list[str] | None = None) -> None:
    import jsonschema

    import onebit
    from onebit.grammar import Grammar
    from onebit.processors import Processors
    from onebit.text.load import load_text_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=160)
    parser.add_argument("--head", default="auto")
    args = parser.parse_args(argv)
    model = load_text_model(None, kernel="int8")
    onebit.generate(model, "Hello", max_tokens=8)
    print(f"| prompt | {args.head} / plain | plain tok/s | tokens | same text | valid |")
    print("|---|---|---:|---:|---|---|")
    ratios_all, answers = [], []
    for i, (prompt, schema) in enumerate(CASES):
        knobs = Processors(grammar=Grammar.json_schema(schema))
        speeds = {"plain": [], "spec": []}
        texts = set()
        for _ in range(args.rounds):
            for arm, head in (("plain", "none"), ("spec", args.head)):
                gen = onebit.generate(model, prompt, max_tokens=args.tokens, head=head,
                                      processors=knobs)
                speeds[arm].append(gen.decode_tokens_per_second)
                texts.add(gen.text)
        try:
            jsonschema.validate(json.loads(gen.text), schema)
            valid = "yes"
        except (ValueError, jsonschema.ValidationError) as error:
            valid = f"NO ({type(error).__name__})"
        ratios = [s / p for s, p in zip(speeds["spec"], speeds["plain"], strict=True)]
        ratios_all.append(statistics.median(ratios))
        answers.append((gen, knobs))
        print(f"| {i + 1} | {ratios_all[-1]:.2f} [{min(ratios):.2f} .. {max(ratios):.2f}] | "
              f"{statistics.median(speeds['plain']):.0f} | {len(gen.result.tokens)} | "
              f"{'yes' if len(texts) == 1 else 'NO'} | {valid} |", flush=True)
    print(f"\n{args.head} / plain over the prompts: median {statistics.median(ratios_all):.2f}, "
          f"worst {min(ratios_all):.2f}, best {max(ratios_all):.2f}")
    times = []
    for gen, knobs in answers:
        matcher = knobs.grammar.matcher(model.tokenizer, model.vocab_size)
        for token in gen.result.tokens:
            start = time.perf_counter()
            matcher.allowed()
            times.append(time.perf_counter() - start)
            if token in model.tokenizer.stop_ids:
                break
            matcher.consume(token)
    times.sort()
    print(f"mask per token over {len(times)} positions: median {times[len(times) // 2] * 1e3:.3f}"
          f" ms, 90th percentile {times[int(len(times) * 0.9)] * 1e3:.3f} ms, most "
          f"{times[-1] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
