"""Model files: the two containers the forward loads, and the weight cache.

**Q4NX container**: a directory with `config.json` and `model.q4nx`, a plain safetensors file.
Every weight named as in HuggingFace (`model.layers.0.self_attn.q_proj.weight`, ...). A weight
that tiles into Q4NX blocks may be stored as its blocks (uint8, `[(out/32)*(in/256), 5120]` or
`[out/32, in/256, 5120]`); anything else (norms, conv kernels, `A_log`, ...) is stored as bf16,
either as safetensors' BF16 dtype or as its 16-bit patterns in a uint16 tensor. Float dtypes
are accepted too.

**HuggingFace checkpoint**: a directory with `config.json` and one or more `*.safetensors` files
of float weights, as `save_pretrained` writes them. With `model.safetensors.index.json`, exactly
the shards its `weight_map` lists are read, and each tensor must sit in the shard the index
names; a listed shard that is missing, a tensor in two shards or a `*.safetensors` file the
index does not list is an error naming both files. Without an index every `*.safetensors` file
is read and a tensor in two files is an error naming both. The multimodal Qwen3.5 naming
(`model.language_model.*`) is mapped to the text model's names; tensors the forward does not
use (vision tower, MTP head, rotary buffers) are ignored.

Files are read with the `safetensors` package (never pickle), and only regular files are
opened (a FIFO or a device where a model file should be is refused, never waited on). Every
weight is checked finite at load (see `check_finite`), so a NaN or inf is reported naming the
tensor instead of turning into NaN logits at the first pass. numpy has no bfloat16, so BF16
tensors are located through the (already validated) safetensors header and read as uint16
bit patterns.

**Weight cache**: `WeightStore.get(name)` returns a weight in the compute dtype. Each Q4NX weight
is unpacked once, on first use, and the float form is kept. With the environment variable
`ONEBIT_UNPACK_PER_TOKEN=1` (or `unpack_per_token=True`) it is unpacked again on every use
instead: the slow path, kept so the two can be compared A/B with identical output.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onebit.models import blocks, q4nx
from onebit.models.config import FULL, LINEAR, ModelConfig
from onebit.models.errors import ModelFileError
from onebit.models.files import check_regular, read_small

CONFIG_FILE = "config.json"
Q4NX_FILE = "model.q4nx"
HF_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
UNPACK_ENV = "ONEBIT_UNPACK_PER_TOKEN"
# safetensors dtypes read as float weights (BF16 is read by hand: numpy has no bfloat16)
FLOAT_DTYPES = ("F16", "F32", "F64")


def unpack_per_token_from_env() -> bool:
    """True when `ONEBIT_UNPACK_PER_TOKEN` asks for per-token unpacking (1 / true / yes)."""
    return os.environ.get(UNPACK_ENV, "").strip().lower() in ("1", "true", "yes", "on")


# ---------------------------------------------------------------------------------------------
# What a config expects


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the forward reads, by HF name, with its HF shape ([out, in] for linears)."""
    c = config
    H, D = c.hidden_size, c.head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (c.vocab_size, H),
        "model.norm.weight": (H,),
    }
    if not c.tie_word_embeddings:
        shapes["lm_head.weight"] = (c.vocab_size, H)
    for i, kind in enumerate(c.layer_types):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (H,)
        shapes[p + "post_attention_layernorm.weight"] = (H,)
        shapes[p + "mlp.gate_proj.weight"] = (c.intermediate_size, H)
        shapes[p + "mlp.up_proj.weight"] = (c.intermediate_size, H)
        shapes[p + "mlp.down_proj.weight"] = (H, c.intermediate_size)
        if kind == FULL:
            q_out = c.num_attention_heads * D * (2 if c.gated_attention else 1)
            shapes[p + "self_attn.q_proj.weight"] = (q_out, H)
            shapes[p + "self_attn.k_proj.weight"] = (c.num_key_value_heads * D, H)
            shapes[p + "self_attn.v_proj.weight"] = (c.num_key_value_heads * D, H)
            shapes[p + "self_attn.o_proj.weight"] = (H, c.num_attention_heads * D)
            shapes[p + "self_attn.q_norm.weight"] = (D,)
            shapes[p + "self_attn.k_norm.weight"] = (D,)
        elif kind == LINEAR:
            Hv = c.linear_num_value_heads
            shapes[p + "linear_attn.in_proj_qkv.weight"] = (c.conv_dim, H)
            shapes[p + "linear_attn.in_proj_z.weight"] = (c.linear_value_dim, H)
            shapes[p + "linear_attn.in_proj_b.weight"] = (Hv, H)
            shapes[p + "linear_attn.in_proj_a.weight"] = (Hv, H)
            shapes[p + "linear_attn.conv1d.weight"] = (c.conv_dim, 1, c.linear_conv_kernel_dim)
            shapes[p + "linear_attn.dt_bias"] = (Hv,)
            shapes[p + "linear_attn.A_log"] = (Hv,)
            shapes[p + "linear_attn.norm.weight"] = (c.linear_value_head_dim,)
            shapes[p + "linear_attn.out_proj.weight"] = (H, c.linear_value_dim)
    return shapes


