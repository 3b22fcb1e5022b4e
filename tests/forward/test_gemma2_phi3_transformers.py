"""Cross-check of the gemma2 and phi3 GGUF paths against transformers' own Gemma2ForCausalLM
and Phi3ForCausalLM (CPU torch, the `peer` extra), in float64. transformers' GGUF loader
reads neither family's soft-capping nor Phi-3's window from a file (its GGUF_CONFIG_MAPPING
has no such keys, so it would run its defaults), so it is given the same model as a
config.json + safetensors checkpoint instead: the config onebit maps the GGUF file to and the
weights gguf's own dequantiser decodes from it (HF names and layout: Gemma's norms as w,
Phi-3's qkv_proj and gate_up_proj fused). onebit runs the GGUF file itself; reading the
checkpoint directory gives onebit the same logits too; the tiny models `onebit fabricate`
writes in transformers' layout are held to it as well (the config.json path). transformers
computes its RMSNorms in float32 even in a float64 model, hence a bound of 1e-6 of the logit
range, not float64 precision."""

from __future__ import annotations

import json

import numpy as np
import pytest
from peer_modules import lazy

from onebit.gguf import read_gguf
from onebit.gguf.fabricate import fabricate_gguf
from onebit.models import load_model

transformers = lazy("transformers")
torch = lazy("torch")

TOKENS = [(29 * i + 3) % 80 for i in range(12)]
SIZES = dict(layers=4, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=80)
CASES = {
    "gemma2": dict(fields={"gemma2.attn_logit_softcapping": 5.0,
                           "gemma2.final_logit_softcapping": 20.0}, head_dim=16),
    "phi3": dict(fields={"phi3.attention.sliding_window": 0}, tied=False),
}


def _checkpoint(tmp_path, arch):
    """(the GGUF file, a checkpoint directory holding the same model in HF's form)."""
    from safetensors.numpy import save_file

    path = tmp_path / f"{arch}.gguf"
    weights = fabricate_gguf(path, arch, **SIZES, **CASES[arch])
    folder = tmp_path / arch
    folder.mkdir()
    # transformers' Phi3Config defaults its pad / eos ids to 32000, past this vocabulary
    config = {**read_gguf(path).config, "pad_token_id": None, "eos_token_id": None}
    (folder / "config.json").write_text(json.dumps(config))
    save_file({name: np.ascontiguousarray(value, dtype=np.float32)
               for name, value in weights.items()}, str(folder / "model.safetensors"))
    return path, folder


def _theirs(folder, **overrides) -> np.ndarray:
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float64, attn_implementation="eager", **overrides).eval()
    with torch.no_grad():
        return model(torch.tensor([TOKENS])).logits[0].numpy()


@pytest.mark.parametrize("arch", ["gemma2", "phi3"])
def test_logits_equal_transformers(tmp_path, arch):
    """onebit's float64 logits from the GGUF file equal transformers' within 1e-6 of the logit
    range at all 12 positions (past gemma2's window of 4, twice), and onebit reading the
    checkpoint directory agrees with both; for gemma2, transformers without attention
    soft-capping does not (the bound has teeth where Gemma 2 differs from Gemma 3)."""
    path, folder = _checkpoint(tmp_path, arch)
    model = load_model(path, dtype="float64", kernel="numpy")
    ours = np.stack([model.step(t, p) for p, t in enumerate(TOKENS)])
    model = load_model(folder, dtype="float64", kernel="numpy")
    from_dir = np.stack([model.step(t, p) for p, t in enumerate(TOKENS)])
    want = _theirs(folder)
    span = float(want.max() - want.min())
    worst = float(np.abs(ours - want).max()) / span
    print(f"{arch}: max |onebit - transformers| / logit range: {worst:.3g}")
    assert worst <= 1e-6
    assert float(np.abs(from_dir - ours).max()) <= 1e-12 * span
    if arch == "gemma2":
        uncapped = _theirs(folder, attn_logit_softcapping=None)
        assert float(np.abs(ours - uncapped).max()) / span > 100 * 1e-6


@pytest.mark.parametrize("kind", ["gemma2", "phi3"])
def test_config_json_path_equals_transformers(tmp_path, kind):
    """The tiny model `onebit fabricate KIND DIR --float` writes (config.json and safetensors in
    transformers' own layout: Gemma 2's window of 8 and attention cap of 2, Phi-3's fused
    qkv_proj and gate_up_proj) gives onebit's float64 logits within 1e-6 of the range of
    transformers' at all 20 positions: the config reader and the cut at build time read what
    transformers does."""
    from onebit.models import fabricate_model

    path = fabricate_model(tmp_path / kind, kind, quantized=False)
    tokens = [(29 * i + 3) % 256 for i in range(20)]
    model = load_model(path, dtype="float64", kernel="numpy")
    ours = np.stack([model.step(t, p) for p, t in enumerate(tokens)])
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float64, attn_implementation="eager").eval()
    with torch.no_grad():
        want = theirs(torch.tensor([tokens])).logits[0].numpy()
    span = float(want.max() - want.min())
    worst = float(np.abs(ours - want).max()) / span
    print(f"{kind} config.json: max |onebit - transformers| / logit range: {worst:.3g}")
    assert worst <= 1e-6
