"""Reading fabricated GGUF files: the config and tensors each architecture maps to, and every
kind of bad file refused by name with a typed error before anything large is allocated."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from ggufbytes import key_at, put, tensor_at

from onebit.gguf import (
    GGUFConfigError,
    GGUFError,
    GGUFTokenizerError,
    UnsupportedGGUFError,
    load_gguf,
    read_gguf,
)
from onebit.gguf.fabricate import fabricate_gguf, permute
from onebit.gguf.mapping import llama3_frequency_divisors, unpermute
from onebit.models import ModelConfigError, ModelFileError, UnsupportedModelError

ARCHS = {"llama": {}, "qwen2": {}, "qwen3": {"head_dim": 32}}


@pytest.fixture
def made(tmp_path):
    """`made(arch, **options)` -> (path, reference float32 weights by HF name)."""
    def make(arch="llama", **options):
        path = tmp_path / f"{arch}.gguf"
        return path, fabricate_gguf(path, arch, **{**ARCHS[arch], **options})
    return make


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_config_per_architecture(made, arch):
    """Each architecture's metadata becomes the HF config transformers would write for it."""
    path, _ = made(arch, layers=3, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=80)
    config = read_gguf(path).config
    assert config["model_type"] == arch
    assert (config["num_hidden_layers"], config["hidden_size"], config["intermediate_size"],
            config["num_attention_heads"], config["num_key_value_heads"],
            config["vocab_size"]) == (3, 64, 96, 4, 2, 80)
    assert config["head_dim"] == (32 if arch == "qwen3" else 16)
    assert config["tie_word_embeddings"] is True and "rope_scaling" not in config
    assert math.isclose(config["rms_norm_eps"], 1e-5, rel_tol=1e-6)


@pytest.mark.parametrize("arch", sorted(ARCHS))
@pytest.mark.parametrize("tied", [True, False])
def test_tensors_equal_reference(made, arch, tied):
    """Every tensor comes back under its HF name with the values gguf's own decoder gives, in HF
    row order (llama's q/k unpermuted), and an untied file keeps its lm_head."""
    path, reference = made(arch, matrix_type="Q4_1", embed_type="Q8_0", tied=tied)
    contents = read_gguf(path)
    assert set(contents.tensors) == set(reference)
    assert ("lm_head.weight" in contents.tensors) is not tied
    assert contents.config["tie_word_embeddings"] is tied
    for name, values in reference.items():
        assert np.array_equal(contents.tensors[name].data, values), name
    assert contents.types["model.layers.0.mlp.up_proj.weight"] == "Q4_1"
    assert contents.types["model.embed_tokens.weight"] == "Q8_0"


def test_unpermute_inverts_llama_cpp_order():
    """unpermute undoes the converter's row order (pairs interleaved per head), and is not the
    identity: a missing unpermute would be caught."""
    rows = np.arange(4 * 8 * 3).reshape(32, 3)
    shuffled = permute(rows, 4)
    assert not np.array_equal(shuffled, rows)
    assert np.array_equal(unpermute(shuffled, 4), rows)
    assert shuffled[1, 0] == rows[4, 0]  # row 1 of a head is the second half's first row


def test_metadata_is_plain(made):
    """The metadata dict holds Python str / int / float / bool / list, not numpy values."""
    path, _ = made("llama", fields={"tokenizer.ggml.add_bos_token": True,
                                    "tokenizer.ggml.tokens": ["a", "b"]})
    metadata = read_gguf(path).metadata
    assert metadata["general.architecture"] == "llama"
    assert metadata["llama.block_count"] == 2 and type(metadata["llama.block_count"]) is int
    assert metadata["tokenizer.ggml.add_bos_token"] is True
    assert metadata["tokenizer.ggml.tokens"] == ["a", "b"]
    assert type(metadata["llama.rope.freq_base"]) is float


