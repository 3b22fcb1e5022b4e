"""Suffix decoding against plain decoding and the default head, where text repeats: second turns
that quote the first, and one output form over many inputs (issue 64).

One process, SmolLM2 loaded once (int8, two threads), greedy. Every arm gives the same text
(checked); only the time differs. Arms, run back to back in the order none, auto, suffix
(A B C A B C):
- `none`: plain decode;
- `auto`: the default head, prompt lookup under the cost policy;
- `suffix`: the request's own suffix tree and the process's cache of recent answers
  (`--head suffix`, as the server and `onebit generate` run it).

Sets:
- `second turns`: eight two-turn conversations (writing, coding, extraction, reasoning,
  roleplay, STEM, humanities, math). Turn 1's answer is made once, plainly. Turn 2 is sent
  with it and asks for something that reuses it. The answers' cache is emptied before each
  conversation, so `suffix` drafts from the conversation alone.
- `same form`: one system prompt asking for the same JSON form, over eight short notes in a
  row. The cache is emptied at the start of each round and fills with that round's answers,
  as a server's does.

Prints per set each arm's decode tokens/s (median [min .. max] over every answer of every
round), its rate over `none` answer by answer, the worst answer's rate, and whether the text
was the same in every arm.

    .venv/bin/python benchmarks/suffix_ab.py [--rounds 2] [--tokens 160]
"""

from __future__ import annotations

import argparse
import statistics

CONVERSATIONS = [
    ("Write a short paragraph about why people enjoy walking in the rain.",
     "Now rewrite that paragraph in the past tense, keeping every sentence."),
    ("Write a Python function that returns the factorial of n.",
     "Add a docstring and type hints to that function and show the whole function again."),
    ("List the names and ages in this text: Anna is 34, Ben is 28 and Carla is 41.",
     "Give the same list again as a Markdown table with columns name and age."),
    ("A train leaves at 9:00 and travels 120 km at 60 km/h. When does it arrive? Explain.",
     "Repeat your explanation, then add one sentence on the arrival if it left at 9:30."),
    ("You are a friendly shopkeeper. Greet a customer who wants to buy apples.",
     "Say the same greeting again, but mention that pears are on sale too."),
    ("Explain in four sentences what a chemical bond is.",
     "Repeat those four sentences and add a fifth about ionic bonds."),
    ("Summarise the causes of the French Revolution in five bullet points.",
     "Repeat the five bullet points and give each one a short title."),
    ("Solve 3x + 7 = 22 step by step.",
     "Show the same steps again, then check the answer by substituting it."),
]
SYSTEM = ("Extract the person's name, city and the date from the note. Answer with one JSON "
          'object: {"name": ..., "city": ..., "date": ...}.')
NOTES = [
    "Maria moved to Lisbon on 3 May 2021 after finishing her studies.",
    "On 12 January 2019, Tom opened a bakery in Leeds.",
    "Priya visited Chennai on 7 July 2022 to see her grandmother.",
    "Lukas started a new job in Munich on 1 September 2020.",
    "Amara gave a concert in Lagos on 15 March 2023.",
    "On 28 February 2018 Kenji ran his first marathon in Osaka.",
    "Sofia graduated in Madrid on 30 June 2017.",
    "Omar flew to Cairo on 9 November 2024 for a conference.",
]
ARMS = ("none", "auto", "suffix")


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f} .. {max(values):.2f}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=160)
    args = parser.parse_args(argv)

    import numba

    import onebit
    from onebit.heads.registry import suffix_cache
    from onebit.text.load import load_text_model

    numba.set_num_threads(2)
    model = load_text_model(None, kernel="int8")
    onebit.generate(model, "Warm up.", max_tokens=8, head="none")
    cache = suffix_cache()

    def second_turns() -> list[list]:
        turns = []
        for first, second in CONVERSATIONS:
            answer = onebit.generate(model, first, max_tokens=args.tokens, head="none").text
            turns.append([{"role": "user", "content": first},
                          {"role": "assistant", "content": answer},
                          {"role": "user", "content": second}])
        return turns

    sets = {"second turns": second_turns(),
            "same form": [[{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": note}] for note in NOTES]}
    print(f"SmolLM2 (int8, two threads), {args.rounds} rounds of none / auto / suffix, "
          f"{args.tokens} tokens at most, greedy\n")
    print("| set | none tokens/s | auto / none | suffix / none | suffix's worst | same text |")
    print("|---|---:|---:|---:|---:|---|")
    for name, prompts in sets.items():
        rates = {a: [] for a in ARMS}
        texts: dict[int, set] = {i: set() for i in range(len(prompts))}
        for _ in range(args.rounds):
            for arm in ARMS:
                cache.clear()
                for i, messages in enumerate(prompts):
                    if name == "second turns":
                        cache.clear()  # each conversation alone
                    gen = onebit.generate(model, messages, max_tokens=args.tokens, head=arm)
                    rates[arm].append(gen.decode_tokens_per_second)
                    texts[i].add(gen.text)
        ratio = {a: [x / y for x, y in zip(rates[a], rates["none"], strict=True)]
                 for a in ("auto", "suffix")}
        same = all(len(t) == 1 for t in texts.values())
        print(f"| {name} | {spread(rates['none'])} | {spread(ratio['auto'])} | "
              f"{spread(ratio['suffix'])} | {min(ratio['suffix']):.2f} | "
              f"{'yes' if same else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
