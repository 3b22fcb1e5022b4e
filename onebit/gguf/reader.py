"""Reading a GGUF file: the checked header, then llama.cpp's own reader for values and data.

`read_gguf(path)` returns the file's metadata as plain Python values (key -> str / int / float /
bool / list), the HF-style config dict its `<arch>.*` fields describe, and every tensor by HF
name as a `Stored` float32 array, dequantised once here (onebit/gguf/types.py), with llama's q/k
rows put back in HF order. Nothing the header does not vouch for is read (header.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onebit.gguf import mapping
from onebit.gguf.errors import GGUFConfigError, GGUFError
from onebit.gguf.header import Header, read_header
from onebit.gguf.types import TYPE_NAMES, dequantize
from onebit.models import blocks
from onebit.models.files import check_regular
from onebit.models.weights import Stored


@dataclass
class GGUFContents:
    """What a GGUF file holds, in the forms onebit's model builder takes."""

    config: dict[str, Any]  # HF config.json fields
    tensors: dict[str, Stored]  # by HF name, float32
    metadata: dict[str, Any]  # every key/value of the file (tokenizer.* included)
    types: dict[str, str]  # HF name -> the ggml type it was stored in (F32, Q4_1, ...)
    header: Header


def _reader_class():
    """`gguf.GGUFReader` reading through a plain ndarray view of its memory map.

    The reader slices its map once per value, and a 49k-token vocabulary is some 150k strings:
    each slice of an `np.memmap` runs the subclass's Python `__array_finalize__`, which was
    two thirds of SmolLM2's load (2.6-2.8 s against 0.8-1.0 s through the view, same fields,
    same tensor bytes). The view shares the map's memory and keeps it open."""
    from gguf import GGUFReader, GGUFValueType

    class PlainViewReader(GGUFReader):
        @property
        def data(self) -> np.ndarray:
            return self._plain_data

        @data.setter
        def data(self, value: np.ndarray) -> None:
            self._plain_data = value.view(np.ndarray) if isinstance(value, np.memmap) else value

        def _get_field_parts(self, orig_offs: int, raw_type: int):
            """The reader's own parts for a field, made in one pass for an array of strings or
            of scalars (a vocabulary, its scores and token types): the same parts, data indices
            and types as gguf's element-by-element recursion, which took 1.0-1.5 s of
            SmolLM2's load for its 49k tokens and 48k merges. Anything else, and a file of the
            other byte order, goes to gguf's own code."""
            if raw_type != GGUFValueType.ARRAY or self.byte_order != "I":
                return super()._get_field_parts(orig_offs, raw_type)
            data = self.data
            itype = data[orig_offs:orig_offs + 4].view(np.uint32)
            length = data[orig_offs + 4:orig_offs + 12].view(np.uint64)
            if len(itype) != 1 or len(length) != 1:
                return super()._get_field_parts(orig_offs, raw_type)  # past the end: its error
            item = int(itype[0])
            scalar = self.gguf_scalar_to_np.get(item)  # GGUFValueType is an IntEnum
            if item != GGUFValueType.STRING and scalar is None:
                return super()._get_field_parts(orig_offs, raw_type)
            parts: list[np.ndarray] = [itype, length]
            offs = orig_offs + 12
            count = int(length[0])
            if scalar is not None:
                size = np.dtype(scalar).itemsize
                values = data[offs:offs + size * count].view(scalar)
                if len(values) != count:  # past the end of the file: gguf's own error
                    return super()._get_field_parts(orig_offs, raw_type)
                parts += [values[i:i + 1] for i in range(count)]
                offs += size * count
                indices = list(range(2, 2 + count))
            else:
                for _ in range(count):
                    n = data[offs:offs + 8].view(np.uint64)
                    text = data[offs + 8:offs + 8 + int(n[0])]
                    parts += [n, text]
                    offs += 8 + int(n[0])
                indices = list(range(3, 3 + 2 * count, 2))
            types = [GGUFValueType.ARRAY] + ([GGUFValueType(item)] if count else [])
            return offs - orig_offs, parts, indices, types

    return PlainViewReader


