"""Q4NX weights on the integer kernel (`kernel="int8"`): a Q4NX group is a ggml block, so a
Q4NX weight is read as the same values in q4_1 (unsigned codes) or q4_0 (signed codes) blocks
(`blocks.BlockWeight.from_q4nx`), and the whole model then runs the compiled stack. What is
proved: the blocks hold the Q4NX weight bit for bit, the model keeps the base contract on that
path and stays near the packed float kernel, and a weight the blocks cannot hold exactly is
refused at load by name."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from safetensors.numpy import load_file, save_file  # noqa: E402

from onebit.models import blocks, int8_kernel, load_model, q4nx  # noqa: E402
from onebit.models.errors import ModelFileError  # noqa: E402
from onebit.models.fabricate import fabricate_model  # noqa: E402
from onebit.models.weights import Q4NX_FILE  # noqa: E402

CONVENTIONS = q4nx.CONVENTIONS
# The stack tests compile a stack per convention (20 s each on two cores), and the signed
# convention's product a q4_0 kernel nothing else in README line 2 needs (17 s): line 2 runs the
# default convention's (unsigned, q4_1 blocks, the one every other Q4NX test compiles); the
# signed one's run in the slow step.
STACK_CONVENTIONS = [pytest.param(c, marks=() if c == "unsigned" else pytest.mark.slow)
                     for c in CONVENTIONS]
TOKENS = [1, 7, 3, 9, 2, 4, 11, 5]


def raw_blocks(weight: blocks.BlockWeight) -> np.ndarray:
    """`weight` back in a GGUF file's byte layout (uint8 rows of blocks), written here
    independently of from_stored, so blocks.dequantize (ggml's decoder) can read it."""
    out, n_in = weight.shape
    size, head = blocks.KINDS[weight.kind][1:]
    nb = n_in // blocks.BLOCK
    raw = np.zeros((out, nb, size), np.uint8)
    raw[:, :, 0:2] = weight.d.reshape(out, nb, 1).view(np.uint8)
    if weight.kind == "q4_1":
        raw[:, :, 2:4] = weight.m.reshape(out, nb, 1).view(np.uint8)
    raw[:, :, head:] = weight.codes.reshape(out, nb, size - head)
    return raw.reshape(out, -1)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_blocks_hold_the_q4nx_weight_bit_for_bit(convention):
    """The ggml blocks made from a Q4NX weight dequantise (by ggml's own decoder) to exactly
    the float32 weight Q4NX's dequantisation gives, and are the kind the convention names."""
    rng = np.random.default_rng(3)
    weight = (rng.standard_normal((64, 512)) * 0.05).astype(np.float32)
    data = q4nx.quantize(weight, convention=convention)
    made = blocks.BlockWeight.from_q4nx(data, (64, 512), convention, name="w")
    assert made.kind == {"unsigned": "q4_1", "signed": "q4_0"}[convention]
    got = blocks.dequantize(raw_blocks(made), made.kind, (64, 512))
    want = q4nx.dequantize(data, 64, 512, convention=convention, dtype=np.float32)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("convention", STACK_CONVENTIONS)
def test_product_within_bound_of_the_q4nx_weight(convention):
    """The integer product of the converted weight stays within `error_bound` of the float64
    product with Q4NX's own dequantised weight (the activation rounding is the only error)."""
    rng = np.random.default_rng(4)
    data = q4nx.quantize((rng.standard_normal((96, 768)) * 0.05).astype(np.float32),
                         convention=convention)
    made = blocks.BlockWeight.from_q4nx(data, (96, 768), convention, name="w")
    dense = q4nx.dequantize(data, 96, 768, convention=convention, dtype=np.float32)
    rows = rng.standard_normal((5, 768)).astype(np.float32)
    error = np.abs(int8_kernel.block_rows(made, rows)
                   - rows.astype(np.float64) @ dense.astype(np.float64).T)
    assert (error <= int8_kernel.error_bound(dense, rows)).all()
    assert error.max() > 0  # the activations were rounded: the comparison is not vacuous


@pytest.mark.parametrize("convention", STACK_CONVENTIONS)
def test_q4nx_model_runs_the_stack(tmp_path, convention):
    """A Q4NX model on the int8 kernel runs the compiled stack on block weights (no packed
    weight is prepared); its logits stay within 5 % of the logit range of the packed float
    kernel's, and a verify's rows equal the steps' bit for bit."""
    path = fabricate_model(tmp_path / "m", "qwen3", convention=convention)
    ints = load_model(path, kernel="int8", q4nx_convention=convention)
    packed = load_model(path, kernel="numba", q4nx_convention=convention)
    assert ints._fused is not None and packed._fused is None
    a, b = ints.verify(TOKENS, 0), packed.verify(TOKENS, 0)
    assert all(isinstance(h, blocks.BlockWeight) for h in ints.backend._prepared.values())
    assert not np.array_equal(a, b)
    assert np.abs(a - b).max() <= 0.05 * (b.max() - b.min())
    ints.reset()
    assert np.array_equal(np.stack([ints.step(t, i) for i, t in enumerate(TOKENS)]), a)


@pytest.mark.parametrize("convention", STACK_CONVENTIONS)
def test_base_contract_on_q4nx_int8(tmp_path, convention):
    """The base contract (B1..B8) holds on a Q4NX model on the integer path."""
    from pytest_onebit import check_base
    from pytest_onebit.base.checks import BaseSettings

    path = fabricate_model(tmp_path / "m", "qwen3", convention=convention)
    report = check_base(lambda: load_model(path, kernel="int8", q4nx_convention=convention),
                        settings=BaseSettings(positions=(0, 2), script_length=8, examples=2))
    assert report.ok, report.to_text()


def _poke(path, name: str, *, scale: float | None = None, mins: float | None = None) -> None:
    """Rewrite group 0 of row 0 of the Q4NX tensor `name` in the container at `path`."""
    file = path / Q4NX_FILE
    tensors = load_file(str(file))
    data = tensors[name].copy()
    flat = data.reshape(-1, q4nx.BLOCK_BYTES)
    if scale is not None:
        flat[0, q4nx.SCALES_AT:q4nx.SCALES_AT + 2] = q4nx.f32_to_bf16_bits(
            np.array([scale], np.float32)).view(np.uint8)
    if mins is not None:
        flat[0, q4nx.MINS_AT:q4nx.MINS_AT + 2] = q4nx.f32_to_bf16_bits(
            np.array([mins], np.float32)).view(np.uint8)
    tensors[name] = data
    save_file(tensors, str(file), metadata={"format": "q4nx"})


@pytest.mark.parametrize("convention, poke, message", [
    ("unsigned", {"scale": 2.0 ** -100}, r"scale 7\.888609052210118e-31 in group 0 of row 0, "
                                         r"which float16"),
    ("unsigned", {"mins": 2.0 ** 20}, r"min 1048576\.0 in group 0 of row 0, which float16"),
    ("signed", {"mins": 0.5}, r"signed codes\) has min 0\.5 in group 0 of row 0"),
])
def test_weights_the_blocks_cannot_hold_refused_at_load(tmp_path, convention, poke, message):
    """A Q4NX scale or min that float16 cannot hold exactly (bf16's exponent range is wider),
    or a signed weight with a min, is refused when the int8 model is built, by a
    ModelFileError naming the tensor, the group, the row and the value; the packed float
    kernel, which keeps bf16, still loads the same file."""
    path = fabricate_model(tmp_path / "m", "qwen3", convention=convention)
    name = "model.layers.0.mlp.down_proj.weight"
    _poke(path, name, **poke)
    with pytest.raises(ModelFileError, match=rf"'{name}'.*{message}"):
        load_model(path, kernel="int8", q4nx_convention=convention)
    load_model(path, kernel="numba", q4nx_convention=convention).step(1, 0)
    # load_model's default (the integer kernel) takes the float reference for such a file
    # rather than refusing it; only "int8" by name insists
    assert load_model(path, q4nx_convention=convention).kernel == "numba"


def test_the_default_kernel_is_int8_and_the_float_reference_is_named(tmp_path):
    """With numba, `load_model(path)` runs the integer kernel (the fastest exact one) in
    float32; "auto" and "numba" name the float reference, float64 keeps it by default, and a
    default model computes what `kernel="int8"` computes, bit for bit."""
    from onebit.models import default_kernel

    path = fabricate_model(tmp_path / "m", "qwen3")
    default = load_model(path)
    assert default.kernel == "int8" == default_kernel()
    assert load_model(path, kernel="auto").kernel == "numba"
    assert load_model(path, dtype="float64").kernel == "numba"
    assert default_kernel("torch") == "auto"
    named = load_model(path, kernel="int8")
    assert np.array_equal(default.step(1, 0), named.step(1, 0))
