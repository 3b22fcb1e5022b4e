"""Checkpoints are read exactly: shards by their index, no tensor twice, typed config fields,
finite weights, regular files only. Each bad case names the file, field or tensor."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import onebit
from onebit.models import ModelConfigError, ModelFileError, load_model, q4nx
from onebit.models.weights import INDEX_FILE, Q4NX_FILE

INDEX = INDEX_FILE


def shard(src: Path, dst: Path, parts: int = 2, index: bool = True) -> tuple[Path, dict]:
    """`src`'s HF checkpoint cut into `parts` shards (round robin), with an index unless told
    not to. Returns the directory and the weight map."""
    dst.mkdir()
    shutil.copy(src / "config.json", dst / "config.json")
    tensors = load_file(str(src / "model.safetensors"))
    names = sorted(tensors)
    weight_map = {}
    for i in range(parts):
        file = f"model-{i + 1:05d}-of-{parts:05d}.safetensors"
        mine = {n: tensors[n] for n in names[i::parts]}
        save_file(mine, str(dst / file))
        weight_map.update(dict.fromkeys(mine, file))
    if index:
        (dst / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return dst, weight_map


def same_text(a, b) -> bool:
    def text(model):
        return onebit.greedy(model, [1, 2], max_tokens=6).tokens

    return text(a) == text(b)


def test_sharded_checkpoint_with_index_loads_the_same_model(model_dirs, tmp_path):
    """A checkpoint cut into shards with an index loads the same weights, bit for bit, as the
    single file."""
    src = model_dirs["qwen3_5", "hf"]
    path, _ = shard(src, tmp_path / "sharded", parts=3)
    a, b = load_model(src), load_model(path)
    for name in a.weights.names():
        assert np.array_equal(a.weights.get(name), b.weights.get(name)), name
    assert same_text(a, b)


def test_index_missing_shard_names_index_and_shard(model_dirs, tmp_path):
    """A shard the index lists but the directory lacks is an error naming both."""
    path, _ = shard(model_dirs["qwen3", "hf"], tmp_path / "m")
    (path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ModelFileError, match=rf"{INDEX} lists shard .*model-00002-of-00002"
                       r"\.safetensors, which does not exist"):
        load_model(path)


def test_index_tensor_in_two_shards_names_both_files(model_dirs, tmp_path):
    """A tensor stored in a second shard besides the one the index names is an error naming
    the two files."""
    path, weight_map = shard(model_dirs["qwen3", "hf"], tmp_path / "m")
    second = path / "model-00002-of-00002.safetensors"
    extra = load_file(str(second))
    name = next(n for n, f in weight_map.items() if f.startswith("model-00001"))
    extra[name] = load_file(str(path / weight_map[name]))[name]
    save_file(extra, str(second))
    with pytest.raises(ModelFileError) as info:
        load_model(path)
    message = str(info.value)
    assert f"holds tensor '{name}'" in message
    assert "model-00001-of-00002" in message and "model-00002-of-00002" in message


def test_stray_shard_beside_an_index_is_refused(model_dirs, tmp_path):
    """A *.safetensors file the index does not list is refused by name, instead of being read
    (or silently skipped)."""
    path, _ = shard(model_dirs["qwen3", "hf"], tmp_path / "m")
    shutil.copy(path / "model-00001-of-00002.safetensors", path / "stray.safetensors")
    with pytest.raises(ModelFileError, match=rf"stray\.safetensors: a shard that .*{INDEX} "
                       "does not list"):
        load_model(path)


def test_index_naming_a_shard_that_lacks_the_tensor(model_dirs, tmp_path):
    """An index that puts a tensor in a shard that does not hold it names the tensor, the
    index and the shard."""
    path, weight_map = shard(model_dirs["qwen3", "hf"], tmp_path / "m")
    weight_map["model.norm.extra"] = "model-00001-of-00002.safetensors"
    (path / INDEX).write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(ModelFileError, match=r"puts tensor 'model.norm.extra' in .*"
                       r"model-00001-of-00002.safetensors, which does not hold it"):
        load_model(path)


@pytest.mark.parametrize("index", ["{", "[]", '{"weight_map": {}}', '{"weight_map": {"a": 3}}',
                                   '{"weight_map": {"a": "../x.safetensors"}}'])
def test_bad_index_file(model_dirs, tmp_path, index):
    """An index that is not JSON, has no weight map, or maps to something other than a file
    in the directory is refused naming the index."""
    path, _ = shard(model_dirs["qwen3", "hf"], tmp_path / "m")
    (path / INDEX).write_text(index)
    with pytest.raises(ModelFileError, match=INDEX):
        load_model(path)


def test_without_index_a_tensor_in_two_files_names_both(model_dirs, tmp_path):
    """Without an index, the same tensor in two *.safetensors files is an error naming both
    files, never last-file-wins."""
    path, weight_map = shard(model_dirs["qwen3", "hf"], tmp_path / "m", index=False)
    name = "model.norm.weight"
    tensors = load_file(str(path / weight_map[name]))
    save_file({name: tensors[name] * 2}, str(path / "zz-stray.safetensors"))
    with pytest.raises(ModelFileError, match=rf"tensor '{name}' is in both .*"
                       rf"{weight_map[name]} and .*zz-stray.safetensors"):
        load_model(path)


def test_a_tensor_stored_under_two_names(model_dirs, tmp_path):
    """The same weight under its plain name and its multimodal name is refused, naming both,
    instead of one silently replacing the other."""
    src = model_dirs["qwen3", "hf"]
    path = tmp_path / "twice"
    shutil.copytree(src, path)
    tensors = load_file(str(path / "model.safetensors"))
    tensors["model.language_model.norm.weight"] = tensors["model.norm.weight"] + 1
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(ModelFileError, match=r"tensor 'model.norm.weight' is stored twice: "
                       r"as '.*norm.weight' in .* and as '.*norm.weight' in"):
        load_model(path)


def test_q4nx_beside_safetensors_is_ambiguous(model_dirs, tmp_path):
    """A directory holding both containers is refused: nothing says which one is meant."""
    path = tmp_path / "both"
    shutil.copytree(model_dirs["qwen3", "q4nx"], path)
    shutil.copy(model_dirs["qwen3", "hf"] / "model.safetensors", path / "model.safetensors")
    with pytest.raises(ModelFileError, match=f"holds both {Q4NX_FILE} and model.safetensors"):
        load_model(path)


# -- config fields are typed --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tie_word_embeddings": "false"}, "field 'tie_word_embeddings' must be true or false, "
                                           "got 'false'"),
        ({"tie_word_embeddings": 0}, "field 'tie_word_embeddings' must be true or false"),
        ({"model_type": ["qwen3"]}, r"field 'model_type' is \['qwen3'\]"),
        ({"model_type": {"a": 1}}, "field 'model_type' is {'a': 1}"),
        ({"head_dim": 0}, "field 'head_dim' must be a positive integer, got 0"),
        ({"head_dim": 64.0}, "field 'head_dim' must be a positive integer, got 64.0"),
        ({"hidden_act": ["silu"]}, r"field 'hidden_act' is \['silu'\]"),
        ({"layer_types": [["full_attention"], "full_attention"]}, r"at layer_types\[0\]"),
        ({"layer_types": "full_attention"}, "field 'layer_types' must be a list"),
        ({"rope_parameters": [1]}, "field 'rope_parameters' must be an object"),
        ({"rope_parameters": {"rope_type": ["yarn"]}}, "rope_parameters.rope_type"),
        ({"num_key_value_heads": True}, "field 'num_key_value_heads' must be a positive"),
        ({"rms_norm_eps": float("nan")}, "field 'rms_norm_eps' must be a positive number"),
        ({"vocab_size": "x" * 500}, r"got 'xxxx.*\.\.\.$"),
    ],
)
def test_config_fields_are_typed(model_dirs, tmp_path, change, message):
    """A config value of the wrong JSON type is refused naming the field, never coerced (the
    string "false" is truthy in Python); long values are cut short in the message."""
    path = tmp_path / "cfg"
    shutil.copytree(model_dirs["qwen3", "hf"], path)
    config = json.loads((path / "config.json").read_text())
    config.update(change)
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelConfigError, match=message):
        load_model(path)


@pytest.mark.parametrize(("change", "message"), [
    ({"full_attention_interval": 0, "layer_types": None}, "field 'full_attention_interval'"),
    ({"text_config": [1]}, "field 'text_config' must be an object"),
])
def test_hybrid_config_fields_are_typed(model_dirs, tmp_path, change, message):
    """The Qwen3.5 fields too: an interval of 0 would divide by zero, a text_config that is no
    object would be silently skipped."""
    path = tmp_path / "cfg"
    shutil.copytree(model_dirs["qwen3_5", "hf"], path)
    config = json.loads((path / "config.json").read_text())
    config.update(change)
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelConfigError, match=message):
        load_model(path)


def test_config_that_is_not_utf8_or_too_deep_names_the_file(model_dirs, tmp_path):
    """A config.json in Latin-1 or nested past the parser's depth is a ModelConfigError
    naming the file."""
    path = tmp_path / "cfg"
    shutil.copytree(model_dirs["qwen3", "hf"], path)
    (path / "config.json").write_bytes('{"model_type": "qw\xe9n"}'.encode("latin-1"))
    with pytest.raises(ModelConfigError, match=r"config.json: not UTF-8 text \(byte 18 is 0xe9\)"):
        load_model(path)
    (path / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ModelConfigError, match="config.json: not valid JSON"):
        load_model(path)


# -- regular files only ------------------------------------------------------------------------


@pytest.fixture
def alarm():
    """Fail instead of hanging forever if a test blocks (a FIFO being opened)."""
    def hung(signum, frame):
        raise TimeoutError("blocked on a FIFO")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize("victim", ["config.json", "model.safetensors", INDEX])
def test_fifo_in_place_of_a_model_file_is_refused_at_once(model_dirs, tmp_path, alarm, victim):
    """A FIFO where a model file should be is refused naming it, without blocking."""
    path, _ = shard(model_dirs["qwen3", "hf"], tmp_path / "m", parts=1)
    if victim == "model.safetensors":
        target = path / "model-00001-of-00001.safetensors"
    else:
        target = path / victim
    target.unlink()
    os.mkfifo(target)
    with pytest.raises(ModelFileError, match=rf"{target.name}: is a FIFO; a model file must be "
                       "a regular file"):
        load_model(path)


def test_a_directory_in_place_of_config_json(model_dirs, tmp_path):
    """A directory named config.json is refused naming it (not an IsADirectoryError)."""
    path = tmp_path / "m"
    shutil.copytree(model_dirs["qwen3", "q4nx"], path)
    (path / "config.json").unlink()
    (path / "config.json").mkdir()
    with pytest.raises(ModelConfigError, match="config.json: is a directory"):
        load_model(path)


# -- finite weights --------------------------------------------------------------------------


def test_nan_row_in_a_float_checkpoint_names_the_tensor(model_dirs, tmp_path):
    """A NaN row in a float weight is refused at load, naming the tensor, the count and the
    first element."""
    path = tmp_path / "nan"
    shutil.copytree(model_dirs["qwen3", "hf"], path)
    tensors = load_file(str(path / "model.safetensors"))
    name = "model.layers.1.mlp.up_proj.weight"
    tensors[name][3] = np.nan
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(ModelFileError, match=rf"tensor '{name}' holds 256 non-finite value\(s\) "
                       r"\(first at \[3, 0\]: nan\)"):
        load_model(path)


def test_inf_a_log_in_a_q4nx_container_names_the_tensor(model_dirs, tmp_path):
    """`A_log = +inf` stored as bf16 in a Q4NX container is refused naming the tensor."""
    path = tmp_path / "inf"
    shutil.copytree(model_dirs["qwen3_5", "q4nx"], path)
    tensors = load_file(str(path / Q4NX_FILE))
    name = "model.layers.0.linear_attn.A_log"
    tensors[name] = tensors[name].copy()
    tensors[name][1] = q4nx.f32_to_bf16_bits(np.array([np.inf]))[0]
    save_file(tensors, str(path / Q4NX_FILE))
    with pytest.raises(ModelFileError, match=rf"tensor '{name}' holds 1 non-finite value\(s\) "
                       r"\(first at \[1\]: inf\)"):
        load_model(path)


@pytest.mark.parametrize("value", [np.nan, 3e38])
def test_bad_q4nx_scale_names_the_tensor_and_block(model_dirs, tmp_path, value):
    """A NaN scale, or one so large that min + 15 * scale overflows float32, in a Q4NX block is
    refused naming the tensor and the block."""
    path = tmp_path / "scale"
    shutil.copytree(model_dirs["qwen3", "q4nx"], path)
    tensors = load_file(str(path / Q4NX_FILE))
    name = "model.layers.0.mlp.down_proj.weight"
    blocks = tensors[name].copy()
    blocks[1, 0:2] = q4nx.f32_to_bf16_bits(np.array([value])).view(np.uint8)
    tensors[name] = blocks
    save_file(tensors, str(path / Q4NX_FILE))
    with pytest.raises(ModelFileError, match=rf"tensor '{name}' has a non-finite or "
                       r"overflowing scale or min in Q4NX block 1 \(1 bad block\(s\)\)"):
        load_model(path)


def test_float64_weight_past_float32_range(model_dirs, tmp_path):
    """A float64 weight finite in the file but past float32's range would be inf in the
    compute dtype: refused for float32, accepted for float64."""
    path = tmp_path / "big"
    shutil.copytree(model_dirs["qwen3", "hf"], path)
    stored = load_file(str(path / "model.safetensors"))
    tensors = {n: v.astype(np.float64) for n, v in stored.items()}
    tensors["model.norm.weight"][5] = 1e300
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(ModelFileError, match=r"'model.norm.weight' holds 1 non-finite value\(s\) "
                       r"\(first at \[5\]: 1e\+300\); a weight must be finite in float32"):
        load_model(path)
    assert load_model(path, dtype="float64").weights.get("model.norm.weight")[5] == 1e300
