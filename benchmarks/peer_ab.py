"""onebit against its peers on the same model: transformers (CPU torch) and llama.cpp.

    .venv/bin/python benchmarks/peer_ab.py [--quick] [--rounds 5] [--tokens 96] [--threads 2]
                                           [--kernel auto] [--no-llama] [--llama-cpp-src DIR]
                                           [--no-transformers] [--no-fabricated] [--no-real]
                                           [--model FILE.gguf]
                                           [--hidden 1024 --layers 4 --intermediate 2816
                                            --vocab 8192]

Two sections, each skipped with its option: the fabricated model (--no-fabricated), then a
real GGUF file (--no-real; benchmarks/peer_real.py): SmolLM2-135M-Instruct Q4_1 from onebit's
model cache when it is there, or the file --model names, read without conversion by onebit
(float32 and int8), transformers and llama.cpp, with prompt lookup in onebit and llama.cpp, a
logits cross-check and the summary of the targets. Its decode is --tokens tokens when given,
else 40 (32 with --quick).

The fabricated section. Fabricates a Qwen3 (by default hidden 1024, 4 layers, intermediate
2816, vocab 8192: 46.1 M parameters) twice from one seed: a HuggingFace float32 checkpoint and
its Q4NX container. The engines, every one pinned to the same number of threads (--threads,
default 2):
- onebit on the float checkpoint and on the Q4NX container (`onebit.run`, `load_model`), the
  latter twice: the packed float kernel (--kernel) and the integer kernel (`kernel="int8"`,
  the Q4NX blocks read as q4_1 blocks, the compiled stack);
- transformers (CPU torch, float32) on the float checkpoint (`generate`, greedy);
- llama.cpp through llama-cpp-python (the `bench` extra): the float checkpoint converted to an
  F32 GGUF by llama.cpp's own convert_hf_to_gguf.py, and that GGUF quantised to Q4_0 by
  `llama_model_quantize` (benchmarks/peer_llama.py). If it cannot be installed, found or
  converted, the reason is printed and the rest still runs.

Each round runs every arm once, in the same order (A B A B ...); the tables give the median
and [min .. max] over the rounds:
- the peer table: decode tokens/s after a 72-token prompt, the prefill of that prompt (prompt
  in, first token out, ms), and the fraction of the read-bandwidth bound: tokens/s x the
  weight bytes the engine reads per token / the machine's read bandwidth (numpy summing a
  buffer far larger than the caches, on the same number of threads, measured every round;
  the best round is the bound);
- the speculation table: prompt lookup (onebit's n-gram head; transformers'
  `prompt_lookup_num_tokens`), k = 7, on a repetitive 72-token prompt, against each engine's
  own plain decode of that prompt; decode time only.
Decode tokens/s counts the tokens after the first (the first comes out of the prefill).
Below the peer table: each onebit Q4NX arm's decode over llama.cpp's Q4_0 decode, per round
(the issue-21 target: at least 0.8).
Before the rounds each engine's greedy tokens are compared with onebit's on the same weights:
a float arm that diverges early would not be the same model.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROMPT_LEN = 72
LOOKUP_K = 7
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
              "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds of 32 tokens and a smaller bandwidth buffer")
    parser.add_argument("--rounds", type=int, help="default 5 (2 with --quick)")
    parser.add_argument("--tokens", type=int, help="tokens per decode; default 96 (32 quick)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kernel", default="auto", help="onebit's kernel: auto, numba, numpy")
    parser.add_argument("--no-llama", action="store_true", help="leave the llama.cpp arm out")
    parser.add_argument("--no-transformers", action="store_true",
                        help="leave the transformers arm out")
    parser.add_argument("--no-fabricated", action="store_true",
                        help="skip the fabricated-model section")
    parser.add_argument("--no-real", action="store_true", help="skip the real-GGUF section")
    parser.add_argument("--model", type=Path,
                        help="the real section's GGUF file (default: SmolLM2-135M-Instruct "
                             "Q4_1 in onebit's model cache, the section skipped if absent)")
    parser.add_argument("--llama-cpp-src", type=Path,
                        help="a llama.cpp tree holding convert_hf_to_gguf.py (default: "
                             "$LLAMA_CPP_SRC, else the installed version's sdist)")
    parser.add_argument("--bandwidth-mib", type=int, help="default 1024 (512 quick)")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--intermediate", type=int, default=2816)
    parser.add_argument("--vocab", type=int, default=8192)
    args = parser.parse_args(argv)
    args.real_tokens = args.tokens or (32 if args.quick else 40)
    args.rounds = args.rounds or (2 if args.quick else 5)
    args.tokens = args.tokens or (32 if args.quick else 96)
    args.bandwidth_mib = args.bandwidth_mib or (512 if args.quick else 1024)
    for name in ("rounds", "tokens", "threads", "bandwidth_mib"):
        if getattr(args, name) < 1 or (name == "tokens" and args.tokens < 2):
            parser.error(f"--{name.replace('_', '-')} must be at least "
                         f"{2 if name == 'tokens' else 1}, got {getattr(args, name)}")
    if args.model is not None and not args.model.is_file():
        parser.error(f"--model {args.model}: no such file")
    if args.no_fabricated and args.no_real:
        parser.error("--no-fabricated and --no-real leave nothing to run")
    return args


def pin_threads(threads: int) -> None:
    """Every thread pool the engines use, sized before numpy, numba or torch is imported."""
    for name in THREAD_ENV:
        os.environ[name] = str(threads)


# ---------------------------------------------------------------------------------------------
# The engines: generate(prompt, n) -> (tokens, prefill seconds, decode seconds)


class PrefillClock:
    """Wraps onebit's forward and notes when the whole prompt is committed, however the loop
    prefills it (stepped or batched), so that decoding is timed apart from the prefill."""

    def __init__(self, base, prompt_len: int) -> None:
        self._base = base
        self._prompt_len = prompt_len
        self._emptied = False  # the run's prefill has started (the cache held less than it)
        self.at: float | None = None

    def __getattr__(self, name: str):
        attr = getattr(self._base, name)
        if not callable(attr) or self.at is not None:
            return attr

        def noted(*args, **kwargs):
            out = attr(*args, **kwargs)
            length = self._base.committed_length
            if length < self._prompt_len:
                self._emptied = True
            elif self._emptied and self.at is None:
                self.at = time.perf_counter()
            return out

        return noted


class OnebitEngine:
    engine = "onebit"

    def __init__(self, path: Path, fmt: str, kernel: str) -> None:
        from onebit.models import load_model

        self.format = fmt
        self.model = load_model(path, max_batch_rows=16, kernel=kernel)

    @property
    def bytes_per_token(self) -> int:
        """What the forward holds for its kernels (prepared on first use: read after a run)."""
        from forward_ab import read_bytes

        return read_bytes(self.model)

    def parameters(self) -> int:
        import numpy as np

        return sum(int(np.prod(shape)) for shape in self.model.weights.shapes.values())

    def generate(self, prompt: list[int], n: int, lookup: bool = False):
        import onebit
        from onebit.heads.ngram import NgramHead

        clock = PrefillClock(self.model, len(prompt))
        head = NgramHead(k=LOOKUP_K) if lookup else None
        start = time.perf_counter()
        result = onebit.run(clock, head, prompt, max_tokens=n, k=LOOKUP_K if lookup else 0)
        end = time.perf_counter()
        return list(result.tokens), clock.at - start, end - clock.at


class TransformersEngine:
    engine = "transformers"

    def __init__(self, path: Path, threads: int) -> None:
        import torch
        import transformers

        torch.set_num_threads(threads)
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        self.torch = torch
        self.format = "float32"
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float32).eval()
        self.bytes_per_token = self._bytes_per_token()
        self.stamps = _stamping_streamer(transformers)

    def _bytes_per_token(self) -> int:
        unique = {p.data_ptr(): p for p in self.model.parameters()}  # a tied matrix once
        total = sum(p.numel() * p.element_size() for p in unique.values())
        embedding = self.model.get_input_embeddings().weight
        if embedding.data_ptr() != self.model.get_output_embeddings().weight.data_ptr():
            total -= embedding.numel() * embedding.element_size()  # untied: one row a token
        return total

    def generate(self, prompt: list[int], n: int, lookup: bool = False):
        streamer = self.stamps()
        ids = self.torch.tensor([prompt])
        extra = {"prompt_lookup_num_tokens": LOOKUP_K} if lookup else {}
        start = time.perf_counter()
        with self.torch.inference_mode():
            out = self.model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                      streamer=streamer, **extra)
        end = time.perf_counter()
        first = streamer.times[1]  # put() 0 is the prompt, put() 1 the first new token
        return out[0, len(prompt):].tolist(), first - start, end - first


def _stamping_streamer(transformers):
    class Stamps(transformers.generation.streamers.BaseStreamer):
        """Notes when generate hands out the prompt, then each batch of new tokens."""

        def __init__(self) -> None:
            self.times: list[float] = []

        def put(self, value) -> None:
            self.times.append(time.perf_counter())

        def end(self) -> None:
            pass

    return Stamps


def llama_engines(args, checkpoint: Path, work: Path, n_ctx: int) -> list:
    """llama.cpp's F32 and Q4_0 arms; `PeerUnavailable` (with the reason) when it cannot run."""
    import peer_llama

    version = peer_llama.llama_cpp_version()
    source = peer_llama.converter_source(args.llama_cpp_src, version)
    f32 = peer_llama.convert_to_gguf(checkpoint, work / "model-f32.gguf", source)
    q4_0 = peer_llama.quantize(f32, work / "model-q4_0.gguf", threads=args.threads)
    print(f"llama.cpp {version}: converted with {source}/convert_hf_to_gguf.py, quantised "
          "with llama_model_quantize (pure Q4_0)")
    return [peer_llama.LlamaEngine(f32, "F32 GGUF", args.threads, n_ctx),
            peer_llama.LlamaEngine(q4_0, "Q4_0 GGUF", args.threads, n_ctx)]