def canonical_name(name: str) -> str:
    """Map checkpoint naming variants to the text model's HF names."""
    for prefix in ("model.language_model.", "language_model.model."):
        if name.startswith(prefix):
            return "model." + name[len(prefix) :]
    if name.startswith("language_model.lm_head."):
        return name[len("language_model.") :]
    return name


# ---------------------------------------------------------------------------------------------
# Reading safetensors


@dataclass
class Stored:
    """One tensor as a file holds it. `kind`: "float", "bf16" (uint16 bit patterns), "q4nx"
    (uint8 blocks) or a ggml block kind of blocks.py ("q8_0", "q4_0", "q4_1": uint8 rows of
    blocks)."""

    data: np.ndarray
    kind: str
    file: str


def read_safetensors(path: Path, *, bf16_as_u16: bool = False,
                     keep: Callable[[str], bool] | None = None,
                     error: type[Exception] = ModelFileError) -> dict[str, Stored]:
    """The tensors of one safetensors file (those `keep` accepts, all when None; the others
    are never read): the one reader of model checkpoints and draft-head checkpoints alike.
    BF16 tensors come back as uint16 bit patterns; with `bf16_as_u16`, uint16 tensors are taken
    as bf16 too (the Q4NX container's rule), and uint8 tensors are Q4NX blocks. Raises `error`
    (`ModelFileError`, or the head's `DraftFileError`) naming the file and tensor."""
    from safetensors import SafetensorError, safe_open

    check_regular(path, error)
    try:
        handle = safe_open(str(path), framework="numpy")
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (SafetensorError, OSError, ValueError) as problem:
        raise error(
            f"{path}: not a valid safetensors file (truncated or corrupt?): {problem}"
        ) from None
    tensors: dict[str, Stored] = {}
    header: dict | None = None
    with handle as f:
        for name in f.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
            if keep is not None and not keep(name):
                continue
            dtype = f.get_slice(name).get_dtype()
            if dtype == "BF16":
                header = header if header is not None else _read_header(path)
                tensors[name] = Stored(_read_raw_u16(path, header, name, error), "bf16",
                                       str(path))
                continue
            if dtype not in FLOAT_DTYPES and not (bf16_as_u16 and dtype in ("U8", "U16")):
                raise error(
                    f"{path}: tensor '{name}' has dtype {dtype}, which holds no "
                    f"weights this loader knows"
                )
            try:
                data = f.get_tensor(name)
            except (SafetensorError, TypeError, ValueError, AttributeError) as problem:
                raise error(
                    f"{path}: cannot read tensor '{name}' ({dtype}): {problem}"
                ) from None
            if bf16_as_u16 and data.dtype == np.uint16:
                tensors[name] = Stored(data, "bf16", str(path))
            elif bf16_as_u16 and data.dtype == np.uint8:
                tensors[name] = Stored(data, "q4nx", str(path))
            elif np.issubdtype(data.dtype, np.floating):
                tensors[name] = Stored(data, "float", str(path))
            else:
                raise error(
                    f"{path}: tensor '{name}' has dtype {dtype}, which holds no "
                    f"weights this loader knows"
                )
    return tensors


def as_float32(stored: Stored) -> np.ndarray:
    """A float or bf16 tensor widened to float32 (what a draft head computes with)."""
    if stored.kind == "bf16":
        return q4nx.bf16_bits_to_f32(stored.data)
    return np.asarray(stored.data).astype(np.float32)


def _read_header(path: Path) -> dict:
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    header["__data_start__"] = 8 + size
    return header


