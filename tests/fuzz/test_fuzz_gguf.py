"""Corrupted GGUF files: each load ends in a typed ModelError naming the file, or in a model
whose weights are exactly what the file holds (decoded independently by gguf's own reader and
dequantiser); and through the command line, in one line on stderr, never a traceback."""

from __future__ import annotations

import functools
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from cli_driver import judge_cli
from fuzzing import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

import onebit
from onebit.gguf import read_gguf
from onebit.gguf.fabricate import fabricate_gguf
from onebit.gguf.mapping import unpermute
from onebit.models import ModelError, load_model

sys.path.insert(0, str(Path(__file__).parent.parent / "gguf"))
from ggufbytes import key_at, tensor_at  # noqa: E402

TENSORS = ["token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight",
           "blk.0.ffn_down.weight", "blk.1.attn_k.weight"]
KEYS = ["general.architecture", "llama.block_count", "llama.embedding_length",
        "llama.attention.head_count", "general.name", "tokenizer.ggml.tokens"]
ABSURD = [0, 1, 2**31, 2**32 - 1, 2**40, 2**63 - 1, 2**64 - 1]


@functools.lru_cache(maxsize=1)
def pristine() -> bytes:
    """A small llama GGUF (Q4_1 matrices, Q8_0 embedding, a tokens array) as bytes."""
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / "m.gguf"
        fabricate_gguf(path, "llama", matrix_type="Q4_1", embed_type="Q8_0",
                       fields={"tokenizer.ggml.tokens": [f"t{i}" for i in range(8)]})
        return path.read_bytes()


class Blob(bytes):
    def __repr__(self) -> str:
        return f"<{len(self)} bytes>"


KINDS = ["truncate", "bitflip", "count", "key", "tensor", "rename"]


@st.composite
def damaged(draw, kind: str) -> tuple[str, bytes]:
    blob = pristine()
    out = bytearray(blob)
    if kind == "truncate":
        return kind, Blob(blob[: draw(st.integers(0, len(blob) - 1))])
    if kind == "bitflip":
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] ^= 1 << draw(st.integers(0, 7))
    elif kind == "count":  # version, tensor count or key/value count
        at, fmt = draw(st.sampled_from([(4, "<I"), (8, "<Q"), (16, "<Q")]))
        value = draw(st.sampled_from(ABSURD) | st.integers(0, 64))
        struct.pack_into(fmt, out, at, value % (2**32 if fmt == "<I" else 2**64))
    elif kind == "key":  # a key's type, a string length, an array's element type or length
        at = key_at(blob, draw(st.sampled_from(KEYS)))
        shift, fmt = draw(st.sampled_from([(0, "<I"), (4, "<Q"), (4, "<I"), (8, "<Q")]))
        value = draw(st.sampled_from(ABSURD) | st.integers(0, 13))
        struct.pack_into(fmt, out, at + shift, value % (2**32 if fmt == "<I" else 2**64))
    elif kind == "tensor":  # dimension count, a dimension, the type or the offset
        info = tensor_at(blob, draw(st.sampled_from(TENSORS)))
        field, fmt = draw(st.sampled_from([("n_dims", "<I"), ("dims", "<Q"), ("type", "<I"),
                                           ("offset", "<Q")]))
        value = draw(st.sampled_from(ABSURD) | st.integers(0, 40) | st.integers(0, len(blob)))
        struct.pack_into(fmt, out, info[field], value % (2**32 if fmt == "<I" else 2**64))
    else:  # one tensor takes another's name (same length) or a name no model uses
        a, b = draw(st.sampled_from([("blk.0.attn_k.weight", "blk.0.attn_q.weight"),
                                     ("blk.0.ffn_up.weight", "blk.0.ffn_xx.weight"),
                                     ("blk.1.attn_norm.weight", "blk.9.attn_norm.weight")]))
        return kind, Blob(blob.replace(a.encode(), b.encode(), 1))
    return kind, Blob(bytes(out))


def judge_gguf(path: Path) -> str:
    """Load `path`: "clear error" or "right answer", or AssertionError saying what is wrong."""
    try:
        model = load_model(path, kernel="numpy")
    except ModelError as error:
        if str(path) not in str(error):
            raise AssertionError(f"an error that names no file: {error}") from error
        return "clear error"
    except BaseException as error:
        raise AssertionError(f"traceback: {type(error).__name__}: {error}") from error
    _same_as_the_file(model, path)
    onebit.greedy(model, [1, 2], max_tokens=2)
    return "right answer"


def _same_as_the_file(model, path: Path) -> None:
    """Every weight equals the file's tensor as gguf's own reader and dequantiser decode it."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    contents = read_gguf(path)
    heads = {"attn_q": contents.config["num_attention_heads"],
             "attn_k": contents.config["num_key_value_heads"]}
    names = {t.name: t for t in GGUFReader(path).tensors}
    for hf, stored in contents.tensors.items():
        gguf_name = next(n for n in names if read_gguf_name(n) == hf)
        t = names[gguf_name]
        values = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        kind = gguf_name.split(".")[-2]
        if kind in heads:
            values = unpermute(values, heads[kind])
        want = values.reshape(stored.data.shape).astype(model.dtype)
        if not np.array_equal(model.weights.get(hf), want):
            raise AssertionError(f"silent wrong: '{hf}' differs from the file")


def read_gguf_name(name: str) -> str:
    from onebit.gguf.mapping import GLOBAL_TENSORS, LAYER_TENSORS

    if name in GLOBAL_TENSORS:
        return GLOBAL_TENSORS[name]
    _, layer, rest = name.split(".", 2)
    return f"model.layers.{layer}.{LAYER_TENSORS.get(rest, rest)}"


@pytest.mark.parametrize("kind", KINDS)
@fuzz_settings(quick=15, long=400)
@given(data=st.data())
def test_corrupted_gguf(tally, kind, data):
    """Truncation, bit flips, absurd counts, lengths, dimensions, types and offsets, and
    renamed or duplicated tensors in a GGUF file."""
    kind, blob = data.draw(damaged(kind), label="damage")
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / "model.gguf"
        path.write_bytes(blob)
        outcome = judge_gguf(path)
    tally(f"files: gguf ({kind})", outcome)
    tally("files: gguf", outcome)


def test_gguf_errors_on_the_command_line(tmp_path, tally):
    """A damaged GGUF given to a command is one line on stderr and exit 2, no traceback."""
    blob = pristine()
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("1 2 3\n")
    for name, data in [("truncated", blob[:100]), ("magic", b"GGUX" + blob[4:]),
                       ("count", blob[:8] + struct.pack("<Q", 2**62) + blob[16:]),
                       ("empty", b"")]:
        path = tmp_path / f"{name}.gguf"
        path.write_bytes(data)
        argv = ["acceptance", "--model", str(path), "--head", "ngram", "--prompt-ids",
                str(prompts), "--tokens", "2"]
        tally("cli: gguf files", judge_cli(argv))
