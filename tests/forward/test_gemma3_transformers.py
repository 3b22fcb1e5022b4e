"""Cross-check of the Gemma 3 family's config.json path against transformers'
Gemma3ForCausalLM (CPU torch, the `peer` extra), in float64: the tiny random model
`fabricate_model(path, "gemma3", quantized=False)` writes (norm weights centred on 0, a query
scale unlike head_dim's, linear RoPE scaling on the global layer, final soft-capping, a window
of 8) gives the same logits at every position of a prompt three windows long. transformers
computes the norms in float32 even in a float64 model, hence a bound of 1e-6 of the range,
not float64 precision."""

from __future__ import annotations

import numpy as np
from peer_modules import lazy

from onebit.models import fabricate_model, load_model

transformers = lazy("transformers")
torch = lazy("torch")

TOKENS = [(29 * i + 3) % 256 for i in range(24)]


def test_logits_equal_transformers(tmp_path):
    """onebit's float64 logits equal transformers' within 1e-6 of the logit range at all 24
    positions; with the window widened on transformers' side they do not (the bound has
    teeth)."""
    path = fabricate_model(tmp_path / "g3", "gemma3", quantized=False)
    ours_model = load_model(path, dtype="float64", kernel="numpy")
    ours = np.stack([ours_model.step(t, p) for p, t in enumerate(TOKENS)])

    def theirs(**overrides):
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float64, attn_implementation="eager", **overrides).eval()
        with torch.no_grad():
            return model(torch.tensor([TOKENS])).logits[0].numpy()

    want = theirs()
    span = float(want.max() - want.min())
    worst = float(np.abs(ours - want).max()) / span
    print(f"max |onebit - transformers| / logit range: {worst:.3g}")
    assert worst <= 1e-6
    wider = theirs(sliding_window=9)
    assert float(np.abs(ours - wider).max()) / span > 100 * 1e-6