def _read_raw_u16(path: Path, header: dict, name: str,
                  error: type[Exception] = ModelFileError) -> np.ndarray:
    entry = header[name]
    start, end = entry["data_offsets"]
    shape = tuple(entry["shape"])
    count = (end - start) // 2
    if count != int(np.prod(shape, dtype=np.int64)):
        raise error(f"{path}: tensor '{name}' has {end - start} bytes for shape {shape}")
    with open(path, "rb") as f:
        f.seek(header["__data_start__"] + start)
        raw = f.read(end - start)
    if len(raw) != end - start:
        raise error(f"{path}: tensor '{name}' is truncated")
    return np.frombuffer(raw, dtype="<u2").reshape(shape).astype(np.uint16)


# ---------------------------------------------------------------------------------------------
# Finite weights


def check_finite(name: str, stored: Stored, dtype: np.dtype, convention: str) -> None:
    """Refuse a weight that holds NaN or inf, or that would overflow `dtype` once widened or
    dequantised; the error names the tensor and the first bad element.

    Checked once at load because a NaN weight does not fail: it makes every logit NaN, and an
    argmax over NaN is 0 at every step, a plausible but wrong text. For Q4NX blocks only the
    scales and mins are read (a 4-bit code is always finite), a fifth of the bytes.
    """
    limit = float(np.finfo(dtype).max)
    if blocks.is_block_kind(stored.kind):
        blocks.check_finite(name, stored.data, stored.kind, np.dtype(dtype), stored.file)
        return
    if stored.kind == "q4nx":
        raw = np.ascontiguousarray(stored.data.reshape(-1, q4nx.BLOCK_BYTES)[:, : q4nx.CODES_AT])
        values = q4nx.bf16_bits_to_f32(raw.view("<u2"))  # [blocks, scales | mins]
        bad = ~np.isfinite(values).all(axis=1)
        if not bad.any():
            top = 15.0 if convention == "unsigned" else 8.0
            extent = np.abs(values[:, :256]).max(axis=1).astype(np.float64) * top
            extent += np.abs(values[:, 256:]).max(axis=1)
            bad = extent > limit
        if bad.any():
            block = int(np.flatnonzero(bad)[0])
            raise ModelFileError(
                f"{stored.file}: tensor '{name}' has a non-finite or overflowing scale or min "
                f"in Q4NX block {block} ({int(bad.sum())} bad block(s)); a weight must be finite"
            )
        return
    values = q4nx.bf16_bits_to_f32(stored.data) if stored.kind == "bf16" else stored.data
    finite = np.isfinite(values)
    if finite.all() and (values.size == 0 or values.dtype.itemsize <= np.dtype(dtype).itemsize
                         or float(np.abs(values).max()) <= limit):
        return
    if finite.all():
        finite = np.abs(values) <= limit
    first = np.unravel_index(int(np.flatnonzero(~finite.reshape(-1))[0]), values.shape)
    raise ModelFileError(
        f"{stored.file}: tensor '{name}' holds {int((~finite).sum())} non-finite value(s) "
        f"(first at {list(map(int, first))}: {values[first]}); a weight must be finite in "
        f"{np.dtype(dtype).name}"
    )


# ---------------------------------------------------------------------------------------------
# The weight cache


