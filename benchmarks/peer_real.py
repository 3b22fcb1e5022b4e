"""The real-model section of `peer_ab.py`: one GGUF file (SmolLM2-135M-Instruct Q4_1 by
default) read, without conversion, by onebit (float32 and `kernel="int8"`), transformers and
llama.cpp, each pinned to the same number of threads.

Arms, in the order every round runs them (A B C D A B C D ...):
- onebit float32 (`load_model(file)`: weights dequantised once at load);
- onebit int8 (`load_model(file, kernel="int8")`: Q8_0 / Q4_0 / Q4_1 kept in their blocks,
  integer dot products on int8-quantised activations);
- transformers (`from_pretrained(dir, gguf_file=...)`, float32, dequantised at load), decoded
  step by step with its KV cache;
- llama.cpp through llama-cpp-python (`peer_llama.LlamaEngine`: one `eval` of the prompt, then
  one token per `eval`, the argmax taken here), when it is importable.

Per round: plain greedy decode after a 128-token prompt (prefill ms and decode tokens/s), then
prompt lookup on a chat prompt that asks the model to repeat a paragraph: onebit's n-gram head
(k = 7) against onebit's plain decode of that prompt, and llama.cpp's
`LlamaPromptLookupDecoding` (7 tokens drafted) against llama.cpp's plain greedy decode of it,
both through `Llama.generate` at temperature 0; then onebit's verify(8) / step, and llama.cpp's
own (an `eval` of 8 rows over one of 1 at the same position, every row's logits kept). Before the
rounds: a logits cross-check on the chat prompt (onebit int8, onebit float32, llama.cpp).
After them: the summary of the targets (`TARGETS`), per onebit arm.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PROMPT_LEN = 128
LOOKUP_K = 7
DEFAULT_TOKENS = 40  # the paragraph is 40 tokens: lookup has something to find all the way
PARAGRAPH = ("The sea was calm that morning, and the fishing boats left the harbour one by one, "
             "their engines humming softly as the gulls followed them out past the lighthouse "
             "towards the grey line of the horizon.")


def default_model() -> Path:
    home = Path(os.environ.get("ONEBIT_HOME") or Path.home() / ".cache" / "onebit")
    return home / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def spread(values: list[float], fmt: str) -> str:
    return (f"{format(statistics.median(values), fmt)} "
            f"[{format(min(values), fmt)} .. {format(max(values), fmt)}]")


def agreed(a: list[int], b: list[int]) -> int:
    """How many leading tokens two greedy texts share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


# ---------------------------------------------------------------------------------------------
# The engines: generate(prompt, n) -> (tokens, prefill seconds, decode seconds)


class OnebitReal:
    engine = "onebit"

    def __init__(self, path: Path, kernel: str) -> None:
        from onebit.models import load_model

        self.format = "int8" if kernel == "int8" else "float32"
        self.model = load_model(path, kernel=kernel)

    @property
    def bytes_per_token(self) -> int:
        """What the backend holds for its kernels (prepared on first use: read after a run)."""
        from forward_ab import read_bytes

        return read_bytes(self.model)

    def generate(self, prompt: list[int], n: int, lookup: bool = False):
        """`n` greedy tokens; prefill is prompt in, first token out (the first `on_token`)."""
        import onebit
        from onebit.heads.ngram import NgramHead

        stamps: list[float] = []
        head = NgramHead(n=3, k=LOOKUP_K) if lookup else None
        self.model.reset()
        start = time.perf_counter()
        result = onebit.run(self.model, head, prompt, max_tokens=n, k=LOOKUP_K if lookup else 1,
                            on_token=lambda *a: stamps.append(time.perf_counter()))
        self.last_stats = result.stats
        return list(result.tokens), stamps[0] - start, stamps[-1] - stamps[0]

    def prefill(self, prompt: list[int]):
        """The logits after `prompt` (its last row), committed in prefill-sized batches."""
        m = self.model
        m.reset()
        width = m.max_prefill_rows()
        for at in range(0, len(prompt), width):
            rows = m.verify(prompt[at:at + width], at)
            m.commit_verify(len(prompt[at:at + width]))
        return rows[-1].copy()

    def verify_over_step(self, prompt: list[int], repeats: int = 5) -> float:
        """Median over alternated repeats of time(verify of 8 rows) / time(verify of 1 row),
        both at the position after the prompt, nothing committed."""
        m = self.model
        self.prefill(prompt)
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


