"""`load_model("x.gguf")` on fabricated files of every architecture: the model it builds is the
one the family registry builds from the file's true weights (gguf's own decode, HF order), logit
for logit, and its decode is a valid greedy run."""

from __future__ import annotations

import numpy as np
import pytest

import onebit
from onebit.gguf import read_gguf
from onebit.gguf.fabricate import fabricate_gguf
from onebit.gguf.mapping import llama3_frequency_divisors
from onebit.models import load_model
from onebit.models.registry import build_model
from onebit.models.weights import Stored

CASES = {
    "llama": dict(arch="llama", matrix_type="Q4_1", embed_type="Q8_0"),
    "llama untied Q4_K": dict(arch="llama", matrix_type="Q4_K", hidden=256, ffn=256,
                              tied=False),
    "llama3": dict(arch="llama", matrix_type="Q8_0",
                   fields={"llama.rope.freq_base": 500000.0,
                           "llama.rope.scaling.original_context_length": 64},
                   extra_tensors={"rope_freqs.weight": llama3_frequency_divisors(
                       500000.0, 16, 8.0, 1.0, 4.0, 64)}),
    "qwen2": dict(arch="qwen2", matrix_type="Q5_0"),
    "qwen3": dict(arch="qwen3", matrix_type="Q6_K", hidden=256, ffn=256, heads=8,
                  head_dim=32),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gguf_model_is_the_reference_model(tmp_path, case):
    """Stepping the GGUF-loaded model gives exactly the logits of the model built from the
    reference weights with the same config; greedy decoding runs on it."""
    options = dict(CASES[case])
    arch = options.pop("arch")
    path = tmp_path / "m.gguf"
    reference = fabricate_gguf(path, arch, **options)
    model = load_model(path, dtype="float64", kernel="numpy")
    config = read_gguf(path).config
    if case == "llama3":
        assert config["rope_scaling"]["rope_type"] == "llama3"
    twin = build_model(config, {n: Stored(v, "float", "reference") for n, v in reference.items()},
                       source="reference", dtype="float64", kernel="numpy")
    for pos, token in enumerate([1, 5, 7, 2, 9]):
        assert np.array_equal(model.step(token, pos), twin.step(token, pos)), (case, pos)
    model.reset()
    assert len(onebit.greedy(model, [1, 2, 3], max_tokens=4).tokens) == 4


def test_context_length_comes_from_the_file(tmp_path):
    """A GGUF model knows its `<arch>.context_length` (256 in the fabricated file), which is the
    length `onebit.generate` bounds a prompt by (its refusal: tests/text/test_generate.py); a
    config without the field leaves the length unknown, and a nonsensical one is refused by
    name."""
    from onebit.models.errors import ModelConfigError
    from onebit.text.generate import context_length

    path = tmp_path / "m.gguf"
    reference = fabricate_gguf(path, "llama")
    model = load_model(path, kernel="numpy", tokenizer=False)
    assert model.context_length == 256
    assert context_length(model) == 256
    config = read_gguf(path).config
    tensors = {n: Stored(v, "float", "reference") for n, v in reference.items()}
    unknown = {k: v for k, v in config.items() if k != "max_position_embeddings"}
    assert build_model(unknown, tensors, source="r", kernel="numpy").context_length is None
    with pytest.raises(ModelConfigError, match="max_position_embeddings must be a positive"):
        build_model({**config, "max_position_embeddings": 0}, tensors, source="r",
                     kernel="numpy")