# ---------------------------------------------------------------------------------------------
# Measuring


def read_bandwidth_gbps(mib: int, threads: int, repeats: int = 3) -> float:
    """Bytes per second numpy reads summing a `mib` MiB buffer split over `threads` threads
    (summing releases the GIL), best of `repeats`."""
    import numpy as np

    buffer = np.ones((mib << 20) // 8)
    parts = np.array_split(buffer, threads)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(np.sum, parts))  # touch every page before timing

        def once() -> float:
            start = time.perf_counter()
            list(pool.map(np.sum, parts))
            return time.perf_counter() - start

        best = min(once() for _ in range(repeats))
    return buffer.nbytes / best / 1e9


@dataclass
class Arm:
    """One engine's samples over the rounds."""

    engine: object
    label: str
    prefill_s: list[float] = field(default_factory=list)
    decode_s: list[float] = field(default_factory=list)
    tps: list[float] = field(default_factory=list)
    tokens: list[list[int]] = field(default_factory=list)

    def add(self, sample) -> None:
        tokens, prefill_s, decode_s = sample
        self.tokens.append(tokens)
        self.prefill_s.append(prefill_s)
        self.decode_s.append(decode_s)
        self.tps.append((len(tokens) - 1) / decode_s)


def spread(values: list[float], fmt: str) -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"[{fmt.format(min(values))} .. {fmt.format(max(values))}]")