class TransformersReal:
    engine = "transformers"
    format = "float32"

    def __init__(self, path: Path, threads: int) -> None:
        import torch
        import transformers

        torch.set_num_threads(threads)
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        self.torch = torch
        # its GGUF dequantiser draws a progress bar on stderr that transformers' switch misses
        with contextlib.redirect_stderr(io.StringIO()):
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
        unique = {p.data_ptr(): p for p in self.model.parameters()}  # a tied matrix once
        self.bytes_per_token = sum(p.numel() * p.element_size() for p in unique.values())
        embedding = self.model.get_input_embeddings().weight
        if embedding.data_ptr() != self.model.get_output_embeddings().weight.data_ptr():
            self.bytes_per_token -= embedding.numel() * embedding.element_size()

    def generate(self, prompt: list[int], n: int, lookup: bool = False):
        torch = self.torch
        with torch.inference_mode(), warnings.catch_warnings():
            # newer releases rename past_key_values and warn on every step; the peer extra's
            # oldest (5.2) knows only that name
            warnings.simplefilter("ignore", FutureWarning)
            start = time.perf_counter()
            out = self.model(torch.tensor([prompt]), use_cache=True)
            token = int(out.logits[0, -1].argmax())
            first = time.perf_counter()
            emitted, cache = [token], out.past_key_values
            while len(emitted) < n:
                out = self.model(torch.tensor([[token]]), past_key_values=cache, use_cache=True)
                cache, token = out.past_key_values, int(out.logits[0, -1].argmax())
                emitted.append(token)
        return emitted, first - start, time.perf_counter() - first


class LlamaLookup:
    """llama.cpp's own greedy decode through `Llama.generate` (temperature 0, top_k 1, no
    repeat penalty), with `LlamaPromptLookupDecoding` drafting `LOOKUP_K` tokens (lookup) or
    with no draft model (plain): two `Llama` objects on the same file."""

    engine = "llama.cpp"
    format = "GGUF"

    def __init__(self, path: Path, threads: int, n_ctx: int) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        common = dict(model_path=str(path), n_ctx=n_ctx, n_batch=n_ctx, n_threads=threads,
                      n_threads_batch=threads, verbose=False)
        self.plain = Llama(**common)
        self.lookup = Llama(**common,
                            draft_model=LlamaPromptLookupDecoding(num_pred_tokens=LOOKUP_K))

    def generate(self, prompt: list[int], n: int, lookup: bool = False):
        llm = self.lookup if lookup else self.plain
        llm.reset()  # no prefix reuse from the last call: every run prefills the whole prompt
        tokens: list[int] = []
        start = time.perf_counter()
        stream = llm.generate(prompt, temp=0.0, top_k=1, top_p=1.0, min_p=0.0,
                              repeat_penalty=1.0, reset=True)
        for token in stream:
            tokens.append(int(token))
            if len(tokens) == 1:
                first = time.perf_counter()
            if len(tokens) == n:
                break
        end = time.perf_counter()
        stream.close()
        return tokens, first - start, end - first


class LlamaVerify:
    """llama.cpp's own verify(8) / step, the reference for onebit's: after the prompt, one `eval`
    of 1 token then one of 8 at the same position (the KV cache cut back to the prompt before
    each), with every row's logits kept (`logits_all`), as a verify needs them."""

    def __init__(self, path: Path, threads: int, n_ctx: int) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(path), n_ctx=n_ctx, n_batch=n_ctx, n_threads=threads,
                         n_threads_batch=threads, logits_all=True, verbose=False)

    def verify_over_step(self, prompt: list[int], repeats: int = 5) -> float:
        """Median over alternated repeats of time(eval of 8 rows) / time(eval of 1 row)."""
        llm = self.llm
        llm.reset()
        llm.eval(prompt)
        pos, eight = len(prompt), prompt[:8]
        ratios = []
        for _ in range(repeats):
            llm.n_tokens = pos  # eval drops the cache from n_tokens on
            t0 = time.perf_counter()
            llm.eval(eight[:1])
            t1 = time.perf_counter()
            llm.n_tokens = pos
            llm.eval(eight)
            t2 = time.perf_counter()
            ratios.append((t2 - t1) / (t1 - t0))
        return statistics.median(ratios)


