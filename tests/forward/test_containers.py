"""Model directories: the Q4NX container and HF checkpoints load, and bad files fail clearly."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import onebit
from onebit.models import (
    ModelConfigError,
    ModelFileError,
    ModelInputError,
    fabricate_model,
    load_model,
    q4nx,
    random_weights,
    tiny_config,
)
from onebit.models.weights import Q4NX_FILE


def copy_dir(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def write_bf16_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A safetensors file whose uint16 tensors are declared BF16 (as torch writes bf16), built
    by hand since numpy has no bfloat16."""
    header, chunks, offset = {}, [], 0
    for name, value in tensors.items():
        raw = np.ascontiguousarray(value).tobytes()
        dtype = {"uint16": "BF16", "uint8": "U8", "float32": "F32"}[value.dtype.name]
        header[name] = {
            "dtype": dtype,
            "shape": list(value.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"".join(chunks))


def test_q4nx_container_holds_blocks_and_bf16(model_dirs, kind):
    """The fabricated container is a plain safetensors file: projections as uint8 Q4NX blocks
    [(out/32)*(in/256), 5120], norms as bf16 bit patterns; loading gives the dequantised
    weights and the bf16-rounded norms."""
    path = model_dirs[kind, "q4nx"]
    stored = load_file(str(path / Q4NX_FILE))
    config = tiny_config(kind)
    truth = random_weights(config)
    blocks = stored["model.layers.0.mlp.down_proj.weight"]
    assert blocks.dtype == np.uint8 and blocks.shape == (256 // 32 * 512 // 256, 5120)
    assert stored["model.norm.weight"].dtype == np.uint16
    model = load_model(path)
    name = "model.layers.0.mlp.down_proj.weight"
    assert np.array_equal(model.weights.get(name), q4nx.dequantize(blocks, 256, 512))
    assert np.abs(model.weights.get(name) - truth[name]).max() < 0.1
    assert np.array_equal(
        model.weights.get("model.norm.weight"), q4nx.round_bf16(truth["model.norm.weight"])
    )


def test_hf_checkpoint_loads_float_weights(model_dirs, kind):
    """A HF-layout directory (config.json + model.safetensors, float32, HF names) loads with
    the exact float weights, and decodes."""
    model = load_model(model_dirs[kind, "hf"])
    truth = random_weights(tiny_config(kind))
    for name in model.weights.names():
        assert np.array_equal(model.weights.get(name), truth[name]), name
    assert len(onebit.greedy(model, [1, 2], max_tokens=4).tokens) == 4


def test_grid_layout_and_bf16_dtype_load_identically(model_dirs, tmp_path):
    """Blocks stored as a grid [out/32, in/256, 5120] and norms stored with safetensors' BF16
    dtype give the same model, bit for bit, as the flat / uint16 form."""
    flat = model_dirs["qwen3_5", "q4nx"]
    other = copy_dir(flat, tmp_path / "grid")
    config = tiny_config("qwen3_5")
    stored = load_file(str(flat / Q4NX_FILE))
    shapes = onebit.models.weights.expected_shapes(config)
    regridded = {
        name: value.reshape(q4nx.blocks_shape(*shapes[name], grid=True))
        if value.dtype == np.uint8
        else value
        for name, value in stored.items()
    }
    write_bf16_safetensors(other / Q4NX_FILE, regridded)
    a, b = load_model(flat), load_model(other)
    assert b.weights.kind("model.norm.weight") == "bf16"
    for name in a.weights.names():
        assert np.array_equal(a.weights.get(name), b.weights.get(name)), name
    assert_tokens = onebit.greedy(a, [3], max_tokens=5).tokens
    assert onebit.greedy(b, [3], max_tokens=5).tokens == assert_tokens


def test_signed_convention_is_a_parameter(tmp_path):
    """A container written with signed (GGUF Q4_0 style) codes loads right with
    q4nx_convention='signed' and differently with the default: the file does not say."""
    path = fabricate_model(tmp_path / "signed", "qwen3", convention="signed")
    right = load_model(path, q4nx_convention="signed")
    wrong = load_model(path)
    truth = random_weights(tiny_config("qwen3"))
    name = "model.layers.1.self_attn.q_proj.weight"
    assert np.abs(right.weights.get(name) - truth[name]).max() < 0.1
    assert np.abs(wrong.weights.get(name) - truth[name]).max() > 0.5
    with pytest.raises(ValueError, match="convention"):
        load_model(path, q4nx_convention="gguf")


def test_multimodal_naming_and_nested_text_config(model_dirs, tmp_path):
    """A Qwen3.5 checkpoint as the multimodal release names it (model.language_model.*,
    text settings under text_config, extra vision / MTP tensors) loads as the text model."""
    src = model_dirs["qwen3_5", "hf"]
    path = tmp_path / "mm"
    path.mkdir()
    tensors = load_file(str(src / "model.safetensors"))
    renamed = {
        n.replace("model.", "model.language_model.", 1) if n.startswith("model.") else n: v
        for n, v in tensors.items()
    }
    renamed["model.visual.patch_embed.proj.weight"] = np.zeros((4, 4), np.float32)
    renamed["mtp.fc.weight"] = np.zeros((4, 4), np.float32)
    save_file(renamed, str(path / "model.safetensors"))
    text = json.loads((src / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({"model_type": "qwen3_5", "text_config": text}))
    a, b = load_model(src), load_model(path)
    assert b.config == a.config
    assert onebit.greedy(b, [1], max_tokens=5).tokens == onebit.greedy(a, [1], max_tokens=5).tokens


# -- bad input --------------------------------------------------------------------------------


def test_missing_and_unreadable_directories(tmp_path):
    """A path that does not exist, a directory without weights, and a directory without
    config.json each raise ModelFileError naming the path."""
    with pytest.raises(ModelFileError, match="no such model directory"):
        load_model(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelFileError, match="neither model.q4nx nor"):
        load_model(tmp_path / "empty")
    fabricate_model(tmp_path / "noconfig", "qwen3")
    (tmp_path / "noconfig" / "config.json").unlink()
    with pytest.raises(ModelConfigError, match="config.json: no such file"):
        load_model(tmp_path / "noconfig")


@pytest.mark.parametrize("cut", [3, 5000, -7])
def test_truncated_or_corrupt_file(model_dirs, tmp_path, cut):
    """model.q4nx cut short (in the header, in the data) raises ModelFileError naming the
    file, never a crash or a silently short tensor."""
    path = copy_dir(model_dirs["qwen3", "q4nx"], tmp_path / "cut")
    data = (path / Q4NX_FILE).read_bytes()
    (path / Q4NX_FILE).write_bytes(data[:cut])
    with pytest.raises(ModelFileError, match="model.q4nx"):
        load_model(path)


def test_garbage_header(model_dirs, tmp_path):
    """Random bytes where the safetensors header should be raise ModelFileError."""
    path = copy_dir(model_dirs["qwen3", "q4nx"], tmp_path / "junk")
    data = bytearray((path / Q4NX_FILE).read_bytes())
    data[8:40] = b"\xff" * 32
    (path / Q4NX_FILE).write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="model.q4nx"):
        load_model(path)


def test_missing_tensor_is_named(model_dirs, tmp_path):
    """A tensor the config needs that the file lacks is named in the error."""
    path = copy_dir(model_dirs["qwen3_5", "q4nx"], tmp_path / "missing")
    tensors = load_file(str(path / Q4NX_FILE))
    del tensors["model.layers.1.linear_attn.A_log"]
    save_file(tensors, str(path / Q4NX_FILE))
    with pytest.raises(ModelFileError, match=r"missing tensor 'model.layers.1.linear_attn.A_log'"):
        load_model(path)


def test_shape_not_matching_config(model_dirs, tmp_path):
    """A config that disagrees with the tensors (intermediate_size) names the tensor and both
    shapes; Q4NX blocks of the wrong count are caught the same way."""
    path = copy_dir(model_dirs["qwen3", "hf"], tmp_path / "shape")
    config = json.loads((path / "config.json").read_text())
    config["intermediate_size"] = 768
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match=r"mlp.gate_proj.weight' has shape \(512, 256\)"):
        load_model(path)
    path = copy_dir(model_dirs["qwen3", "q4nx"], tmp_path / "shape-q4")
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match="mlp.gate_proj.weight"):
        load_model(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"layer_types": ["linear_attention", "mamba", "full_attention"]},
            r"unknown layer type 'mamba' at layer_types\[1\]",
        ),
        ({"layer_types": ["full_attention"]}, "field 'layer_types' has 1 entries"),
        ({"num_key_value_heads": 3}, "field 'num_key_value_heads'"),
        ({"hidden_size": -4}, "field 'hidden_size' must be a positive integer"),
        ({"model_type": "gpt2"}, "field 'model_type' is 'gpt2'"),
        ({"vocab_size": None}, "missing field 'vocab_size'"),
        ({"rms_norm_eps": "tiny"}, "field 'rms_norm_eps'"),
        ({"linear_num_key_heads": 3}, "field 'linear_num_key_heads'"),
    ],
)
def test_bad_config_names_the_field(model_dirs, tmp_path, change, message):
    """Each bad config.json value raises ModelConfigError naming the field (or value)."""
    path = copy_dir(model_dirs["qwen3_5", "hf"], tmp_path / "cfg")
    config = json.loads((path / "config.json").read_text())
    config.update(change)
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelConfigError, match=message):
        load_model(path)