def test_llama3_rope_scaling(made):
    """A llama3 file's rope_freqs tensor becomes HF's llama3 rope_scaling, which reproduces
    the divisors; a tensor that fits no llama3 rule is refused by name."""
    divisors = llama3_frequency_divisors(500000.0, 16, 8.0, 1.0, 4.0, 64)
    assert divisors.min() == 1.0 and divisors.max() == 8.0 and len(set(divisors)) > 2
    path, _ = made("llama", fields={"llama.rope.freq_base": 500000.0,
                                    "llama.rope.scaling.original_context_length": 64},
                   extra_tensors={"rope_freqs.weight": divisors})
    scaling = read_gguf(path).config["rope_scaling"]
    assert scaling == {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    path, _ = made("llama", extra_tensors={"rope_freqs.weight": divisors[::-1].copy()})
    with pytest.raises(UnsupportedGGUFError, match="rope_freqs.weight"):
        read_gguf(path)


def test_linear_rope_scaling(made):
    """`rope.scaling.type` linear maps to HF's linear rope_scaling with its factor."""
    path, _ = made("llama", fields={"llama.rope.scaling.type": "linear",
                                    "llama.rope.scaling.factor": 4.0})
    assert read_gguf(path).config["rope_scaling"] == {"rope_type": "linear", "factor": 4.0}


def test_errors_are_the_models_errors():
    """The GGUF errors are the models' errors, so callers catching those catch these."""
    assert issubclass(GGUFError, ModelFileError)
    assert issubclass(GGUFConfigError, ModelConfigError)
    assert issubclass(UnsupportedGGUFError, UnsupportedModelError)
    assert issubclass(GGUFTokenizerError, GGUFConfigError)


# ---------------------------------------------------------------------------------------------
# Refusals, each naming the culprit


def damaged(made, tmp_path, edit, **options):
    path, _ = made("llama", **options)
    out = tmp_path / "damaged.gguf"
    out.write_bytes(edit(path.read_bytes()))
    return out


REFUSALS = {
    "magic": (lambda b: b"GGUX" + b[4:], GGUFError, "not a GGUF file"),
    "version 1": (lambda b: put(b, 4, "<I", 1), GGUFError, "version 1"),
    "version 4": (lambda b: put(b, 4, "<I", 4), GGUFError, "version 4"),
    "big-endian": (lambda b: put(b, 4, ">I", 3), GGUFError, "big-endian"),
    "truncated header": (lambda b: b[:200], GGUFError, "truncated|more than the"),
    "truncated data": (lambda b: b[:-100], GGUFError, "runs past the end"),
    "empty": (lambda b: b"", GGUFError, "truncated"),
    "tensor count": (lambda b: put(b, 8, "<Q", 2**62), GGUFError, "tensor count"),
    "kv count": (lambda b: put(b, 16, "<Q", 2**40), GGUFError, "key/value count"),
    "string length": (lambda b: put(b, key_at(b, "general.name") + 4, "<Q", 2**60), GGUFError,
                      "general.name"),
    "value type": (lambda b: put(b, key_at(b, "general.name"), "<I", 77), GGUFError,
                   "unknown value type 77"),
    "dims": (lambda b: put(b, tensor_at(b, "token_embd.weight")["dims"], "<QQ", 2**32, 2**32),
             GGUFError, "token_embd.weight"),
    "n_dims": (lambda b: put(b, tensor_at(b, "output_norm.weight")["n_dims"], "<I", 9),
               GGUFError, "9 dimensions"),
    "offset": (lambda b: put(b, tensor_at(b, "output_norm.weight")["offset"], "<Q", 2**40),
               GGUFError, "output_norm.weight.*runs past"),
    "misaligned": (lambda b: put(b, tensor_at(b, "output_norm.weight")["offset"], "<Q", 4),
                   GGUFError, "alignment"),
    "unknown type": (lambda b: put(b, tensor_at(b, "blk.0.ffn_up.weight")["type"], "<I", 4242),
                     UnsupportedGGUFError, "ffn_up.*unknown type 4242"),
    "unsupported type": (lambda b: put(b, tensor_at(b, "blk.0.ffn_up.weight")["type"], "<I", 10),
                         UnsupportedGGUFError, "ffn_up.*Q2_K"),
    "architecture": (lambda b: b.replace(b"\x05\x00\x00\x00\x00\x00\x00\x00llama",
                                         b"\x05\x00\x00\x00\x00\x00\x00\x00gemma", 1),
                     UnsupportedGGUFError, "'gemma' is not supported"),
    "duplicate tensor": (lambda b: b.replace(b"blk.0.attn_k.weight", b"blk.0.attn_q.weight"),
                         GGUFError, "'blk.0.attn_q.weight' appears twice"),
    "duplicate key": (lambda b: b.replace(b"general.name", b"general.type", 1),
                      GGUFError, "'general.type' appears twice"),
}


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_damaged_file_refused(made, tmp_path, kind):
    """Each kind of damage ends in its typed error naming the file and the culprit."""
    edit, error, pattern = REFUSALS[kind]
    path = damaged(made, tmp_path, edit, fields={"general.type": "model"})
    with pytest.raises(error, match=pattern) as caught:
        read_gguf(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("fields, tensors, error, pattern", [
    ({"llama.expert_count": 8}, None, UnsupportedGGUFError, "'llama.expert_count'"),
    ({"split.count": 2}, None, UnsupportedGGUFError, "'split.count'"),
    ({"llama.block_count": None}, None, GGUFConfigError, "missing metadata 'llama.block_count'"),
    ({"llama.block_count": 3}, None, GGUFConfigError, "missing tensor 'blk.2.attn_norm.weight'"),
    ({"llama.block_count": 1}, None, GGUFConfigError, "blk.1.*1 blocks"),
    ({"llama.embedding_length": 32}, None, GGUFConfigError, "token_embd.weight.*shape"),
    ({"llama.rope.scaling.type": "yarn"}, None, UnsupportedGGUFError, "yarn"),
    ({"llama.rope.dimension_count": 8}, None, UnsupportedGGUFError, "partial rotary"),
    ({"llama.attention.head_count": "4"}, None, GGUFConfigError, "head_count"),
    ({}, {"blk.0.ffn_gate_exps.weight": np.ones(4)}, UnsupportedGGUFError,
     "'blk.0.ffn_gate_exps.weight' is not one"),
    ({}, {"blk.0.attn_q.bias": np.ones(64)}, UnsupportedGGUFError, "'blk.0.attn_q.bias'"),
])
def test_wrong_model_refused(made, fields, tensors, error, pattern):
    """A well-formed file asking for a field, tensor or value onebit does not run is refused by
    name, not loaded wrong."""
    path, _ = made("llama", fields=fields, extra_tensors=tensors)
    with pytest.raises(error, match=pattern):
        read_gguf(path)


def test_zero_experts_is_dense(made):
    """`expert_count` 0 (written by some converters for a dense model) is accepted; any other
    value is refused above."""
    path, _ = made("llama", fields={"llama.expert_count": 0, "llama.expert_used_count": 0})
    assert read_gguf(path).config["num_hidden_layers"] == 2


def test_missing_tokenizer_refused_when_asked(made):
    """Asking for a tokenizer from a file without tokenizer metadata names the missing key;
    without asking, the file loads and carries no tokenizer."""
    path, _ = made("qwen3")
    with pytest.raises(GGUFTokenizerError, match="tokenizer.ggml.model"):
        load_gguf(path, tokenizer=True, kernel="numpy")
    assert not hasattr(load_gguf(path, kernel="numpy"), "tokenizer")


def test_not_a_regular_file(tmp_path):
    """A directory or a missing path is refused by name, never opened as a file."""
    with pytest.raises(GGUFError, match="no such file"):
        read_gguf(tmp_path / "absent.gguf")
    with pytest.raises(GGUFError, match="directory"):
        read_gguf(tmp_path)


def test_header_walk_bounds_arrays(made, tmp_path):
    """An array whose length cannot fit in the file is refused by the header walk, before
    gguf's reader (which would loop over it) is called."""
    path, _ = made("llama", fields={"general.tags": ["x", "y"]})
    blob = path.read_bytes()
    at = key_at(blob, "general.tags") + 4 + 4  # type u32, element type u32, then the length
    out = tmp_path / "long-array.gguf"
    out.write_bytes(put(blob, at, "<Q", 2**50))
    with pytest.raises(GGUFError, match="general.tags"):
        read_gguf(out)
    assert struct.unpack_from("<Q", blob, at)[0] == 2


def test_plain_view_reader_reads_what_gguf_reads(made):
    """The reader onebit uses (gguf's, over a plain view of its memory map, for speed) yields
    the same metadata values and the same tensor bytes as `gguf.GGUFReader` itself."""
    from gguf import GGUFReader

    from onebit.gguf.reader import _reader_class

    path, _ = made("llama", vocab=300)
    theirs, ours = GGUFReader(path), _reader_class()(path)
    assert not isinstance(ours.data, np.memmap)
    assert list(ours.fields) == list(theirs.fields)
    for key, field in theirs.fields.items():
        assert repr(ours.fields[key].contents()) == repr(field.contents()), key
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for mine, real in zip(ours.tensors, theirs.tensors, strict=True):
        assert mine.data_offset == real.data_offset
        assert np.array_equal(np.asarray(mine.data), np.asarray(real.data)), mine.name


def _fields(reader) -> dict:
    """Every field as gguf's reader models it: types, each part's dtype, shape and bytes, the
    data indices and the offset; and what `contents()` makes of it."""
    return {key: (field.types, [(p.dtype.str, p.shape, p.tobytes()) for p in field.parts],
                  list(field.data), field.offset, repr(field.contents()))
            for key, field in reader.fields.items()}


def _reference_reader():
    """The reader with gguf's own element-by-element field parse put back (it keeps the plain
    view of the map, so reading SmolLM2 this way takes seconds, not the memmap's eight)."""
    import gguf

    from onebit.gguf.reader import _reader_class

    class Reference(_reader_class()):
        _get_field_parts = gguf.GGUFReader._get_field_parts

    return Reference


def test_arrays_read_in_one_pass_are_what_gguf_reads(tmp_path):
    """The reader's one-pass parse of string and scalar arrays gives, field for field, the
    parts, data indices, types and contents gguf's own element-by-element parse gives: on
    arrays of every scalar type, of strings (empty and multi-byte ones among them), an empty
    array and an array of arrays (left to gguf)."""
    import gguf

    from onebit.gguf.reader import _reader_class

    path = tmp_path / "arrays.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_array("t.strings", ["", "a", "héllo", "日本", "\n\t", "x" * 300])
    writer.add_array("t.empty", [])
    writer.add_array("t.nested", [[1, 2], [3]])
    t = gguf.GGUFValueType
    for name, values, vtype in [
        ("t.u8", [0, 255], t.UINT8), ("t.i8", [-128, 1], t.INT8), ("t.u16", [1, 65535], t.UINT16),
        ("t.i16", [-2, 3], t.INT16), ("t.u32", [7, 2**32 - 1], t.UINT32),
        ("t.i32", [-5, 6, 7], t.INT32), ("t.f32", [0.5, -1.25], t.FLOAT32),
        ("t.u64", [2**63], t.UINT64), ("t.i64", [-(2**40)], t.INT64),
        ("t.f64", [1e-300], t.FLOAT64), ("t.bool", [True, False], t.BOOL),
    ]:
        writer.add_key_value(name, values, t.ARRAY, sub_type=vtype)
    writer.add_string("t.one", "plain")
    writer.add_uint32("t.scalar", 9)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    ours, reference = _fields(_reader_class()(path)), _fields(_reference_reader()(path))
    assert ours == reference
    assert ours["t.strings"][4] == repr(["", "a", "héllo", "日本", "\n\t", "x" * 300])


@pytest.mark.slow  # gguf's own parse of a 49k-token vocabulary: a few seconds
def test_smollm2_fields_read_in_one_pass_are_what_gguf_reads(smollm2):
    """The same on SmolLM2's file: its tokens, scores, token types and merges."""
    from onebit.gguf.reader import _reader_class

    assert _fields(_reader_class()(smollm2)) == _fields(_reference_reader()(smollm2))