def llama_logits(path: Path, threads: int, prompt: list[int]):
    """llama.cpp's logits after `prompt`: `logits_all=True`, one `eval`, the last row of
    `scores`."""
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=max(PROMPT_LEN, len(prompt)) + 16,
                n_batch=len(prompt), n_threads=threads, n_threads_batch=threads,
                logits_all=True, verbose=False)
    llm.eval(prompt)
    row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
    del llm
    return row


# ---------------------------------------------------------------------------------------------
# Measuring


@dataclass
class Series:
    """One engine's samples over the rounds."""

    engine: object
    label: str
    prefill_s: list[float] = field(default_factory=list)
    tps: list[float] = field(default_factory=list)
    tokens: list[list[int]] = field(default_factory=list)

    def add(self, sample) -> None:
        tokens, prefill_s, decode_s = sample
        self.tokens.append(tokens)
        self.prefill_s.append(prefill_s)
        self.tps.append((len(tokens) - 1) / decode_s)


def prompts(tokenizer) -> tuple[list[int], list[int]]:
    """A 128-token prompt (the paragraph repeated, cut) and the chat prompt that asks for the
    paragraph back (where prompt lookup finds its drafts)."""
    long = tokenizer.encode(" ".join([PARAGRAPH] * 8), add_special_tokens=False)[:PROMPT_LEN]
    # SmolLM2's ChatML, written out: the benchmark should not depend on the template engine
    text = (f"<|im_start|>user\nRepeat this paragraph word for word: {PARAGRAPH}<|im_end|>\n"
            "<|im_start|>assistant\n")
    return long, tokenizer.encode(text, add_special_tokens=False)


def logits_lines(int8: OnebitReal, f32: OnebitReal, llama_row, chat: list[int]) -> list[str]:
    """max |a - b| over the last row as a fraction of b's range (max - min), and whether the
    argmax agrees, for int8 vs llama.cpp, float32 vs llama.cpp and int8 vs float32."""
    import numpy as np

    rows = {"onebit int8": np.asarray(int8.prefill(chat), np.float64),
            "onebit float32": np.asarray(f32.prefill(chat), np.float64)}
    pairs = [("onebit int8", "onebit float32")]
    if llama_row is not None:
        rows["llama.cpp"] = llama_row
        pairs = [("onebit int8", "llama.cpp"), ("onebit float32", "llama.cpp"), *pairs]
    lines = []
    for a, b in pairs:
        diff = float(np.max(np.abs(rows[a] - rows[b])))
        span = float(rows[b].max() - rows[b].min())
        same = int(np.argmax(rows[a])) == int(np.argmax(rows[b]))
        lines.append(f"- {a} vs {b}: max |difference| {diff:.4g} = {diff / span:.2e} of "
                     f"{b}'s logit range ({span:.3g}); argmax {'agrees' if same else 'DIFFERS'}"
                     f" ({int(np.argmax(rows[a]))} vs {int(np.argmax(rows[b]))})")
    return lines


# ---------------------------------------------------------------------------------------------
# Targets (benchmark, not test; 2 threads each; the same file)


@dataclass(frozen=True)
class Target:
    what: str
    goal: str
    met: Callable[[float], bool]


TARGETS = {
    "decode": Target("plain decode tokens/s, onebit / llama.cpp", ">= 1.5", lambda r: r >= 1.5),
    "prefill": Target(f"{PROMPT_LEN}-token prefill time, onebit / llama.cpp", "<= 0.7",
                      lambda r: r <= 0.7),
    "verify": Target("verify(8) / step, onebit", "<= 1.3", lambda r: r <= 1.3),
    "lookup": Target("prompt lookup tokens/s, onebit / llama.cpp plain decode", ">= 2.5",
                     lambda r: r >= 2.5),
    "same": Target("onebit's lookup text identical to its greedy text", "yes", bool),
}


