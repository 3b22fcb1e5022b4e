"""onebit on a real GGUF file (SmolLM2-135M-Instruct Q4_1 by default) beside its peers on the
same file.

    .venv/bin/python benchmarks/real_model_ab.py [--model FILE.gguf] [--rounds 3]
                                                 [--tokens 32] [--threads 2]

Arms, each pinned to --threads threads, all reading the same file:
- onebit (`load_model(file)`, float32; weights dequantised once at load);
- onebit int8 (`load_model(file, kernel="int8")`: Q8_0 / Q4_0 / Q4_1 kept in their blocks,
  integer dot products on int8-quantised activations);
- transformers (`from_pretrained(dir, gguf_file=...)`, float32, dequantised at load), decoded
  step by step with its KV cache;
- llama.cpp through llama-cpp-python when it is importable (the `bench` extra), otherwise the
  reason is printed.
Measured per arm: the prefill of a 128-token prompt (prompt in, first token's logits out, ms)
and plain greedy decode tokens/s after it (tokens after the first). Then onebit's prompt lookup
(the n-gram head, k = 7) against onebit's plain decode on a chat prompt that asks the model to
repeat a paragraph, decode time only; its tokens must equal plain decode's.
For each onebit arm also: verify(8) / step (the time of an 8-row verify over a 1-row step at
the same position, alternated), and the fraction of the read-bandwidth bound in decode: the
bytes of the weights one step reads (the backend's prepared weights) per step time, over the
read bandwidth of this machine measured in-process (a numpy sum over 512 MiB).
Rounds alternate the arms (A B C A B C ...); the table gives median [min .. max] over rounds.
Timings on a shared machine are noisy: read the ratios within a round, and the spread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
              "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
PROMPT_LEN = 128
LOOKUP_K = 7
PARAGRAPH = ("The sea was calm that morning, and the fishing boats left the harbour one by one, "
             "their engines humming softly as the gulls followed them out past the lighthouse "
             "towards the grey line of the horizon.")


def parse_args(argv):
    home = Path(os.environ.get("ONEBIT_HOME") or Path.home() / ".cache" / "onebit")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path,
                        default=home / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-transformers", action="store_true")
    return parser.parse_args(argv)


def spread(values: list[float], fmt: str) -> str:
    return (f"{format(statistics.median(values), fmt)} "
            f"[{format(min(values), fmt)} .. {format(max(values), fmt)}]")


class OnebitArm:
    name = "onebit (float32)"

    def __init__(self, path: Path, kernel: str = "auto") -> None:
        from onebit.models import load_model

        self.model = load_model(path, kernel=kernel)
        if kernel == "int8":
            self.name = "onebit int8"

    def weight_bytes(self) -> int:
        """Bytes of the weights a step reads: every prepared product weight (after a pass)."""
        total = 0
        for handle in self.model.backend._prepared.values():
            total += handle.nbytes if hasattr(handle, "nbytes") else 0
        return total

    def verify_over_step(self, prompt: list[int], repeats: int = 5) -> float:
        """Median over alternated repeats of time(verify of 8 rows) / time(step), both at the
        position after the prompt, nothing committed."""
        m = self.model
        m.reset()
        width = m.max_prefill_rows()
        for at in range(0, len(prompt), width):
            m.verify(prompt[at:at + width], at)
            m.commit_verify(len(prompt[at:at + width]))
        pos, eight = len(prompt), prompt[:8]
        ratios = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            m.verify(eight[:1], pos)
            t1 = time.perf_counter()
            m.verify(eight, pos)
            t2 = time.perf_counter()
            ratios.append((t2 - t1) / (t1 - t0))
        m.commit_verify(0)
        return statistics.median(ratios)

    def prefill_and_decode(self, prompt: list[int], tokens: int) -> tuple[float, float, list]:
        import onebit

        stamps: list[float] = []
        self.model.reset()
        start = time.perf_counter()
        result = onebit.run(self.model, None, prompt, max_tokens=tokens, k=1,
                            on_token=lambda *a: stamps.append(time.perf_counter()))
        return stamps[0] - start, (len(stamps) - 1) / (stamps[-1] - stamps[0]), result.tokens


class TransformersArm:
    name = "transformers (float32)"

    def __init__(self, path: Path, threads: int) -> None:
        import torch
        import transformers

        torch.set_num_threads(threads)
        self.torch = torch
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()

    def prefill_and_decode(self, prompt, tokens):
        torch = self.torch
        with torch.no_grad():
            start = time.perf_counter()
            out = self.model(torch.tensor([prompt]), use_cache=True)
            token = int(out.logits[0, -1].argmax())
            first = time.perf_counter()
            emitted, cache = [token], out.past_key_values
            for _ in range(tokens - 1):
                out = self.model(torch.tensor([[token]]), past_key_values=cache, use_cache=True)
                cache, token = out.past_key_values, int(out.logits[0, -1].argmax())
                emitted.append(token)
            end = time.perf_counter()
        return first - start, (tokens - 1) / (end - first), emitted


class LlamaCppArm:
    name = "llama.cpp"

    def __init__(self, path: Path, threads: int) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(path), n_threads=threads, n_threads_batch=threads,
                         n_ctx=512, n_batch=PROMPT_LEN, verbose=False)

    def prefill_and_decode(self, prompt, tokens):
        import numpy as np

        self.llm.reset()
        start = time.perf_counter()
        self.llm.eval(prompt)
        token = int(np.argmax(self.llm.scores[self.llm.n_tokens - 1]))
        first = time.perf_counter()
        emitted = [token]
        for _ in range(tokens - 1):
            self.llm.eval([token])
            token = int(np.argmax(self.llm.scores[self.llm.n_tokens - 1]))
            emitted.append(token)
        return first - start, (tokens - 1) / (time.perf_counter() - first), emitted


def prompts(model) -> tuple[list[int], list[int]]:
    """A 128-token prompt (the paragraph repeated, cut) and the chat prompt that asks for the
    paragraph back (where prompt lookup finds its drafts)."""
    tok = model.tokenizer
    long = tok.encode(" ".join([PARAGRAPH] * 8), add_special_tokens=False)[:PROMPT_LEN]
    # SmolLM2's ChatML, written out: the benchmark should not depend on the template engine
    text = (f"<|im_start|>user\nRepeat this paragraph word for word: {PARAGRAPH}<|im_end|>\n"
            "<|im_start|>assistant\n")
    return long, tok.encode(text, add_special_tokens=False)


def lookup_round(model, chat: list[int], tokens: int) -> tuple[float, float, bool, float]:
    """(plain tokens/s, lookup tokens/s, same tokens, acceptance) on the repeating prompt."""
    import onebit
    from onebit.heads.ngram import NgramHead

    rates, outs = [], []
    for head in (None, NgramHead(n=3, k=LOOKUP_K)):
        stamps: list[float] = []
        model.reset()
        result = onebit.run(model, head, chat, max_tokens=tokens, k=LOOKUP_K,
                            on_token=lambda *a, s=stamps: s.append(time.perf_counter()))
        rates.append((len(stamps) - 1) / (stamps[-1] - stamps[0]))
        outs.append(result)
    accepted = outs[1].stats.accepted / max(outs[1].stats.proposed, 1)
    return rates[0], rates[1], outs[0].tokens == outs[1].tokens, accepted


def read_bandwidth() -> float:
    """Bytes/s of a numpy sum over 512 MiB (best of 3): the machine's read bound, roughly."""
    import numpy as np

    data = np.ones(1 << 27, np.float32)
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        data.sum()
        best = max(best, data.nbytes / (time.perf_counter() - start))
    return best