class WeightStore:
    """The model's weights by HF name, handed out in the compute dtype.

    Q4NX weights are unpacked once, on first use, unless `unpack_per_token` (then on every
    `get`). Everything else is converted once.
    """

    def __init__(
        self,
        tensors: dict[str, Stored],
        config: ModelConfig,
        *,
        dtype: np.dtype | type = np.float32,
        convention: str = "unsigned",
        unpack_per_token: bool | None = None,
        source: str = "",
        shapes: dict[str, tuple[int, ...]] | None = None,
    ) -> None:
        if convention not in q4nx.CONVENTIONS:
            raise ValueError(
                f"q4nx convention must be one of {q4nx.CONVENTIONS}, got {convention!r}"
            )
        self.dtype = np.dtype(dtype)
        self.convention = convention
        self.unpack_per_token = (
            unpack_per_token_from_env() if unpack_per_token is None else bool(unpack_per_token)
        )
        self.source = source
        # `shapes`: every tensor the forward reads (a family with its own layout passes them)
        self.shapes = expected_shapes(config) if shapes is None else dict(shapes)
        self._stored: dict[str, Stored] = {}
        stored_as: dict[str, str] = {}  # HF name -> the name in the file
        for stored_name, stored in tensors.items():
            name = canonical_name(stored_name)
            if name in stored_as:
                first = self._stored[name].file
                raise ModelFileError(
                    f"tensor '{name}' is stored twice: as '{stored_as[name]}' in {first} and "
                    f"as '{stored_name}' in {stored.file}"
                )
            if name in self.shapes:
                self._stored[name] = stored
                stored_as[name] = stored_name
        for name, shape in self.shapes.items():
            if name not in self._stored:
                raise ModelFileError(f"{source}: missing tensor '{name}' (expected shape {shape})")
            self._check_shape(name, self._stored[name], shape)
            check_finite(name, self._stored[name], self.dtype, convention)
        self._cache: dict[str, np.ndarray] = {}
        self.unpacks = 0  # how many Q4NX unpacks were done (for the A/B switch's tests)

    def _check_shape(self, name: str, stored: Stored, shape: tuple[int, ...]) -> None:
        if blocks.is_block_kind(stored.kind):
            blocks.check_shape(name, stored.data, stored.kind, shape, stored.file)
        elif stored.kind == "q4nx":
            if len(shape) != 2 or not q4nx.can_quantize(shape):
                raise ModelFileError(
                    f"{stored.file}: tensor '{name}' is stored as Q4NX blocks, "
                    f"but its shape {shape} does not tile into 32 x 256 blocks"
                )
            try:
                q4nx.as_grid(stored.data, *shape)
            except q4nx.Q4NXError as error:
                raise ModelFileError(
                    f"{stored.file}: tensor '{name}': {error} (from config)"
                ) from None
        elif tuple(stored.data.shape) != shape:
            raise ModelFileError(
                f"{stored.file}: tensor '{name}' has shape "
                f"{tuple(stored.data.shape)}; the config needs {shape}"
            )

    def names(self) -> list[str]:
        return list(self.shapes)

    def kind(self, name: str) -> str:
        return self._stored[name].kind

    def get(self, name: str) -> np.ndarray:
        """The weight `name` in the compute dtype (C-contiguous; do not modify)."""
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        value = self.unpack(name)
        if self.unpack_per_token and self._stored[name].kind == "q4nx":
            return value  # the slow path: unpack again next time
        value = np.ascontiguousarray(value)
        value.flags.writeable = False
        self._cache[name] = value
        return value

    def unpack(self, name: str) -> np.ndarray:
        """The weight `name` in the compute dtype, prepared afresh: never read from or written to
        the cache (the per-token arm of a weight-cache A/B)."""
        stored = self._stored[name]
        if stored.kind == "q4nx":
            self.unpacks += 1
            return q4nx.dequantize(
                stored.data, *self.shapes[name], convention=self.convention, dtype=self.dtype
            )
        if stored.kind == "bf16":
            return q4nx.bf16_bits_to_f32(stored.data).astype(self.dtype)
        if blocks.is_block_kind(stored.kind):
            return blocks.dequantize(stored.data, stored.kind, self.shapes[name]).astype(self.dtype)
        return np.asarray(stored.data).astype(self.dtype)

    def float64(self, name: str) -> np.ndarray:
        """The weight `name` in float64 from its stored values, never rounded to the compute
        dtype first (a norm weight Gemma 3 shifts by 1 before it is a factor)."""
        stored = self._stored[name]
        if stored.kind == "float":
            return np.asarray(stored.data, dtype=np.float64)
        if stored.kind == "bf16":
            return q4nx.bf16_bits_to_f32(stored.data).astype(np.float64)
        return np.asarray(self.unpack(name), dtype=np.float64)

    def row_band(self, name: str, band: int) -> np.ndarray:
        """Rows `32 * band .. 32 * band + 31` of a 2-D weight (one Q4NX block row), in the
        compute dtype, prepared afresh: a big table can be read a band at a time."""
        stored = self._stored[name]
        rows, cols = self.shapes[name]
        if stored.kind == "q4nx":
            self.unpacks += 1
            block = q4nx.as_grid(stored.data, rows, cols)[band]
            return q4nx.dequantize(
                block, q4nx.BLOCK_ROWS, cols, convention=self.convention, dtype=self.dtype
            )
        part = stored.data[band * q4nx.BLOCK_ROWS : (band + 1) * q4nx.BLOCK_ROWS]
        if blocks.is_block_kind(stored.kind):
            shape = (part.shape[0], cols)
            return blocks.dequantize(part, stored.kind, shape).astype(self.dtype)
        if stored.kind == "bf16":
            return q4nx.bf16_bits_to_f32(part).astype(self.dtype)
        return np.asarray(part).astype(self.dtype)

    def packed(self, name: str):
        """The Q4NX weight `name` as a `PackedWeight`, the form the packed kernel reads (its
        blocks, copied into one contiguous array), prepared afresh: the caller (the backend)
        keeps it, or, in the per-token arm, builds it again for every product."""
        from onebit.models.q4nx_kernel import PackedWeight

        stored = self._stored[name]
        if stored.kind != "q4nx":
            raise ModelFileError(f"{stored.file}: tensor '{name}' is not stored as Q4NX blocks")
        self.unpacks += 1
        return PackedWeight.from_blocks(stored.data, self.shapes[name], self.convention)

    def block_weight(self, name: str) -> blocks.BlockWeight:
        """The block-kind weight `name` (q8_0 / q4_0 / q4_1, or Q4NX converted to q4_1 / q4_0)
        as the integer kernel reads it (int8_kernel.py), prepared afresh; the caller (the
        backend) keeps it."""
        stored = self._stored[name]
        if stored.kind == "q4nx":  # the same values in q4_1 / q4_0 blocks (blocks.py)
            return blocks.BlockWeight.from_q4nx(stored.data, self.shapes[name], self.convention,
                                                name=name, file=stored.file)
        if not blocks.is_block_kind(stored.kind):
            raise ModelFileError(f"{stored.file}: tensor '{name}' is not stored in ggml blocks "
                                 f"or Q4NX blocks")
        return blocks.BlockWeight.from_stored(stored.data, stored.kind, self.shapes[name])

    def block_kind(self, name: str) -> str | None:
        """The ggml block kind the integer kernel reads `name` as: its stored kind (q8_0 /
        q4_0 / q4_1), q4_1 / q4_0 for a Q4NX weight (unsigned / signed codes), else None."""
        kind = self._stored[name].kind
        if kind == "q4nx":
            return blocks.q4nx_block_kind(self.convention)
        return kind if blocks.is_block_kind(kind) else None

    def check_block_form(self) -> None:
        """Raise `ModelFileError` now, at load, for a Q4NX weight the integer kernel could not
        read as blocks (`blocks.q4nx_half_scales`), instead of at its first product."""
        for name in self.shapes:
            stored = self._stored[name]
            if stored.kind == "q4nx" and len(self.shapes[name]) == 2:
                blocks.q4nx_half_scales(stored.data, self.shapes[name], self.convention,
                                        name=name, file=stored.file)

    def embedding_row(self, token: int) -> np.ndarray:
        """One row of the embedding. A Q4NX embedding is never unpacked whole for this: unless
        its float form is cached already (a float-kernel lm_head tied to it), only the token's
        row is dequantised, bit for bit the row of the whole table's dequantisation."""
        name = "model.embed_tokens.weight"
        stored = self._stored[name]
        cached = self._cache.get(name)
        if blocks.is_block_kind(stored.kind) and cached is None:  # only the token's row
            hidden = self.shapes[name][1]
            row = stored.data[token : token + 1]
            return blocks.dequantize(row, stored.kind, (1, hidden))[0].astype(self.dtype)
        if stored.kind == "q4nx" and cached is None:
            vocab, hidden = self.shapes[name]
            if self.unpack_per_token:
                self.unpacks += 1
            return q4nx.dequantize_row(stored.data, vocab, hidden, token,
                                       convention=self.convention, dtype=self.dtype)
        return self.get(name)[token]

    def lm_head_name(self) -> str:
        """The weight the lm_head multiplies by: `lm_head.weight`, or the embedding if tied."""
        return "lm_head.weight" if "lm_head.weight" in self.shapes else "model.embed_tokens.weight"

    def lm_head(self) -> np.ndarray:
        return self.get(self.lm_head_name())


