"""Helpers the family tests share (test_gemma3.py, test_gemma2.py, test_phi3.py): a GGUF read
in float64 for a reference graph written out in a test, and the verify-equals-steps check."""

from __future__ import annotations

import numpy as np


def float64_gguf(path):
    """(meta, weights) of a GGUF as gguf itself decodes it: `meta(key, default=None)` the
    field's value, `weights` every tensor by llama.cpp's name, dequantised to float64."""
    import gguf
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(str(path))

    def meta(key, default=None):
        field = reader.fields.get(key)
        return default if field is None else field.contents()

    weights = {t.name: np.asarray(dequantize(t.data, t.tensor_type), np.float64)
               for t in reader.tensors}
    return meta, weights


def assert_verify_equals_steps(model, tokens, positions) -> None:
    """From each position, a verify of every width up to 8 gives stepping's logits bit for
    bit, and committing half of it leaves stepping's state: the next step is the stepped one."""
    stepped = [model.step(t, p) for p, t in enumerate(tokens)]
    for pos in positions:
        for width in range(1, 9):
            model.reset()
            for p in range(pos):
                model.step(tokens[p], p)
            rows = model.verify(tokens[pos:pos + width], pos)
            assert np.array_equal(rows, np.stack(stepped[pos:pos + width])), (pos, width)
            keep = max(1, width // 2)
            model.commit_verify(keep)
            assert np.array_equal(model.step(tokens[pos + keep], pos + keep),
                                  stepped[pos + keep]), (pos, width, keep)