def test_config_not_json(model_dirs, tmp_path):
    """A config.json that is not JSON raises ModelConfigError naming the file."""
    path = copy_dir(model_dirs["qwen3", "hf"], tmp_path / "badjson")
    (path / "config.json").write_text("{not json")
    with pytest.raises(ModelConfigError, match="config.json: not valid JSON"):
        load_model(path)


def test_bad_calls_into_the_model(q4_model):
    """A token id past the vocabulary, a position other than the committed length, a batch
    over max_prefill_rows (the wider of the two widths), commit_verify without a batch, and a
    bad layer tap each raise ModelInputError (a ValueError) naming the value."""
    with pytest.raises(ModelInputError, match="token id 256 is outside the vocabulary"):
        q4_model.step(256, 0)
    with pytest.raises(ModelInputError, match="token id -1"):
        q4_model.verify([1, -1], 0)
    with pytest.raises(ModelInputError, match="position 3, but 0 tokens are committed"):
        q4_model.step(1, 3)
    widest = q4_model.max_prefill_rows()
    with pytest.raises(ModelInputError, match=f"{widest + 1} rows"):
        q4_model.verify([1] * (widest + 1), 0)
    with pytest.raises(ModelInputError, match="no verify batch pending"):
        q4_model.commit_verify(1)
    q4_model.verify([1, 2], 0)
    with pytest.raises(ModelInputError, match=r"commit_verify\(3\) on a batch of 2"):
        q4_model.commit_verify(3)
    with pytest.raises(ModelInputError, match="layer tap 99"):
        q4_model.set_layer_taps([0, 99])
    with pytest.raises(ModelInputError, match="token id 300"):
        q4_model.embed_row(300)
    assert issubclass(ModelInputError, ValueError) and issubclass(ModelFileError, ValueError)