# ---------------------------------------------------------------------------------------------
# Loading a directory


def container_kind(path: Path) -> str:
    """ "q4nx" or "hf" for a model directory; `ModelFileError` when it is neither."""
    if not path.exists():
        raise ModelFileError(f"{path}: no such model directory")
    if not path.is_dir():
        raise ModelFileError(
            f"{path}: a model is a directory holding {CONFIG_FILE} and {Q4NX_FILE} or *.safetensors"
        )
    shards = sorted(p.name for p in path.glob("*.safetensors"))
    if (path / Q4NX_FILE).exists():
        if shards:
            raise ModelFileError(
                f"{path}: holds both {Q4NX_FILE} and {shards[0]}; a model directory holds one "
                "container, so which weights to load is ambiguous"
            )
        return "q4nx"
    if shards or (path / INDEX_FILE).exists():
        return "hf"
    raise ModelFileError(f"{path}: holds neither {Q4NX_FILE} nor any *.safetensors file")


def load_tensors(path: Path, kind: str) -> dict[str, Stored]:
    """Every tensor of the container in `path`, by its name in the file."""
    if kind == "q4nx":
        return read_safetensors(path / Q4NX_FILE, bf16_as_u16=True)
    if (path / INDEX_FILE).exists():
        return _load_indexed(path)
    tensors: dict[str, Stored] = {}
    for file in sorted(path.glob("*.safetensors")):
        for name, stored in read_safetensors(file).items():
            if name in tensors:
                raise ModelFileError(
                    f"tensor '{name}' is in both {tensors[name].file} and {file}; without "
                    f"{INDEX_FILE} nothing says which one to load"
                )
            tensors[name] = stored
    return tensors


