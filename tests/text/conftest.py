"""Fixtures of the text tests: SmolLM2's GGUF metadata read with llama.cpp's own `gguf` reader
(skipped with the reason when the model is not in the cache), and a small SentencePiece
vocabulary written as GGUF metadata in code."""

import os
from pathlib import Path

import pytest

from onebit.text import Tokenizer


def read_metadata(path: Path) -> dict:
    """A GGUF's metadata as a plain dict of key -> str/int/float/bool/list, through onebit's
    checked reader (which hands gguf's reader a faster view of string arrays)."""
    from onebit.gguf.reader import read_metadata as read

    return read(path)[2]


@pytest.fixture
def gguf_metadata():
    """`read_metadata` as a fixture."""
    return read_metadata


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """SmolLM2's verified GGUF; skipped with the reason when absent and not pullable."""
    from onebit.hub import skip_unless_cached

    return skip_unless_cached("smollm2")


@pytest.fixture(scope="session")
def llama_cpp_models() -> Path:
    """llama.cpp's `models` folder from the verified corpus (`onebit pull llama.cpp-corpus`):
    vocabulary-only GGUFs and `templates/*.jinja`; skipped with the reason when absent."""
    from onebit.corpus import skip_unless_cached

    return skip_unless_cached()


@pytest.fixture(scope="session")
def golden_maker():
    """data/make_golden_ids.py, which made the golden ids, as a module: the vocabularies it
    makes (RWKV) for the tests to build from the same metadata."""
    import importlib.util

    path = Path(__file__).parent / "data" / "make_golden_ids.py"
    spec = importlib.util.spec_from_file_location("make_golden_ids", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def smollm2_metadata(smollm2_path) -> dict:
    return read_metadata(smollm2_path)


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_metadata) -> Tokenizer:
    return Tokenizer.from_gguf_metadata(smollm2_metadata)


@pytest.fixture
def spm_metadata():
    """A factory of a tiny SentencePiece vocabulary as a GGUF would carry it: control tokens,
    the 256 byte pieces, and scored pieces whose merges must be recovered from the scores."""
    words = ["\u2581", "a", "b", "c", "h", "e", "l", "o", "\u2581h", "he", "ll", "lo", "\u2581he",
             "llo", "\u2581hello", "\u2581a", "ab", "abc", "\u2581abc", "\u2581\u2581"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + words
    types = [2, 3, 3] + [6] * 256 + [1] * len(words)
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(words))]
    metadata = {
        "general.architecture": "llama",
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
    }
    return lambda **override: {**metadata, **override}


def byte_vocab_metadata(extra_specials=("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
                        **override) -> dict:
    """A byte-level vocabulary of the 256 bytes and a few control tokens, no merges: a
    tokenizer for a fabricated model (vocab 256 + specials) that can spell any text."""
    from onebit.text.bytelevel import byte_alphabet

    tokens = [byte_alphabet()[b] for b in range(256)] + list(extra_specials)
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [1] * 256 + [3] * len(extra_specials),
        "tokenizer.ggml.merges": [],
        "tokenizer.ggml.bos_token_id": 257,
        "tokenizer.ggml.eos_token_id": 256,
        **override,
    }


@pytest.fixture
def byte_vocab():
    """`byte_vocab_metadata` as a fixture (a factory taking overrides)."""
    return byte_vocab_metadata


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A fabricated Qwen3 (random weights, vocab 259) with the byte tokenizer attached, as the
    GGUF loader attaches a file's."""
    from onebit.models import load_model
    from onebit.models.fabricate import fabricate_model

    path = fabricate_model(tmp_path_factory.mktemp("tiny") / "m", "qwen3", vocab_size=259)
    # the NumPy kernel: nothing to compile, so a cold run (the knobs mutant catalogue's, which
    # uses this model for N4) does not wait on numba; the kernels are the forward tests' own
    model = load_model(path, kernel="numpy")
    model.tokenizer = Tokenizer.from_gguf_metadata(byte_vocab_metadata())
    return model


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, tiny_model):
    """The fabricated model's directory with its tokenizer saved beside it as a checkpoint
    ships one: tokenizer.json and tokenizer_config.json (BOS/EOS, no chat template)."""
    import json

    from onebit.models.fabricate import fabricate_model

    path = fabricate_model(tmp_path_factory.mktemp("tinydir") / "m", "qwen3", vocab_size=259)
    tiny_model.tokenizer.save_json(path / "tokenizer.json")
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|im_start|>", "eos_token": "<|endoftext|>"}))
    return path


def run_onebit(*argv, stdin: str | None = None, env: dict | None = None, timeout: float = 300):
    """The real `onebit` command in a subprocess, from this checkout."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    environ = {**os.environ, "PYTHONPATH": str(root), **(env or {})}
    return subprocess.run([sys.executable, "-m", "onebit.cli", *map(str, argv)], input=stdin,
                          capture_output=True, text=True, timeout=timeout, env=environ,
                          cwd=root)


@pytest.fixture
def onebit_cli():
    """`run_onebit` as a fixture."""
    return run_onebit
