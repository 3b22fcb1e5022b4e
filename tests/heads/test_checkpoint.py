"""Draft files: BF16 written as torch rounds it, read back bit for bit; only kept tensors read."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from peer_modules import lazy

from onebit.heads.checkpoint import read_tensors, to_bf16_bits, write_bf16

torch = lazy("torch")  # the peer extra, imported when the test runs (peer_modules)

FLOATS = arrays(np.float32, st.integers(1, 64),
                elements=st.floats(width=32, allow_nan=False, allow_infinity=True))


@settings(max_examples=200, deadline=None)
@given(FLOATS)
def test_bf16_rounding_is_torchs(values):
    """For any float32 values (ties, subnormals, overflow to infinity included), the BF16
    bit patterns written are exactly those torch's float32 -> bfloat16 conversion gives."""
    want = torch.tensor(values).bfloat16().view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(to_bf16_bits(values), want)


def test_ties_round_to_even_and_nan_stays_nan():
    """Halfway cases go to the even neighbour (both directions), and a NaN is written as a
    NaN, not rounded into the exponent bits."""
    ties = np.array([0x3F808000, 0x3F818000, 0x7FFFFFFF], np.uint32).view(np.float32)
    bits = to_bf16_bits(ties)
    assert list(bits[:2]) == [0x3F80, 0x3F82]
    widened = (bits.astype(np.uint32) << 16).view(np.float32)
    assert np.isnan(widened[2])


@settings(max_examples=25, deadline=None)
@given(st.dictionaries(st.sampled_from(["mtp.fc.weight", "mtp.norm.weight", "lm_head.weight",
                                        "model.norm.weight"]),
                       arrays(np.float32, st.integers(1, 8),
                              elements=st.floats(-4, 4, width=32)),
                       min_size=1))
def test_written_bf16_reads_back_and_keep_filters(tmp_path_factory, tensors):
    """What write_bf16 stores, read_tensors reads back as the bf16 values widened to
    float32; with `keep`, exactly the kept names come back."""
    path = tmp_path_factory.mktemp("bf16")
    write_bf16(path / "model.safetensors", tensors)
    back = read_tensors(path)
    for name, value in tensors.items():
        want = (to_bf16_bits(value).astype(np.uint32) << 16).view(np.float32)
        assert np.array_equal(back[name], want)
    kept = read_tensors(path, keep=lambda name: name.startswith("mtp."))
    assert set(kept) == {n for n in tensors if n.startswith("mtp.")}
