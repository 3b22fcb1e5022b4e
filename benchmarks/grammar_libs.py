"""Which constrained-decoding library: llguidance, xgrammar and outlines-core on SmolLM2's
vocabulary, side by side in one process, on what onebit's speculation needs of a matcher.

For each JSON schema of `grammar_ab.py` and a valid answer to it (written out below, tokenized
by onebit's SmolLM2 tokenizer), each library:
- compiles the schema and makes a matcher's first mask (seconds, once per schema;
  outlines-core builds its index over the whole vocabulary here);
- walks the answer token by token: the mask of the next token as a `[vocab]` bool array (what
  `ProcessedBase` reads), timed at every position, then the token taken;
- is rolled back at every position: 4 tokens taken, 4 rolled back, the mask computed again
  and compared with the one before (what a verify does to the matcher per drafted row);
- is compared with llguidance's mask at every position (the schemas' whitespace rules differ
  between libraries; a difference there is reported, not judged).

The rounds alternate the libraries (A B C A B C ...). Nothing here is asserted: it prints a
table, and docs/sampling.md ("A grammar") reads it.

    .venv/bin/pip install xgrammar outlines-core    # not onebit's dependencies
    .venv/bin/python benchmarks/grammar_libs.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from grammar_ab import EVENTS, PERSON, RECIPE

ANSWERS = [
    (PERSON, {"name": "Mara Quill", "age": 42, "hobbies": ["sailing", "chess", "baking"]}),
    (RECIPE, {"title": "Pancakes", "servings": 4, "ingredients": [
        {"item": "flour", "amount": "200 g"}, {"item": "milk", "amount": "300 ml"},
        {"item": "eggs", "amount": "2"}], "steps": ["Whisk everything.", "Fry in butter."]}),
    (EVENTS, {"events": [{"date": "July 4", "title": "Parade", "place": "Main Street"},
                         {"date": "July 5", "title": "Fair", "place": "The park"}]}),
]
ROLLBACK = 4


class LLGuidance:
    name = "llguidance"

    def __init__(self, tokenizer, vocab: int) -> None:
        self.tokenizer, self.vocab = tokenizer, vocab

    def compile(self, schema: dict):
        from onebit.grammar import Grammar

        return Grammar.json_schema(schema)

    def matcher(self, compiled):
        return compiled.matcher(self.tokenizer, self.vocab)

    def mask(self, m) -> np.ndarray:
        m._mask = None  # time the computation, not the cache
        return m.allowed()

    def take(self, m, token: int) -> None:
        m.consume(token)

    def rollback(self, m, n: int) -> None:
        m.rollback(n)


class XGrammar:
    name = "xgrammar"

    def __init__(self, tokenizer, vocab: int) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.vocab = vocab
        special = set(tokenizer.all_special_ids)
        # xgrammar takes a token that decodes to nothing for a special one, never allowed as text
        encoded = [b"" if i in special else tokenizer.token_bytes(i)
                   for i in range(tokenizer.vocab_size)]
        self.info = xgr.TokenizerInfo(encoded, vocab_type=xgr.VocabType.RAW, vocab_size=vocab,
                                      stop_token_ids=sorted(tokenizer.stop_ids))
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab)

    def compile(self, schema: dict):
        return self.compiler.compile_json_schema(json.dumps(schema))

    def matcher(self, compiled):
        return self.xgr.GrammarMatcher(compiled, max_rollback_tokens=16)

    def mask(self, m) -> np.ndarray:
        m.fill_next_token_bitmask(self.bitmask)
        bits = self.bitmask.numpy().view(np.uint8)[0]
        return np.unpackbits(bits, bitorder="little")[:self.vocab].astype(bool)

    def take(self, m, token: int) -> None:
        if not m.accept_token(int(token)):
            raise AssertionError(f"xgrammar refused token {token}")

    def rollback(self, m, n: int) -> None:
        m.rollback(n)


class OutlinesCore:
    name = "outlines-core"

    def __init__(self, tokenizer, vocab: int) -> None:
        from outlines_core import Vocabulary

        self.vocab = vocab
        special = set(tokenizer.all_special_ids)
        table: dict[bytes, list[int]] = {}
        for i in range(tokenizer.vocab_size):
            if i not in special:
                table.setdefault(tokenizer.token_bytes(i), []).append(i)
        self.vocabulary = Vocabulary(tokenizer.eos_token_id, table)
        self.buffer = np.zeros((vocab + 31) // 32, np.int32)

    def compile(self, schema: dict):
        from outlines_core import Index
        from outlines_core.json_schema import build_regex_from_schema

        return Index(build_regex_from_schema(json.dumps(schema)), self.vocabulary)

    def matcher(self, compiled):
        from outlines_core import Guide

        return Guide(compiled, max_rollback=16)

    def mask(self, m) -> np.ndarray:
        m.write_mask_into(self.buffer.ctypes.data, self.buffer.size, 4)
        bits = self.buffer.view(np.uint8)
        return np.unpackbits(bits, bitorder="little")[:self.vocab].astype(bool)

    def take(self, m, token: int) -> None:
        m.advance(int(token), return_tokens=False)

    def rollback(self, m, n: int) -> None:
        m.rollback_state(n)


def walk(lib, compiled, tokens: list[int]) -> tuple[list[float], list[np.ndarray], int]:
    """(mask seconds per position, the masks, positions whose mask after a rollback of
    ROLLBACK tokens differs from the mask before)."""
    m = lib.matcher(compiled)
    lib.mask(m)  # the first mask may finish what compiling left (timed with the compile)
    seconds, masks, wrong = [], [], 0
    for i, token in enumerate(tokens):
        start = time.perf_counter()
        mask = lib.mask(m)
        seconds.append(time.perf_counter() - start)
        masks.append(mask)
        ahead = tokens[i:i + ROLLBACK]
        for t in ahead:
            lib.take(m, t)
        lib.rollback(m, len(ahead))
        wrong += not np.array_equal(lib.mask(m), mask)
        lib.take(m, token)
    return seconds, masks, wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import onebit
    from onebit.hub import model_path
    from onebit.text.generate import model_tokenizer

    model = onebit.load_model(model_path("smollm2", pull=True))
    tok = model_tokenizer(model)
    vocab = int(model.vocab_size)
    texts = [json.dumps(answer) for _, answer in ANSWERS]
    token_lists = [tok.encode(t, add_special_tokens=False) for t in texts]
    libs = []
    for make in (LLGuidance, XGrammar, OutlinesCore):
        try:
            libs.append(make(tok, vocab))
        except ImportError as error:
            print(f"{make.name}: not installed ({error}); skipped")
    compile_s = {lib.name: [] for lib in libs}
    mask_s = {lib.name: [] for lib in libs}
    wrong = dict.fromkeys(compile_s, 0)
    differ = dict.fromkeys(compile_s, 0)
    positions = sum(map(len, token_lists))
    for _ in range(args.rounds):
        reference = None
        for lib in libs:
            all_masks = []
            for (schema, _), tokens in zip(ANSWERS, token_lists, strict=True):
                start = time.perf_counter()
                compiled = lib.compile(schema)
                lib.mask(lib.matcher(compiled))
                compile_s[lib.name].append(time.perf_counter() - start)
                seconds, masks, bad = walk(lib, compiled, tokens)
                mask_s[lib.name] += seconds
                wrong[lib.name] += bad
                all_masks += masks
            if reference is None:
                reference = all_masks
            differ[lib.name] = sum(not np.array_equal(a, b)
                                   for a, b in zip(all_masks, reference, strict=True))
    print(f"{args.rounds} rounds, {len(ANSWERS)} schemas, {positions} positions per round, "
          f"SmolLM2's vocabulary ({vocab}), one thread\n")
    print("| library | compile a schema, first mask (s) | mask median (ms) | p90 | max | "
          "rollback of 4 exact | mask differs from llguidance's |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for lib in libs:
        s = sorted(mask_s[lib.name])
        c = compile_s[lib.name]
        print(f"| {lib.name} | {statistics.median(c):.3f} [{min(c):.3f} .. {max(c):.3f}] | "
              f"{statistics.median(s) * 1e3:.3f} | {s[int(0.9 * len(s))] * 1e3:.3f} | "
              f"{s[-1] * 1e3:.3f} | {positions * args.rounds - wrong[lib.name]} of "
              f"{positions * args.rounds} | {differ[lib.name]} of {positions} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
