"""Corrupted model files, and the judge of what loading one did.

`MUTATIONS` turn the bytes of a safetensors file (a HF checkpoint's model.safetensors or a
Q4NX container's model.q4nx) into a damaged one: cut short, bits flipped, the JSON header
edited (dtype, shape, offsets swapped or absurd, a tensor dropped or named twice), the header
length absurd. `judge_load` loads the directory and classifies the outcome:

- "clear error": a `ModelError` (a ValueError) whose message names the file or the directory;
- "right answer": it loads, every weight equals what the file holds (read independently by
  safetensors where it can), and a decode either runs or stops with a onebit DecodeError;
- anything else fails the test ("traceback": another exception).
"""

from __future__ import annotations

import functools
import json
import struct
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

import onebit
from onebit.models import ModelError, fabricate_model, load_model

DTYPES = ["F16", "BF16", "F32", "F64", "I8", "U8", "I16", "U16", "I32", "I64", "BOOL",
          "F8_E4M3", "C64", "X9"]
MICRO = dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
             intermediate_size=64, vocab_size=48, num_hidden_layers=1)


@functools.lru_cache(maxsize=4)
def pristine(container: str) -> tuple[str, bytes, str]:
    """(weights file name, its bytes, config.json text) of a small valid model: a micro
    Qwen3.5 HF checkpoint (bf16-free floats, every GDN tensor) or the tiny Q4NX Qwen3."""
    root = Path(tempfile.mkdtemp(prefix="onebit-fuzz-"))
    if container == "hf":
        path = fabricate_model(root / "m", "qwen3_5", quantized=False,
                               **{**MICRO, "num_hidden_layers": 2, "linear_num_key_heads": 1,
                                  "linear_num_value_heads": 2, "linear_key_head_dim": 8,
                                  "linear_value_head_dim": 8})
        name = "model.safetensors"
    else:
        path = fabricate_model(root / "m", "qwen3")
        name = "model.q4nx"
    return name, (path / name).read_bytes(), (path / "config.json").read_text()


def split(blob: bytes) -> tuple[dict, bytes]:
    (size,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + size]), blob[8 + size:]


def join(header: dict | str, body: bytes) -> bytes:
    text = header if isinstance(header, str) else json.dumps(header)
    raw = text.encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + body


class Blob(bytes):
    """Bytes that print short: a failing example shows the kind of damage, not megabytes."""

    def __repr__(self) -> str:
        return f"<{len(self)} bytes>"


@st.composite
def corrupted(draw, blob: bytes) -> tuple[str, bytes]:
    kind, damaged = draw(_corrupted(blob))
    return kind, Blob(damaged)


@st.composite
def _corrupted(draw, blob: bytes) -> tuple[str, bytes]:
    """One damaged version of a safetensors file, with a name for the kind of damage."""
    kind = draw(st.sampled_from(["truncate", "bitflip", "dtype", "shape", "offsets", "drop",
                                 "duplicate", "header-size", "header-junk", "metadata"]))
    if kind == "truncate":
        return kind, blob[: draw(st.integers(0, len(blob) - 1))]
    if kind == "bitflip":
        out = bytearray(blob)
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] ^= 1 << draw(st.integers(0, 7))
        return kind, bytes(out)
    if kind == "header-size":
        size = draw(st.sampled_from([0, 1, 7, 2**31, 2**63 - 1, 2**64 - 1])
                    | st.integers(0, len(blob)))
        return kind, struct.pack("<Q", size) + blob[8:]
    header, body = split(blob)
    names = sorted(n for n in header if n != "__metadata__")
    name = draw(st.sampled_from(names))
    entry = header[name]
    if kind == "dtype":
        entry["dtype"] = draw(st.sampled_from(DTYPES))
    elif kind == "shape":
        entry["shape"] = draw(st.lists(st.integers(0, 2**40) | st.sampled_from([0, 1, 5120]),
                                       max_size=4)
                              | st.just(list(reversed(entry["shape"]))))
    elif kind == "offsets":
        entry["data_offsets"] = draw(st.lists(st.integers(-2, len(body) + 10), min_size=0,
                                              max_size=3))
    elif kind == "drop":
        del header[name]
    elif kind == "duplicate":  # the same key twice in the JSON text
        text = json.dumps(header)
        dup = json.dumps({name: header[names[0]]})[1:-1]
        return kind, join(text[:-1] + ", " + dup + "}", body)
    elif kind == "header-junk":
        entry[draw(st.sampled_from(["dtype", "shape", "data_offsets"]))] = draw(
            st.none() | st.text(max_size=5) | st.floats() | st.lists(st.text(max_size=2)))
    else:
        header["__metadata__"] = draw(st.dictionaries(st.text(max_size=5),
                                                      st.text(max_size=5) | st.integers()))
    return kind, join(header, body)


