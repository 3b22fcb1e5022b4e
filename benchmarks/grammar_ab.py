"""What a grammar costs, on SmolLM2: the matcher's mask per token along JSON answers, and
decode speed with `response_format`-style schemas, plain against the default head, A B A B.

For each prompt the schema's greedy answer is decoded plainly (`head="none"`) and with the
default head (`"auto"`), alternated `--rounds` times in one process; the table gives each
prompt's default / plain tokens/s (median [min .. max]), whether the texts were the same, and
whether the answer parsed and conformed to its schema (jsonschema). Then the mask's cost:
`Matcher.allowed()` timed at every position of those answers.

    .venv/bin/python benchmarks/grammar_ab.py [--rounds 3] [--tokens 160]

With `--served`, the same prompts go to `onebit serve` (in this process, one request at a
time) as chat requests with `response_format: json_schema`, `speculative: false` against the
server's head (`--serve-head`, default serve's own), alternated; tokens/s is completion
tokens over each request's wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from onebit.serve.heads import DEFAULT_HEAD

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
    parser.add_argument("--served", action="store_true",
                        help="through onebit serve, response_format json_schema")
    parser.add_argument("--serve-head", default=DEFAULT_HEAD,
                        help=f"the server's --head with --served (default {DEFAULT_HEAD}, "
                        "serve's)")
    args = parser.parse_args(argv)
    model = load_text_model(None, kernel="int8")
    if args.served:
        return served(model, args)
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


def served(model, args) -> None:
    """The prompts as chat requests with `response_format` to onebit serve, speculation off
    against the default head, A B A B; each answer parsed and validated."""
    import jsonschema

    from onebit.serve import Engine, create_app
    from onebit.serve.server import ServerThread
    from pytest_onebit.peers.openai_client import Client

    print(f"| prompt | {args.serve_head} / plain | plain tok/s | tokens | same ids | valid |")
    print("|---|---|---:|---:|---|---|")
    ratios_all = []
    with ServerThread(create_app(Engine(model, head=args.serve_head))) as server:
        client = Client(server.url)
        client.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                             "max_tokens": 16, "temperature": 0})  # warm
        for i, (prompt, schema) in enumerate(CASES):
            body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0,
                    "max_tokens": args.tokens, "response_format": {
                        "type": "json_schema", "json_schema": {"name": "answer",
                                                               "schema": schema}}}
            speeds = {"plain": [], "spec": []}
            ids, valid = set(), "yes"
            for _ in range(args.rounds):
                for arm, extra in (("plain", {"speculative": False}), ("spec", {})):
                    start = time.perf_counter()
                    answer = client.post("/v1/chat/completions", {**body, **extra})
                    seconds = time.perf_counter() - start
                    choice = answer["choices"][0]
                    speeds[arm].append(answer["usage"]["completion_tokens"] / seconds)
                    ids.add(tuple(choice["token_ids"]))
                    try:
                        jsonschema.validate(json.loads(choice["message"]["content"]), schema)
                    except (ValueError, jsonschema.ValidationError) as error:
                        valid = f"NO ({type(error).__name__}, {choice['finish_reason']})"
            ratios = [s / p for s, p in zip(speeds["spec"], speeds["plain"], strict=True)]
            ratios_all.append(statistics.median(ratios))
            print(f"| {i + 1} | {ratios_all[-1]:.2f} [{min(ratios):.2f} .. {max(ratios):.2f}]"
                  f" | {statistics.median(speeds['plain']):.0f} | "
                  f"{answer['usage']['completion_tokens']} | "
                  f"{'yes' if len(ids) == 1 else 'NO'} | {valid} |", flush=True)
    print(f"\nserved, {args.serve_head} / plain over the prompts: median "
          f"{statistics.median(ratios_all):.2f}, worst {min(ratios_all):.2f}, best "
          f"{max(ratios_all):.2f}")


if __name__ == "__main__":
    main()