def main(argv=None) -> None:
    args = parse_args(argv)
    for name in THREAD_ENV:
        os.environ[name] = str(args.threads)
    if not args.model.is_file():
        sys.exit(f"{args.model}: absent (onebit pull smollm2)")
    onebit_arm = OnebitArm(args.model)
    int8_arm = OnebitArm(args.model, kernel="int8")
    arms = [onebit_arm, int8_arm]
    if not args.skip_transformers:
        arms.append(TransformersArm(args.model, args.threads))
    try:
        arms.append(LlamaCppArm(args.model, args.threads))
    except Exception as error:  # ImportError, or a build that cannot load the file
        print(f"llama.cpp arm left out: {type(error).__name__}: {error}")
    long, chat = prompts(onebit_arm.model)
    results = {arm.name: ([], []) for arm in arms}
    lookup: list[tuple[float, float, bool, float]] = []
    lookup8: list[tuple[float, float, bool, float]] = []
    verify8: dict[str, list[float]] = {a.name: [] for a in (onebit_arm, int8_arm)}
    reference = None
    for r in range(args.rounds):
        for arm in arms:
            prefill, rate, emitted = arm.prefill_and_decode(long, args.tokens)
            results[arm.name][0].append(prefill * 1000)
            results[arm.name][1].append(rate)
            if reference is None:
                reference = emitted
            elif r == 0:
                same = next((i for i, (a, b) in enumerate(zip(reference, emitted, strict=False))
                             if a != b), len(reference))
                print(f"{arm.name}: greedy agrees with onebit for {same} of "
                      f"{len(reference)} tokens")
        lookup.append(lookup_round(onebit_arm.model, chat, args.tokens))
        lookup8.append(lookup_round(int8_arm.model, chat, args.tokens))
        for arm in (onebit_arm, int8_arm):
            verify8[arm.name].append(arm.verify_over_step(long))
    print(f"\nSmolLM2 {args.model.name}, {args.threads} threads, {args.rounds} rounds, "
          f"{PROMPT_LEN}-token prefill, {args.tokens} decoded tokens")
    print(f"| engine | decode tokens/s | {PROMPT_LEN}-token prefill ms |\n|---|---:|---:|")
    for name, (prefills, rates) in results.items():
        print(f"| {name} | {spread(rates, '.1f')} | {spread(prefills, '.0f')} |")
    names = list(results)
    for other in names[1:]:
        ratio = [a / b for a, b in zip(results[other][1], results[names[0]][1], strict=True)]
        pre = [a / b for a, b in zip(results[other][0], results[names[0]][0], strict=True)]
        print(f"{other} / {names[0]} per round: decode {spread(ratio, '.2f')}x, "
              f"prefill time {spread(pre, '.2f')}x")
    bandwidth = read_bandwidth()
    print(f"\nread bandwidth (numpy sum over 512 MiB, in-process): {bandwidth / 1e9:.1f} GB/s")
    for arm in (onebit_arm, int8_arm):
        wbytes = arm.weight_bytes()
        rate = statistics.median(results[arm.name][1])
        print(f"{arm.name}: verify(8)/step {spread(verify8[arm.name], '.2f')}; weights read "
              f"per step {wbytes / 1e6:.0f} MB; decode at {wbytes * rate / bandwidth:.2f} of "
              f"the read-bandwidth bound")
    for name, rows in ((onebit_arm.name, lookup), (int8_arm.name, lookup8)):
        plain, fast, same, acc = zip(*rows, strict=True)
        ups = [f / p for p, f in zip(plain, fast, strict=True)]
        print(f"{name}: prompt lookup (k = {LOOKUP_K}) on a repeating prompt: plain "
              f"{spread(list(plain), '.1f')} tokens/s, lookup {spread(list(fast), '.1f')} "
              f"tokens/s, speed-up {spread(ups, '.2f')}x, "
              f"acceptance {spread(list(acc), '.2f')}, tokens equal to plain: {all(same)}")


if __name__ == "__main__":
    main()