JSON_JUNK = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
             | st.text(max_size=8) | st.lists(st.integers(), max_size=3)
             | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def corrupted_config(draw, text: str) -> tuple[str, bytes]:
    """A damaged config.json: a field's value swapped for any JSON value, a field dropped,
    the text cut short, bytes that are not UTF-8, or a value nested deep."""
    config = json.loads(text)
    kind = draw(st.sampled_from(["swap", "swap", "drop", "truncate", "latin1", "deep",
                                 "not-object"]))
    field = draw(st.sampled_from(sorted(config)))
    if kind == "swap":
        config[field] = draw(JSON_JUNK)
    elif kind == "drop":
        del config[field]
    elif kind == "truncate":
        raw = json.dumps(config).encode()
        return kind, raw[: draw(st.integers(0, len(raw) - 1))]
    elif kind == "latin1":
        return kind, json.dumps(config).encode()[:-1] + b', "x": "\xe9"}'
    elif kind == "deep":
        config[field] = json.loads("[" * 50 + "]" * 50)
        if draw(st.booleans()):
            return kind, ("[" * 200_000 + "]" * 200_000).encode()
    else:
        return kind, json.dumps(draw(st.lists(st.integers(), max_size=2) | st.text())).encode()
    return kind, json.dumps(config, allow_nan=True).encode()


def write_model(root: Path, container: str, weights: bytes | None = None,
                config: bytes | None = None) -> Path:
    name, blob, text = pristine(container)
    path = root / "m"
    path.mkdir()
    (path / name).write_bytes(blob if weights is None else weights)
    (path / "config.json").write_bytes(text.encode() if config is None else config)
    return path


def judge_load(path: Path) -> str:
    """Load `path`; "clear error" or "right answer", or AssertionError saying what is wrong."""
    try:
        model = load_model(path, kernel="numpy")  # no compile: the fuzz is about files
    except ModelError as error:
        if str(path) not in str(error):
            raise AssertionError(f"an error that names no file: {error}") from error
        return "clear error"
    except BaseException as error:
        raise AssertionError(f"traceback: {type(error).__name__}: {error}") from error
    _same_as_the_file(model, path)
    try:
        onebit.greedy(model, [1, 2], max_tokens=2)
    except onebit.DecodeError:
        return "clear error"
    return "right answer"


def _same_as_the_file(model, path: Path) -> None:
    """Every float weight equals the file's tensor as safetensors reads it (where it can)."""
    from safetensors.numpy import load_file

    try:
        stored = load_file(str(next(path.glob("*.safetensors"))))
    except (StopIteration, Exception):
        return  # a Q4NX container, or a dtype numpy cannot hold: checked by the loader alone
    for name in model.weights.names():
        if name in stored and np.issubdtype(stored[name].dtype, np.floating):
            expected = stored[name].astype(model.dtype)
            if not np.array_equal(model.weights.get(name), expected):
                raise AssertionError(f"silent wrong: '{name}' differs from the file")