def target_rows(arm: OnebitReal, peers: dict, spec: dict, verify8: dict) -> list[str]:
    """One row per target for one onebit arm: the per-round ratio, median [min .. max]."""
    name = f"onebit {arm.format}"
    llama = peers.get("llama.cpp GGUF")
    llama_plain = spec.get("llama.cpp plain")
    plain, lookup = spec[f"{name} plain"], spec[f"{name} lookup"]
    ratios: dict[str, list[float] | None] = {
        "decode": None if llama is None else
        [a / b for a, b in zip(peers[name].tps, llama.tps, strict=True)],
        "prefill": None if llama is None else
        [a / b for a, b in zip(peers[name].prefill_s, llama.prefill_s, strict=True)],
        "verify": verify8[name],
        "lookup": None if llama_plain is None else
        [a / b for a, b in zip(lookup.tps, llama_plain.tps, strict=True)],
    }
    same = all(a == b for a, b in zip(plain.tokens, lookup.tokens, strict=True))
    rows = []
    for key, target in TARGETS.items():
        if key == "same":
            measured, met = ("yes" if same else "NO"), same
        elif ratios[key] is None:
            measured, met = "n/a (no llama.cpp arm)", None
        else:
            median = statistics.median(ratios[key])
            measured = spread(ratios[key], ".2f")
            met = target.met(median) and (key != "lookup" or same)
        verdict = "-" if met is None else ("met" if met else "NOT met")
        rows.append(f"| {target.what} | {arm.format} | {measured} | {target.goal} | {verdict} |")
    return rows


# ---------------------------------------------------------------------------------------------


