"""The Llama family (model_type llama / mistral / qwen2) against transformers, and its
guarantees: tiny random float64 models saved with `save_pretrained` give transformers' logits at
every position; the base contract B1..B8 holds bit for bit; speculative runs (prompt lookup,
the greedy oracle) emit greedy's tokens.

Tolerance: 1e-6 of the largest logit. transformers computes RMSNorm and RoPE's frequencies and
angles in float32 even in a float64 model (onebit keeps float64 throughout), so agreement is to
float32 rounding, not float64's. Seen (printed by each case): 1.4e-7 .. 3.6e-7 of the largest
logit (absolute 6.7e-7 .. 4.2e-6 on logits of 3.3 .. 19.5).
"""

from __future__ import annotations

import numpy as np
import pytest
from matrix import cover

import onebit
from onebit.heads import NgramHead
from onebit.heads.oracle import GreedyOracleHead
from onebit.models import ModelConfigError, ModelInputError, fabricate_model, load_model
from onebit.models.llama import LlamaConfig, llama3_inv_freq
from pytest_onebit import check_base

TOKENS = [3, 17, 99, 5, 64, 64, 120, 1, 42, 77, 8, 33, 90, 11, 3, 17, 99, 5]
RELATIVE = 1e-6
SIZES = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16, "rope_theta": 10000.0}


def _hf(name: str, **fields):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    config = getattr(transformers, name + "Config")(**SIZES, **fields,
                                                     attn_implementation="eager")
    torch.manual_seed(0)
    model = getattr(transformers, name + "ForCausalLM")(config).double().eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # unit-gain projections, moved norms, visible biases: every term counts
        for param_name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator, dtype=param.dtype)
            if param_name.endswith("norm.weight"):
                param.add_(0.3 * noise)
            elif param_name.endswith("embed_tokens.weight") or param_name.endswith(".bias"):
                param.copy_(0.5 * noise)
            elif param.ndim == 2:
                param.copy_(noise / param.shape[1] ** 0.5)
    return model, torch


def _compare(name: str, path, **fields) -> tuple[float, float]:
    """(max abs logit difference, largest logit) of transformers' full-sequence forward and
    onebit stepping the tokens one by one, float64."""
    model, torch = _hf(name, **fields)
    model.save_pretrained(path)
    with torch.no_grad():
        expected = model(torch.tensor([TOKENS])).logits[0].double().numpy()
    ours = load_model(path, dtype="float64", kernel="numpy")
    got = np.stack([ours.step(t, pos) for pos, t in enumerate(TOKENS)])
    assert np.array_equal(got.argmax(axis=1), expected.argmax(axis=1))
    scale = float(np.abs(expected).max())
    assert scale > 1.0  # logits of O(1): the comparison has signal
    return float(np.abs(got - expected).max()), scale