def test_bad_load_options(model_dirs):
    """Unknown dtype / kernel names and a max_batch_rows below 1 are refused."""
    path = model_dirs["qwen3", "q4nx"]
    with pytest.raises(ValueError, match="dtype"):
        load_model(path, dtype="float16")
    with pytest.raises(ValueError, match="kernel"):
        load_model(path, kernel="cuda")
    with pytest.raises(ValueError, match="max_batch_rows"):
        load_model(path, max_batch_rows=0)
    assert load_model(path, max_batch_rows=1).max_batch_rows() == 1


def test_fabrication_is_seeded(tmp_path):
    """The same seed writes the same bytes; another seed writes another model."""
    a = fabricate_model(tmp_path / "a", "qwen3_5", seed=5)
    b = fabricate_model(tmp_path / "b", "qwen3_5", seed=5)
    c = fabricate_model(tmp_path / "c", "qwen3_5", seed=6)
    assert (a / Q4NX_FILE).read_bytes() == (b / Q4NX_FILE).read_bytes()
    assert (a / Q4NX_FILE).read_bytes() != (c / Q4NX_FILE).read_bytes()


def test_config_round_trips_through_config_json(kind):
    """A family's config.to_dict() is a config.json that its reader reads back to the same
    config."""
    config = tiny_config(kind)
    family = onebit.models.family_named(kind)
    assert family.read_config(config.to_dict(), "config.json") == config