def read_metadata(path: str | Path) -> tuple[Header, Any, dict[str, Any]]:
    """(checked header, the `gguf.GGUFReader`, metadata as plain values) of the file."""
    path = Path(path)
    check_regular(path, GGUFError)
    header = read_header(path)
    try:
        reader = _reader_class()(path)
    except (ValueError, KeyError, IndexError, OverflowError, TypeError) as error:
        # the header walk passed, so this is a value the walk does not judge
        raise GGUFError(f"{path}: gguf could not read the file: {error}") from None
    metadata: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):  # the reader's own entries for version and counts
            continue
        try:
            metadata[key] = _plain(field.contents())
        except (UnicodeDecodeError, ValueError, IndexError) as error:
            raise GGUFError(f"{path}: metadata '{key}' cannot be read: {error}") from None
    return header, reader, metadata


def read_gguf(path: str | Path, *, keep_blocks: bool = False) -> GGUFContents:
    """Read and check the GGUF file at `path` (see the module docstring). Raises `GGUFError`,
    `GGUFConfigError` or `UnsupportedGGUFError` naming the file and the culprit.

    `keep_blocks`: 2-D Q8_0 / Q4_0 / Q4_1 tensors stay in their blocks (a `Stored` of kind
    "q8_0" / "q4_0" / "q4_1", uint8 rows of blocks; onebit/models/blocks.py) for the integer
    kernel, instead of being dequantised here; Q5_0 ones become Q8_0 blocks of the same
    values (`blocks.q5_0_as_q8_0`), Q4_K ones q4_1f blocks (`blocks.q4_k_as_q4_1f`) and Q6_K
    ones q8_16f blocks (`blocks.q6_k_as_q8_16f`). Their float form, when asked for, is the same
    values bit for bit."""
    path = Path(path)
    source = str(path)
    header, reader, metadata = read_metadata(path)
    infos = {t.name: t for t in header.tensors}
    views = {t.name: t for t in reader.tensors}
    for name, info in infos.items():  # the reader must agree with the walk on every extent
        view = views.get(name)
        if view is None or int(view.data_offset) != info.offset or view.data.nbytes != info.nbytes:
            raise GGUFError(f"{path}: tensor '{name}' is placed differently by gguf's reader")
    freqs = None
    if mapping.ROPE_FREQS in infos:
        freqs = _values(views[mapping.ROPE_FREQS], infos[mapping.ROPE_FREQS])
    config = mapping.hf_config(metadata, {n: i.shape for n, i in infos.items()}, freqs, source)
    arch = metadata["general.architecture"]
    expected = mapping.expected_shapes(config, arch)
    for name in infos:
        if name != mapping.ROPE_FREQS:
            mapping.hf_name(name, arch, config["num_hidden_layers"], source)
    for name in mapping.required(arch, config["num_hidden_layers"],
                                 config["tie_word_embeddings"]):
        if name not in infos:
            raise GGUFConfigError(f"{path}: missing tensor '{name}'")
        if infos[name].shape != expected[name]:
            raise GGUFConfigError(f"{path}: tensor '{name}' has shape {list(infos[name].shape)}"
                                  f"; the metadata implies {list(expected[name])}")
    tensors: dict[str, Stored] = {}
    types: dict[str, str] = {}
    for name, info in infos.items():
        if name == mapping.ROPE_FREQS:
            continue
        ggml = TYPE_NAMES[info.type_id]
        kind = (blocks.FROM_GGML.get(ggml) or blocks.CONVERTED.get(ggml)) if keep_blocks else None
        if kind is not None and len(info.shape) == 2:
            values = np.asarray(views[name].data).reshape(-1).view(np.uint8)
            values = values.reshape(info.shape[0], -1)
            if ggml == "Q5_0":
                values = blocks.q5_0_as_q8_0(values, *info.shape)
            elif ggml == "Q4_K":
                values = blocks.q4_k_as_q4_1f(values, *info.shape)
            elif ggml == "Q6_K":
                values = blocks.q6_k_as_q8_16f(values, *info.shape)
        else:
            kind, values = "float", _values(views[name], info)
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
            heads = config["num_attention_heads" if "attn_q" in name else "num_key_value_heads"]
            values = mapping.unpermute(values, heads)
        hf = mapping.hf_name(name, arch, config["num_hidden_layers"], source)
        if kind == "float":
            values = mapping.hf_values(name, arch, values)
        tensors[hf] = Stored(values, kind, source)
        types[hf] = TYPE_NAMES[info.type_id]
    return GGUFContents(config, tensors, metadata, types, header)


def _values(view, info) -> np.ndarray:
    raw = np.asarray(view.data).reshape(-1).view(np.uint8)
    return dequantize(info.type_id, raw, info.shape)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays -> Python values, so the metadata is a plain dict."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value