def agreed(a: list[int], b: list[int]) -> int:
    """How many leading tokens two greedy texts share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def run_rounds(args, engines: list, speculating: list, prompt: list[int],
               repetitive: list[int]) -> tuple[list[Arm], list[tuple[Arm, Arm]], list[float]]:
    peers = [Arm(e, f"{e.engine} {e.format}") for e in engines]
    spec = [(Arm(e, f"{e.engine} plain"), Arm(e, f"{e.engine} lookup")) for e in speculating]
    bandwidths = []
    for i in range(args.rounds):
        bandwidths.append(read_bandwidth_gbps(args.bandwidth_mib, args.threads))
        for arm in peers:
            arm.add(arm.engine.generate(prompt, args.tokens))
        for plain, lookup in spec:
            plain.add(plain.engine.generate(repetitive, args.tokens))
            lookup.add(lookup.engine.generate(repetitive, args.tokens, lookup=True))
        print(f"round {i + 1}/{args.rounds}: read {bandwidths[-1]:.1f} GB/s; "
              + ", ".join(f"{a.label} {a.tps[-1]:.0f} tok/s" for a in peers), flush=True)
    return peers, spec, bandwidths


# ---------------------------------------------------------------------------------------------
# Reporting


def agreement_lines(peers: list[Arm], tokens: int) -> list[str]:
    """Each arm's greedy text (first round) against onebit's on the same weights."""
    by_label = {a.label: a.tokens[0] for a in peers}
    reference = {"float32": by_label.get("onebit float32"), "4-bit": by_label.get("onebit Q4NX")}
    lines = []
    for arm in peers:
        if arm.engine.engine == "onebit":
            continue
        four_bit = arm.engine.format.startswith("Q4")
        ref = reference["4-bit" if four_bit else "float32"]
        if ref is None:
            continue
        what = "onebit Q4NX (a different 4-bit quantiser)" if four_bit else "onebit float32"
        lines.append(f"- {arm.label} vs {what}: the first {agreed(arm.tokens[0], ref)} of "
                     f"{tokens} greedy tokens agree")
    return lines


def peer_table(peers: list[Arm], bandwidths: list[float]) -> list[str]:
    bound = max(bandwidths) * 1e9
    lines = ["| engine | format | decode tokens/s median [min..max] | prefill ms | "
             "fraction of bound | weights read per token |",
             "|---|---|---|---|---|---|"]
    for arm in peers:
        nbytes = arm.engine.bytes_per_token
        fractions = [tps * nbytes / bound for tps in arm.tps]
        lines.append(f"| {arm.engine.engine} | {arm.engine.format} | {spread(arm.tps, '{:.0f}')} "
                     f"| {spread([s * 1e3 for s in arm.prefill_s], '{:.0f}')} "
                     f"| {spread(fractions, '{:.2f}')} | {nbytes / 2**20:.1f} MiB |")
    return lines


def speculation_table(spec: list[tuple[Arm, Arm]]) -> list[str]:
    lines = ["| engine | plain decode tokens/s | prompt lookup tokens/s | "
             "speed-up over plain median [min..max] | same tokens as plain |",
             "|---|---|---|---|---|"]
    for plain, lookup in spec:
        ratios = [p / s for p, s in zip(plain.decode_s, lookup.decode_s, strict=True)]
        same = all(a == b for a, b in zip(plain.tokens, lookup.tokens, strict=True))
        lines.append(f"| {plain.engine.engine} | {spread(plain.tps, '{:.0f}')} "
                     f"| {spread(lookup.tps, '{:.0f}')} | {spread(ratios, '{:.2f}')}x "
                     f"| {'yes' if same else 'NO'} |")
    return lines


# ---------------------------------------------------------------------------------------------


def build_engines(args, work: Path) -> tuple[list, list, int]:
    """The arms in table order, the ones that speculate, and the parameter count."""
    from onebit.models import fabricate_model

    sizes = dict(hidden_size=args.hidden, num_hidden_layers=args.layers,
                 intermediate_size=args.intermediate, vocab_size=args.vocab)
    checkpoint = fabricate_model(work / "float", "qwen3", quantized=False, **sizes)
    container = fabricate_model(work / "q4nx", "qwen3", quantized=True, **sizes)
    onebit_f32 = OnebitEngine(checkpoint, "float32", args.kernel)
    engines, speculating = [onebit_f32], [onebit_f32]
    if args.no_transformers:
        print("transformers arm skipped: --no-transformers")
    else:
        try:
            hf = TransformersEngine(checkpoint, args.threads)
            engines.append(hf)
            speculating.append(hf)
        except ImportError as error:
            print(f"transformers arm skipped: {error} (install the peer extra)")
    llama = []
    if args.no_llama:
        print("llama.cpp arm skipped: --no-llama")
    else:
        import peer_llama

        try:
            llama = llama_engines(args, checkpoint, work, n_ctx=PROMPT_LEN + args.tokens + 16)
        except peer_llama.PeerUnavailable as error:
            print(f"llama.cpp arm skipped: {error}")
    four_bit = [OnebitEngine(container, "Q4NX", args.kernel)]
    try:  # the integer kernel on the same Q4NX blocks (as q4_1 blocks: docs/forward.md)
        four_bit.append(OnebitEngine(container, "Q4NX int8", "int8"))
    except ValueError as error:
        print(f"onebit Q4NX int8 arm skipped: {error}")
    engines += llama[:1] + four_bit + llama[1:]
    return engines, speculating, onebit_f32.parameters()


def q4nx_target_lines(peers: list[Arm]) -> list[str]:
    """The issue-21 target for the fabricated model: each onebit Q4NX arm's decode over
    llama.cpp's Q4_0 decode of the same weights, per round (they ran back to back)."""
    by_label = {a.label: a for a in peers}
    llama = next((a for a in peers if a.engine.engine == "llama.cpp"
                  and a.engine.format.startswith("Q4_0")), None)
    if llama is None:
        return []
    lines = []
    for label in ("onebit Q4NX", "onebit Q4NX int8"):
        arm = by_label.get(label)
        if arm is None:
            continue
        ratios = [a / b for a, b in zip(arm.tps, llama.tps, strict=True)]
        verdict = "met" if statistics.median(ratios) >= 0.8 else "not met"
        lines.append(f"- {label} decode / llama.cpp {llama.engine.format} decode, per round: "
                     f"{spread(ratios, '{:.2f}')}x (target at least 0.8: {verdict})")
    return lines


