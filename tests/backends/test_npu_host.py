"""The NPU backend's host-side logic, tested directly: the manifest, the choice of design per
weight shape, the instruction files and their word counts, padding and operand packing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyxrt_emulation import write_design

from onebit.backends import BackendError
from onebit.backends.npu.manifest import ManifestError, kernel_for, load_manifest
from onebit.backends.npu.packing import (
    from_bf16,
    pack,
    pad_to,
    quantise_rows,
    read_instructions,
    to_bf16,
    unpack_result,
)


def manifest(folder, *entries):
    (folder / "kernels.json").write_text(json.dumps({"kernels": list(entries)}))
    return folder


def test_manifest_reads_designs_and_picks_one_per_padded_shape(tmp_path):
    """A weight [out, in] gets the design whose K and N are in and out rounded up to its tile;
    a shape no design serves is an error listing the designs there are."""
    a = write_design(tmp_path, 16, 64, 128, tile=(16, 32, 64))
    b = write_design(tmp_path, 16, 128, 64, tile=(16, 32, 64))
    specs = load_manifest(manifest(tmp_path, a, b))
    assert [s.shape for s in specs] == [(16, 64, 128), (16, 128, 64)]
    assert kernel_for(specs, 100, 50).shape == (16, 64, 128)  # 50 -> 64, 100 -> 128
    assert kernel_for(specs, 64, 128).shape == (16, 128, 64)
    with pytest.raises(ManifestError, match=r"weight \[100, 20\].*16x64x128, 16x128x64"):
        kernel_for(specs, 100, 20)  # K = 32 is built by no design


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"M": 0}, "M must be a positive integer"),
        ({"K": 60}, "K=60 is not a multiple of its tile 32"),
        ({"tile": [16, 32]}, "tile must be three positive integers"),
        ({"dtype": {"a": "f16", "b": "f16", "c": "f32"}}, "dtype .* is not one of"),
        ({"op": "conv"}, "op 'conv' is not one of"),
        ({"xclbin": "missing.xclbin"}, "xclbin file .*missing.xclbin does not exist"),
        ({"insts": None}, "insts must be a non-empty string"),
    ],
)
def test_a_bad_manifest_entry_names_the_kernel_and_field(tmp_path, change, message):
    """Each malformed field is an error naming kernels.json, the entry's index and the field."""
    entry = write_design(tmp_path, 16, 64, 64, tile=(16, 32, 32)) | change
    with pytest.raises(ManifestError, match=f"kernels.json kernel 0: {message}"):
        load_manifest(manifest(tmp_path, entry))


def test_a_missing_or_empty_manifest_is_named(tmp_path):
    """No kernels.json, unreadable JSON, or no kernels: each names the file."""
    with pytest.raises(ManifestError, match="no kernel manifest: .*kernels.json does not exist"):
        load_manifest(tmp_path)
    (tmp_path / "kernels.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not a readable JSON manifest"):
        load_manifest(tmp_path)
    manifest(tmp_path)
    with pytest.raises(ManifestError, match="non-empty list under 'kernels'"):
        load_manifest(tmp_path)


def test_instruction_files_give_words_not_bytes(tmp_path):
    """insts.bin is raw little-endian uint32 and insts.txt one hex word a line: both give the
    same words, and the count is of 32-bit words."""
    words = np.array([0x06030100, 0xFFFFFFFF, 0, 0x12345678], dtype="<u4")
    (tmp_path / "insts.bin").write_bytes(words.tobytes())
    (tmp_path / "insts.txt").write_text("06030100\nffffffff\n\n00000000\n12345678\n")
    for name in ("insts.bin", "insts.txt"):
        stream = read_instructions(tmp_path / name)
        assert stream.dtype == np.dtype("<u4") and stream.tolist() == words.tolist()
        assert stream.size == 4 and stream.nbytes == 16


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("insts.bin", b"\x01\x02\x03", "3 bytes is not a whole number of 32-bit words"),
        ("insts.bin", b"", "the instruction stream is empty"),
        ("insts.txt", b"0001\nzz\n", r"insts.txt:2: 'zz' is not a hex word"),
        ("insts.txt", b"1ffffffff\n", "does not fit in 32 bits"),
    ],
)
def test_bad_instruction_files_are_named(tmp_path, name, content, message):
    """A stream that is not whole words, empty, or not hex names the file (and line)."""
    (tmp_path / name).write_bytes(content)
    with pytest.raises(BackendError, match=message):
        read_instructions(tmp_path / name)


def test_bf16_rounds_to_nearest_even_as_torch_does():
    """to_bf16 gives the bits torch's float32 -> bfloat16 conversion gives, ties included."""
    torch = pytest.importorskip("torch")
    x = np.concatenate([
        np.random.default_rng(0).standard_normal(4096).astype(np.float32),
        np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 0.0, -0.0, np.inf, 3.4e38], np.float32),
    ])
    expected = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(to_bf16(x), expected)
    assert np.array_equal(from_bf16(to_bf16(x)), torch.from_numpy(x).to(torch.bfloat16).float())


def test_int8_rows_are_quantised_each_on_its_own():
    """A row's int8 codes and scale depend on that row alone (so packing keeps batch
    invariance), and code * scale is within half a step of the value."""
    rows = np.random.default_rng(1).standard_normal((5, 40))
    rows[2] = 0.0
    q, scale = quantise_rows(rows)
    for r in range(5):
        alone_q, alone_scale = quantise_rows(rows[r : r + 1])
        assert np.array_equal(alone_q[0], q[r]) and alone_scale[0] == scale[r]
    assert np.abs(q * scale[:, None] - rows).max() <= scale.max() / 2 + 1e-12
    assert scale[2] == 1.0 and not q[2].any()


def test_packing_pads_with_zeros_and_unpacking_keeps_the_corner():
    """Rows are padded to M and K with zeros in the operand's type; the result's [rows, out]
    corner comes back, int32 results scaled by both scales."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    packed, scale = pack(x, "f32", 4, 8)
    assert packed.shape == (4, 8) and scale is None
    assert np.array_equal(packed[:2, :3], x) and not packed[2:].any() and not packed[:, 3:].any()
    assert pack(x, "bf16", 4, 8)[0].dtype == np.uint16
    assert pack(x, "i8", 4, 8)[0].dtype == np.int8
    c = np.arange(4 * 8, dtype=np.int32).reshape(4, 8)
    out = unpack_result(c, "i32", 2, 5, np.array([2.0, 3.0]), np.full(5, 0.5), np.float32)
    assert out.dtype == np.float32 and np.array_equal(out, c[:2, :5] * np.array([[1.0], [1.5]]))
    with pytest.raises(BackendError, match=r"cannot pad \(2, 3\) down to \(1, 8\)"):
        pad_to(x, 1, 8)
