"""The family registry: the one place `load_model`, `build_model` and `fabricate_model` find a
family. `build_model` (the entry for readers that are not directories, such as GGUF) builds
the same model, bit for bit, as `load_model` on the same config and tensors; an unknown
`model_type` is refused naming the value; a `.gguf` path goes to `onebit.gguf`."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from onebit.models import (
    ModelConfigError,
    ModelFileError,
    UnsupportedModelError,
    fabricate_model,
    load_model,
)
from onebit.models.config import read_config_json
from onebit.models.registry import FAMILY_NAMES, build_model, families, family_for
from onebit.models.weights import container_kind, load_tensors

TOKENS = [5, 17, 99, 3, 240, 17]


@pytest.mark.parametrize("kind", FAMILY_NAMES)
def test_build_model_equals_load_model(kind, tmp_path):
    """For every registered family, `build_model(config dict, tensors)` gives the model
    `load_model` gives from the directory holding them: the same logits, bit for bit."""
    path = fabricate_model(tmp_path / kind, kind, quantized=False)
    raw = read_config_json(path / "config.json")
    tensors = load_tensors(path, container_kind(path))
    built = build_model(raw, tensors, source="in memory", dtype="float64", kernel="numpy")
    loaded = load_model(path, dtype="float64", kernel="numpy")
    assert type(built) is type(loaded)
    for pos, token in enumerate(TOKENS):
        assert np.array_equal(built.step(token, pos), loaded.step(token, pos))


def test_every_model_type_has_one_family():
    """Each family's model_types are its own: no model_type maps to two families, and each
    family reads the config its own fabricator writes."""
    seen: dict[str, str] = {}
    for name, family in families().items():
        assert family.name == name
        for model_type in family.model_types:
            assert model_type not in seen, (model_type, seen.get(model_type), name)
            seen[model_type] = name
        config = family.tiny_config()
        assert family_for(config.to_dict()).name == name


def test_unknown_model_type_is_refused_by_name():
    """A config whose model_type no family reads is a ModelConfigError naming the value and
    the source."""
    with pytest.raises(ModelConfigError, match=r"src\.json: field 'model_type' is 'gpt2'"):
        build_model({"model_type": "gpt2"}, {}, source="src.json")


def test_missing_tensor_names_the_source(tmp_path):
    """A tensor the family needs and the reader did not hand over is a ModelFileError naming
    the tensor and the source."""
    path = fabricate_model(tmp_path / "m", "llama", quantized=False)
    tensors = load_tensors(path, container_kind(path))
    del tensors["model.norm.weight"]
    with pytest.raises(ModelFileError, match=r"x\.gguf: missing tensor 'model\.norm\.weight'"):
        build_model(read_config_json(path / "config.json"), tensors, source="x.gguf")


def test_gguf_without_its_reader_is_a_clear_error(monkeypatch, tmp_path):
    """With onebit.gguf unimportable, loading a .gguf file is an UnsupportedModelError naming
    the file, not an ImportError traceback."""
    monkeypatch.setitem(sys.modules, "onebit.gguf", None)
    with pytest.raises(UnsupportedModelError, match=r"m\.gguf: reading GGUF files needs"):
        load_model(tmp_path / "m.gguf")


def test_gguf_goes_to_load_gguf_with_every_option(monkeypatch, tmp_path):
    """A .gguf path (any case) is handed to onebit.gguf.load_gguf with load_model's options,
    the family's own keywords included."""
    calls = []
    reader = types.ModuleType("onebit.gguf")
    reader.load_gguf = lambda path, **options: calls.append((path, options)) or "model"
    monkeypatch.setitem(sys.modules, "onebit.gguf", reader)
    assert load_model(tmp_path / "m.GGUF", dtype="float64", max_batch_rows=4,
                      tokenizer=False) == "model"
    (path, options), = calls
    assert path == tmp_path / "m.GGUF"
    assert options["dtype"] == "float64" and options["max_batch_rows"] == 4
    assert options["tokenizer"] is False and options["kernel"] == "auto"
