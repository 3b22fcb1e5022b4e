"""Reading a Gemma 4 config.json: what it resolves per layer, what it refuses with a named
error, and the files `onebit fabricate gemma4` writes."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from onebit.commands import fabricate
from onebit.models import (
    Gemma4Config,
    Gemma4Model,
    ModelConfigError,
    ModelFileError,
    ModelInputError,
    UnsupportedModelError,
    fabricate_model,
    load_model,
)

TEXT = dict(
    model_type="gemma4_text", vocab_size=256, hidden_size=256, intermediate_size=512,
    num_hidden_layers=5, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
    global_head_dim=128, sliding_window=8, hidden_size_per_layer_input=256,
    vocab_size_per_layer_input=256, num_kv_shared_layers=2,
    layer_types=["sliding_attention", "sliding_attention", "full_attention",
                 "sliding_attention", "full_attention"],
)


def test_layers_resolve_from_checkpoint_style_fields():
    """global_head_dim and (with attention_k_eq_v) num_global_key_value_heads apply to the
    global layers only; the last two layers read the K/V of the last earlier layer of their
    type; a double-wide MLP doubles only those shared layers; proportional RoPE rotates the
    first quarter of the pairs with exponents over the whole head."""
    config = Gemma4Config.from_dict({**TEXT, "attention_k_eq_v": True,
                                     "num_global_key_value_heads": 1,
                                     "use_double_wide_mlp": True})
    assert config.head_dims == (64, 64, 128, 64, 128)
    assert config.kv_heads == (2, 2, 1, 2, 1)
    assert config.kv_sources == (0, 1, 2, 1, 2)
    assert config.intermediate_sizes == (512, 512, 512, 1024, 1024)
    assert config.values_are_keys(2) and not config.values_are_keys(1)
    freq = config.inv_freq(2)  # global: D 128, partial 0.25 -> 16 of 64 pairs rotate
    assert len(freq) == 64 and all(f > 0 for f in freq[:16]) and not any(freq[16:])
    assert freq[1] == pytest.approx(1e6 ** (-2 / 128))
    assert config.inv_freq(0)[1] == pytest.approx(1e4 ** (-2 / 64))
    assert Gemma4Config.from_dict(config.to_dict()) == config  # round trip


def test_the_multimodal_wrapper_reads_its_text_config():
    """A "gemma4" config with only a text_config (no towers) is the text model."""
    config = Gemma4Config.from_dict({"model_type": "gemma4", "text_config": TEXT,
                                     "image_token_id": 5, "vision_config": None})
    assert config == Gemma4Config.from_dict(TEXT)


@pytest.mark.parametrize(("change", "named"), [
    ({"vision_config": {"hidden_size": 8}}, "vision_config"),
    ({"audio_config": {"hidden_size": 8}}, "audio_config"),
    ({"mystery_scale": 2.0}, "mystery_scale"),
])
def test_towers_and_unknown_wrapper_fields_are_refused(change, named):
    """A vision or audio tower, or an unknown field with a value on the wrapper, is refused
    with UnsupportedModelError naming the field."""
    with pytest.raises(UnsupportedModelError, match=named):
        Gemma4Config.from_dict({"model_type": "gemma4", "text_config": TEXT, **change})


@pytest.mark.parametrize(("change", "named"), [
    ({"enable_moe_block": True, "num_experts": 4}, "enable_moe_block"),
    ({"attention_bias": True}, "attention_bias"),
    ({"use_bidirectional_attention": "all"}, "use_bidirectional_attention"),
    ({"hidden_activation": "silu"}, "hidden_activation"),
    ({"attn_logit_softcapping": 50.0}, "attn_logit_softcapping"),
    ({"rope_parameters": {"sliding_attention": {"rope_type": "yarn", "rope_theta": 1e4},
                          "full_attention": {"rope_type": "default", "rope_theta": 1e6}}},
     "rope_type"),
    ({"per_layer_config": {"2": {"sliding_window": 4}}}, "sliding_window"),
    ({"layer_types": ["sliding_attention", "chunked_attention", "full_attention",
                      "sliding_attention", "full_attention"]}, "chunked_attention"),
])
def test_what_changes_the_math_and_is_not_implemented_is_refused(change, named):
    """MoE blocks, attention biases, bidirectional attention, another activation, an unknown
    math field (Gemma 2's attention soft-cap), another RoPE, a per-layer override other than
    the head shape, and an unknown layer type: each refused, naming what."""
    with pytest.raises(UnsupportedModelError, match=named):
        Gemma4Config.from_dict({**TEXT, **change})


@pytest.mark.parametrize(("change", "named"), [
    ({"layer_types": TEXT["layer_types"][:4] + ["sliding_attention"]}, "must be 'full_attention'"),
    ({"layer_types": ["full_attention", "sliding_attention", "full_attention",
                      "sliding_attention", "full_attention"], "num_kv_shared_layers": 4},
     "no earlier layer"),
    ({"num_kv_shared_layers": 5}, "num_kv_shared_layers"),
    ({"vocab_size_per_layer_input": 100}, "vocab_size_per_layer_input"),
    ({"hidden_size": 0}, "hidden_size"),
    ({"final_logit_softcapping": -1.0}, "final_logit_softcapping"),
    ({"head_dim": 63}, "head_dim"),
    ({"per_layer_config": {"2": {"head_dim": 128}, "4": {"head_dim": 64}}}, "reads the K/V"),
])
def test_inconsistent_configs_name_the_field(change, named):
    """A config that cannot describe a Gemma 4 (last layer sliding, a shared layer with no
    producer or with another head shape than its producer's, a PLE table smaller than the
    vocabulary, bad numbers) raises ModelConfigError naming the field."""
    with pytest.raises(ModelConfigError, match=named):
        Gemma4Config.from_dict({**TEXT, **change})


def test_inert_and_null_fields_are_accepted():
    """Bookkeeping fields, and unknown fields whose value is null or false, do not stop a
    model from loading."""
    config = Gemma4Config.from_dict({**TEXT, "architectures": ["Gemma4ForCausalLM"],
                                     "torch_dtype": "bfloat16", "some_future_flag": None,
                                     "other_flag": False})
    assert config.num_hidden_layers == 5


def test_missing_tensors_and_bad_tokens_are_named(tmp_path):
    """A checkpoint without a layer's PLE gate fails to load naming the tensor; a token
    outside the vocabulary is a ModelInputError naming it."""
    path = fabricate_model(tmp_path / "g", "gemma4", quantized=False)
    model = load_model(path)
    assert isinstance(model, Gemma4Model)
    with pytest.raises(ModelInputError, match="256"):
        model.step(256, 0)
    from safetensors.numpy import load_file, save_file

    tensors = load_file(path / "model.safetensors")
    del tensors["model.layers.3.per_layer_input_gate.weight"]
    save_file(tensors, path / "model.safetensors")
    with pytest.raises(ModelFileError, match="model.layers.3.per_layer_input_gate.weight"):
        load_model(path)


def run_cli(*argv):
    parser = argparse.ArgumentParser(prog="onebit")
    sub = parser.add_subparsers(dest="command", required=True)
    fabricate.add_parser(sub).set_defaults(_main=fabricate.main)
    args = parser.parse_args([str(a) for a in argv])
    return args._main(args)


def test_fabricate_gemma4_writes_both_containers(tmp_path, capsys):
    """`onebit fabricate gemma4 DIR [--float]` writes a Q4NX container or an HF checkpoint
    (model_type gemma4_text, with PLE, shared K/V and the window) that load_model reads back;
    --layers sizes it."""
    assert run_cli("fabricate", "gemma4", tmp_path / "q") == 0
    assert "5 layers, hidden 256, vocab 256" in capsys.readouterr().out
    assert run_cli("fabricate", "gemma4", tmp_path / "f", "--float", "--layers", 7) == 0
    config = json.loads((tmp_path / "f" / "config.json").read_text())
    assert config["model_type"] == "gemma4_text" and config["num_kv_shared_layers"] == 2
    assert (tmp_path / "q" / "model.q4nx").exists()
    assert (tmp_path / "f" / "model.safetensors").exists()
    q, f = load_model(tmp_path / "q"), load_model(tmp_path / "f")
    assert f.layer_count == 7 and f.config.kv_sources[-2:] == (2, 2)  # S S G S S G G
    assert np.isfinite(q.step(1, 0)).all()


def test_tiny_config_and_random_weights_know_gemma4():
    """`tiny_config("gemma4")` is the fabricated model's Gemma4Config (overrides by
    config.json name), and `random_weights` gives every tensor it expects, at its shape,
    with norms and layer scalars off 1."""
    from onebit.models import random_weights, tiny_config

    config = tiny_config("gemma4", num_hidden_layers=6)
    assert isinstance(config, Gemma4Config) and config.num_hidden_layers == 6
    weights = random_weights(config, seed=3)
    shapes = config.expected_shapes()
    assert {name: w.shape for name, w in weights.items()} == shapes
    assert not np.allclose(weights["model.layers.0.layer_scalar"], 1.0)
    assert not np.allclose(weights["model.norm.weight"], 1.0)


def test_a_text_only_multimodal_checkpoint_loads_as_the_text_model(tmp_path):
    """The multimodal layout (a "gemma4" config wrapping text_config, tensors named
    model.language_model.*) with no tower loads as the same text model: the same logits, bit
    for bit."""
    from safetensors.numpy import load_file, save_file

    text = fabricate_model(tmp_path / "text", "gemma4", quantized=False)
    wrapped = tmp_path / "wrapped"
    wrapped.mkdir()
    config = json.loads((text / "config.json").read_text())
    (wrapped / "config.json").write_text(json.dumps({
        "model_type": "gemma4", "text_config": config, "vision_config": None,
        "audio_config": None, "architectures": ["Gemma4ForConditionalGeneration"]}))
    tensors = load_file(text / "model.safetensors")
    save_file({name.replace("model.", "model.language_model.", 1): value
               for name, value in tensors.items()}, wrapped / "model.safetensors")
    a, b = load_model(text), load_model(wrapped)
    for pos, t in enumerate([3, 1, 4, 1, 5]):
        assert np.array_equal(a.step(t, pos), b.step(t, pos))