def run(args, read_bandwidth: Callable[[], float]) -> None:
    """The section: build the arms, cross-check logits, run the rounds, print the tables."""
    path = args.model
    tokens = args.real_tokens
    print(f"\n## {path.name}: onebit, transformers and llama.cpp on the same file\n", flush=True)
    f32 = OnebitReal(path, "auto")
    int8 = OnebitReal(path, "int8")
    engines: list = [f32, int8]
    if args.no_transformers:
        print("transformers arm skipped: --no-transformers")
    else:
        try:
            engines.append(TransformersReal(path, args.threads))
        except ImportError as error:
            print(f"transformers arm skipped: {error} (install the peer extra)")
    llama_plain = llama_lookup = llama_verify = None
    if args.no_llama:
        print("llama.cpp arm skipped: --no-llama")
    else:
        import peer_llama

        try:
            version = peer_llama.llama_cpp_version()
            llama_plain = peer_llama.LlamaEngine(path, "GGUF", args.threads, n_ctx=512)
            llama_lookup = LlamaLookup(path, args.threads, n_ctx=512)
            llama_verify = LlamaVerify(path, args.threads, n_ctx=512)
            engines.append(llama_plain)
            print(f"llama.cpp {version} on the file as it is")
        except peer_llama.PeerUnavailable as error:
            print(f"llama.cpp arm skipped: {error}")
        except Exception as error:  # a build that cannot load the file
            print(f"llama.cpp arm skipped: {type(error).__name__}: {error}")
    long, chat = prompts(f32.model.tokenizer)
    speculating = [f32, int8] + ([llama_lookup] if llama_lookup else [])
    for engine in [*engines, *speculating[2:]]:  # warm-up: compile, prepare weights
        engine.generate(long[:8], 2)
    if llama_lookup:
        llama_lookup.generate(chat, 4, lookup=True)

    print(f"\nLogits after the {len(chat)}-token chat prompt (the last row):")
    row = None if llama_plain is None else llama_logits(path, args.threads, chat)
    print("\n".join(logits_lines(int8, f32, row, chat)), flush=True)

    print(f"\n{args.threads} threads each; {args.rounds} rounds A B A B, {tokens} greedy tokens "
          f"after a {PROMPT_LEN}-token prompt; lookup on a {len(chat)}-token chat prompt that "
          "asks for a paragraph back; median [min .. max]\n", flush=True)
    peers = {f"{e.engine} {e.format}": Series(e, f"{e.engine} {e.format}") for e in engines}
    spec: dict[str, Series] = {}
    for e in speculating:
        for mode in ("plain", "lookup"):
            spec[f"{e.engine} {e.format if e.engine == 'onebit' else ''}".strip()
                 + f" {mode}"] = Series(e, mode)
    verify8: dict[str, list[float]] = {"onebit float32": [], "onebit int8": []}
    accepted: dict[str, list[float]] = {"onebit float32": [], "onebit int8": []}
    bandwidths = []
    for i in range(args.rounds):
        bandwidths.append(read_bandwidth())
        for series in peers.values():
            series.add(series.engine.generate(long, tokens))
        for label, series in spec.items():
            series.add(series.engine.generate(chat, tokens, lookup=series.label == "lookup"))
            if series.label == "lookup" and series.engine.engine == "onebit":
                stats = series.engine.last_stats
                accepted[label.removesuffix(" lookup")].append(
                    stats.accepted / max(stats.proposed, 1))
        for arm in (f32, int8):
            verify8[f"onebit {arm.format}"].append(arm.verify_over_step(long))
        if llama_verify:
            verify8.setdefault("llama.cpp", []).append(llama_verify.verify_over_step(long))
        print(f"round {i + 1}/{args.rounds}: read {bandwidths[-1]:.1f} GB/s; "
              + ", ".join(f"{k} {s.tps[-1]:.1f} tok/s" for k, s in peers.items()), flush=True)

    bound = max(bandwidths) * 1e9
    print(f"\nread bandwidth: {spread(bandwidths, '.1f')} GB/s; the bound uses the best\n")
    print(f"| engine | format | decode tokens/s | {PROMPT_LEN}-token prefill ms | "
          "fraction of bound | weights read per token |\n|---|---|---|---|---|---|")
    for series in peers.values():
        nbytes = series.engine.bytes_per_token
        print(f"| {series.engine.engine} | {series.engine.format} | {spread(series.tps, '.1f')} "
              f"| {spread([s * 1e3 for s in series.prefill_s], '.0f')} "
              f"| {spread([t * nbytes / bound for t in series.tps], '.2f')} "
              f"| {nbytes / 2**20:.1f} MiB |")
    reference = peers["onebit float32"].tokens[0]
    print("\nGreedy agreement (first round) with onebit float32:")
    for label, series in list(peers.items())[1:]:
        print(f"- {label}: the first {agreed(series.tokens[0], reference)} of {tokens} tokens")
    for arm in (f32, int8):
        print(f"- onebit {arm.format} verify(8) / step: "
              f"{spread(verify8[f'onebit {arm.format}'], '.2f')}")
    if "llama.cpp" in verify8:  # the same measure on llama.cpp's eval, for reference
        print("- llama.cpp verify(8) / step (8 rows of logits): "
              f"{spread(verify8['llama.cpp'], '.2f')}")

    print(f"\nPrompt lookup, {LOOKUP_K} tokens drafted, on the chat prompt, decode time only "
          "(onebit: the n-gram head, n = 3; llama.cpp: LlamaPromptLookupDecoding, "
          "max_ngram_size 2):\n")
    print("| engine | plain tokens/s | lookup tokens/s | speed-up over its plain | "
          "acceptance | lookup text = its plain greedy |\n|---|---|---|---|---|---|")
    names = [f"onebit {a.format}" for a in (f32, int8)] + (["llama.cpp"] if llama_lookup else [])
    for name in names:
        plain, lookup = spec[f"{name} plain"], spec[f"{name} lookup"]
        ups = [b / a for a, b in zip(plain.tps, lookup.tps, strict=True)]
        same = all(a == b for a, b in zip(plain.tokens, lookup.tokens, strict=True))
        acc = spread(accepted[name], ".2f") if name in accepted else "-"
        print(f"| {name} | {spread(plain.tps, '.1f')} | {spread(lookup.tps, '.1f')} "
              f"| {spread(ups, '.2f')}x | {acc} | {'yes' if same else 'NO'} |")
    if llama_lookup:
        # llama.cpp's two plain decodes (eval loop, sampler) must be the same greedy text
        ours = spec["onebit int8 plain"].tokens[0]
        theirs = spec["llama.cpp plain"].tokens[0]
        print(f"- llama.cpp plain greedy vs onebit int8 plain greedy on the chat prompt: the "
              f"first {agreed(theirs, ours)} of {tokens} tokens agree")

    print("\nTargets (per-round ratios, median [min .. max]; met is judged on the median):\n")
    print("| target | onebit arm | measured | goal | met |\n|---|---|---|---|---|")
    for arm in (int8, f32):
        print("\n".join(target_rows(arm, peers, spec, verify8)))
