"""The llama.cpp variant: llama-cpp-python's `LlamaPromptLookupDecoding` (written against
0.3.36) at temperature 0 on SmolLM2's GGUF, against the same engine's own plain greedy, on
PROMPTS; each prompt's first divergence is reported.

It needs the `bench` extra (llama-cpp-python builds from source) and the model file in the
cache (`$ONEBIT_HOME/models/`, by default `~/.cache/onebit/models/`); without either, the
arm is not applicable and says which is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_onebit.contract.assertions import first_divergence
from pytest_onebit.peers.protocol import Outcome, failed, passed
from pytest_onebit.peers.transformers_peer import importable

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TOKENS = 48
DRAFT = 10  # num_pred_tokens
PROMPTS = (
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n",
    "1, 2, 3, 4, 5, 6, 7, 8,",
    "Paris is the capital of France. Berlin is the capital of",
    "Once upon a time there was a little girl. Once upon a time",
    "import numpy as np\nimport numpy",
    "Roses are red, violets are blue, roses are red,",
    "<html><body><p>Hello</p><p>",
    "SELECT name FROM users WHERE id = 1; SELECT name FROM",
    "Monday, Tuesday, Wednesday, Thursday,",
    "The answer is 42. The answer is",
)


def model_path() -> Path:
    home = Path(os.environ.get("ONEBIT_HOME", Path.home() / ".cache" / "onebit"))
    return home / "models" / MODEL_FILE


class LlamaCppPeer:
    name = "llama_cpp"
    checks = ("I1-text", "I9-budget")

    def unavailable(self) -> str | None:
        if not importable("llama_cpp"):
            return "llama_cpp not installed"
        if not model_path().is_file():
            return f"no model file at {model_path()}"
        return None

    def version(self) -> str:
        import llama_cpp

        return getattr(llama_cpp, "__version__", "unknown")

    def arms(self) -> list:
        return [PromptLookupArm()]


class PromptLookupArm:
    name = "smollm2-prompt-lookup"
    note = (f"LlamaPromptLookupDecoding(num_pred_tokens={DRAFT}), temperature 0, "
            f"{TOKENS} tokens, {len(PROMPTS)} prompts, vs plain greedy")

    def _engine(self, draft: bool):
        from llama_cpp import Llama
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        drafter = LlamaPromptLookupDecoding(num_pred_tokens=DRAFT) if draft else None
        return Llama(model_path=str(model_path()), n_ctx=512, n_threads=2, seed=0,
                     verbose=False, draft_model=drafter)

    @staticmethod
    def _greedy(llm, prompt: str) -> list[int]:
        tokens = llm.tokenize(prompt.encode("utf-8"))
        out: list[int] = []
        for token in llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, reset=True):
            if token == llm.token_eos() or len(out) == TOKENS:
                break
            out.append(int(token))
        return out

    def judge(self) -> dict[str, Outcome]:
        try:
            plain_llm, spec_llm = self._engine(False), self._engine(True)
        except Exception as error:
            return {"I1-text": failed(f"loading the model raised {type(error).__name__}: "
                                      f"{error}")}
        divergences = []
        over = []
        for i, prompt in enumerate(PROMPTS):
            plain, spec = self._greedy(plain_llm, prompt), self._greedy(spec_llm, prompt)
            at = first_divergence(spec, plain)
            divergences.append(f"prompt {i}: " + ("equal" if at is None else f"first "
                               f"divergence at token {at}"))
            usage = spec_llm.create_completion(prompt, max_tokens=TOKENS, temperature=0.0,
                                               top_k=1)["usage"]
            if usage["completion_tokens"] > TOKENS:
                over.append(f"prompt {i}: max_tokens={TOKENS} returned "
                            f"{usage['completion_tokens']}")
        text = "; ".join(divergences)
        diverged = any("divergence" in d for d in divergences)
        return {"I1-text": failed(text) if diverged else passed(text),
                "I9-budget": failed("; ".join(over)) if over else passed(f"{len(PROMPTS)} "
                                                                         "prompts")}