def read_index(path: Path) -> dict[str, str]:
    """The `weight_map` of `path/model.safetensors.index.json`: tensor name -> shard file name
    (a plain name in the same directory)."""
    index = path / INDEX_FILE
    try:
        raw = json.loads(read_small(index))
    except (json.JSONDecodeError, RecursionError) as error:
        raise ModelFileError(f"{index}: not valid JSON: {error}") from None
    weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelFileError(f"{index}: needs a non-empty object 'weight_map' (tensor -> shard)")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or Path(shard).name != shard or shard in ("", ".", ".."):
            raise ModelFileError(
                f"{index}: weight_map['{name}'] is {shard!r:.60}; a shard is a file name in "
                "the model directory"
            )
    return weight_map


def _load_indexed(path: Path) -> dict[str, Stored]:
    """Exactly the shards the index lists, each holding exactly the tensors it maps there."""
    index = path / INDEX_FILE
    weight_map = read_index(path)
    shards = sorted(set(weight_map.values()))
    for stray in sorted(p.name for p in path.glob("*.safetensors")):
        if stray not in shards:
            raise ModelFileError(
                f"{path / stray}: a shard that {index} does not list; remove it or add it to "
                "the index"
            )
    tensors: dict[str, Stored] = {}
    for shard in shards:
        file = path / shard
        if not file.exists():
            raise ModelFileError(f"{index} lists shard {file}, which does not exist")
        for name, stored in read_safetensors(file).items():
            listed = weight_map.get(name)
            if listed != shard:
                where = "does not list it" if listed is None else f"puts it in {path / listed}"
                raise ModelFileError(f"{file} holds tensor '{name}', but {index} {where}")
            tensors[name] = stored
    for name, shard in weight_map.items():
        if name not in tensors:
            raise ModelFileError(f"{index} puts tensor '{name}' in {path / shard}, which does "
                                 "not hold it")
    return tensors


# ---------------------------------------------------------------------------------------------
# Writing


def write_q4nx(
    path: str | Path,
    config: ModelConfig,
    weights: dict[str, np.ndarray],
    *,
    convention: str = "unsigned",
    grid: bool = False,
    quantize: bool = True,
) -> Path:
    """Write a Q4NX container: every weight that tiles into blocks is quantised (when
    `quantize`), everything else is stored as bf16 bit patterns (uint16)."""
    from safetensors.numpy import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    out: dict[str, np.ndarray] = {}
    for name, value in weights.items():
        value = np.asarray(value)
        if quantize and name.endswith(".weight") and q4nx.can_quantize(value.shape):
            out[name] = q4nx.quantize(value, convention=convention, grid=grid)
        else:
            out[name] = q4nx.f32_to_bf16_bits(value)
    save_file(out, str(path / Q4NX_FILE), metadata={"format": "q4nx"})
    (path / CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=2))
    return path


def write_hf(path: str | Path, config: ModelConfig, weights: dict[str, np.ndarray]) -> Path:
    """Write a HuggingFace-layout checkpoint: config.json + model.safetensors (float32)."""
    from safetensors.numpy import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    out = {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in weights.items()}
    save_file(out, str(path / HF_FILE), metadata={"format": "np"})
    (path / CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=2))
    return path