def fabricated_section(args) -> None:
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        engines, speculating, params = build_engines(args, Path(tmp))
        rng = np.random.default_rng(1)
        prompt = [int(t) for t in rng.integers(0, args.vocab, PROMPT_LEN)]
        phrase = [int(t) for t in rng.integers(0, args.vocab, 9)]
        repetitive = (phrase * (PROMPT_LEN // len(phrase) + 1))[:PROMPT_LEN]
        for engine in engines:  # warm-up: compile kernels, unpack weights, first calls
            engine.generate(prompt[:8], 2)
        print(f"\nQwen3 {params / 1e6:.1f} M parameters (hidden {args.hidden}, {args.layers} "
              f"layers, intermediate {args.intermediate}, vocab {args.vocab}); every engine "
              f"on {args.threads} threads; {args.rounds} rounds A B A B, {args.tokens} tokens "
              f"after a {PROMPT_LEN}-token prompt; median [min .. max]\n", flush=True)
        peers, spec, bandwidths = run_rounds(args, engines, speculating, prompt, repetitive)
    print(f"\nread bandwidth ({args.threads} threads, numpy sum over {args.bandwidth_mib} MiB): "
          f"{spread(bandwidths, '{:.1f}')} GB/s; the bound uses the best, "
          f"{max(bandwidths):.1f} GB/s\n")
    print("\n".join(peer_table(peers, bandwidths)))
    print("\n".join(q4nx_target_lines(peers)))
    print("\nGreedy agreement (first round):")
    print("\n".join(agreement_lines(peers, args.tokens)))
    print(f"\nPrompt-lookup speculation, k = {LOOKUP_K}, repetitive {PROMPT_LEN}-token prompt "
          "(a 9-token phrase repeated), decode time only:\n")
    print("\n".join(speculation_table(spec)))


def real_section(args) -> None:
    import peer_real

    if args.model is None:
        args.model = peer_real.default_model()
        if not args.model.is_file():
            print(f"\nreal-model section skipped: {args.model} is not cached "
                  "(`onebit pull smollm2`, or --model FILE.gguf)")
            return
    peer_real.run(args, lambda: read_bandwidth_gbps(args.bandwidth_mib, args.threads))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    pin_threads(args.threads)
    sys.path.insert(0, str(HERE))  # forward_ab, peer_llama and peer_real beside this file
    if args.no_fabricated:
        print("fabricated-model section skipped: --no-fabricated")
    else:
        fabricated_section(args)
    if args.no_real:
        print("\nreal-model section skipped: --no-real")
    else:
        real_section(args)


if __name__ == "__main__":
    main()