CASES = {
    "llama-tied": ("Llama", dict(tie_word_embeddings=True)),
    "llama-untied-bias": ("Llama", dict(tie_word_embeddings=False, attention_bias=True)),
    "llama3-rope": ("Llama", dict(tie_word_embeddings=False, rope_parameters=LLAMA3)),
    "qwen2": ("Qwen2", dict(tie_word_embeddings=True)),
    "mistral": ("Mistral", dict(sliding_window=None, head_dim=16)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_transformers(case, tmp_path):
    """A two-layer random float64 model of each Llama-family flavour (tied / untied lm_head,
    q/k/v/o biases, llama3 RoPE scaling, Qwen2's q/k/v biases, Mistral) gives transformers'
    logits at every position within 1e-6 of the largest logit."""
    name, fields = CASES[case]
    diff, scale = _compare(name, tmp_path / case, **fields)
    print(f"{case}: max abs logit diff vs transformers {diff:.3g} (largest logit {scale:.3g})")
    assert diff <= RELATIVE * scale


def test_llama3_rope_changes_the_logits(tmp_path):
    """The llama3 scaling is applied, not ignored: with positions past the original context
    the scaled model's logits differ from the unscaled one's (so the cross-check above sees
    the scaling)."""
    plain = fabricate_model(tmp_path / "plain", "llama", quantized=False)
    scaled = fabricate_model(tmp_path / "scaled", "llama", quantized=False,
                             rope_parameters=LLAMA3)
    a, b = (load_model(p, dtype="float64") for p in (plain, scaled))
    rows = [(a.step(t, i), b.step(t, i)) for i, t in enumerate(TOKENS)]
    assert not np.array_equal(rows[-1][0], rows[-1][1])
    # short wavelengths (below original / high_freq_factor = 16) kept, long ones (above
    # original / low_freq_factor = 64) divided by the factor, the band between blended
    freq = 1.0 / 10000.0 ** (np.arange(0, 64, 2) / 64)
    scaling = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64.0}
    scaled_freq = llama3_inv_freq(freq, scaling)
    wavelength = 2 * np.pi / freq
    short, long = wavelength < 16, wavelength > 64
    assert short.any() and long.any() and (~short & ~long).any()
    assert np.array_equal(scaled_freq[short], freq[short])
    assert np.array_equal(scaled_freq[long], freq[long] / 8.0)
    middle = ~short & ~long
    assert np.all((scaled_freq[middle] < freq[middle])
                  & (scaled_freq[middle] > freq[middle] / 8.0))


FLAVOURS = {"llama": {}, "qwen2": {"model_type": "qwen2", "tie_word_embeddings": False},
            "llama3": {"rope_parameters": LLAMA3}}


@pytest.fixture(scope="module")
def llama_dirs(tmp_path_factory):
    return {name: fabricate_model(tmp_path_factory.mktemp(name), "llama", quantized=True,
                                  **fields) for name, fields in FLAVOURS.items()}


@pytest.mark.parametrize("kernel, dtype, flavour",
                         cover(["numpy", "numba"], ["float32", "float64"], list(FLAVOURS)))
def test_base_contract(flavour, dtype, kernel, llama_dirs):
    """B1..B8 hold bit for bit on the Llama forward (quantised, tied and untied, biases and
    llama3 RoPE), in both precisions, with numpy's and numba's product kernels."""
    if kernel == "numba":
        pytest.importorskip("numba")
    report = check_base(lambda: load_model(llama_dirs[flavour], dtype=dtype, kernel=kernel))
    assert report.ran and not report.failures


@pytest.mark.parametrize("flavour", list(FLAVOURS))
def test_speculative_runs_equal_greedy(flavour, llama_dirs):
    """`onebit.run` with prompt lookup, and with the greedy oracle as head, emits exactly
    greedy's tokens on a prompt that repeats itself."""
    model = load_model(llama_dirs[flavour], kernel="numpy")
    prompt = [5, 17, 99, 3, 240, 17, 99, 3, 60, 61, 62, 5, 17, 99]
    truth = onebit.greedy(model, prompt, max_tokens=30).tokens
    lookup = onebit.run(model, NgramHead(), prompt, max_tokens=30, k=4)
    oracle = onebit.run(model, GreedyOracleHead({tuple(prompt): truth}), prompt,
                        max_tokens=30, k=4)
    assert lookup.tokens == truth
    assert oracle.tokens == truth
    assert oracle.stats.steps + oracle.stats.batches < len(truth)  # drafts were accepted


def test_sliding_window_refused_past_the_window(tmp_path):
    """A Mistral with a sliding window computes positions below it and refuses, by name, the
    first pass that reaches it (attention past the window is not implemented)."""
    path = fabricate_model(tmp_path / "m", "llama", quantized=False, model_type="mistral",
                           sliding_window=4)
    model = load_model(path)
    for pos, token in enumerate([1, 2, 3, 4]):
        model.step(token, pos)
    with pytest.raises(ModelInputError, match="sliding window"):
        model.step(5, 4)


@pytest.mark.parametrize("change, message", [
    ({"rope_parameters": {"rope_type": "yarn", "factor": 2.0}}, "rope_type' is 'yarn'"),
    ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0}}, "low_freq_factor"),
    ({"mlp_bias": True}, "mlp_bias"),
    ({"attention_bias": "yes"}, "attention_bias"),
    ({"hidden_act": "gelu"}, "hidden_act"),
])
def test_bad_config_names_the_field(change, message):
    """A Llama config the forward cannot compute is refused naming the field."""
    raw = dict(model_type="llama", **SIZES)
    raw.update(change)
    with pytest.raises(ModelConfigError, match=message):
        LlamaConfig.from_dict(raw, source="cfg.json")
