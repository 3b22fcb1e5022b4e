"""Every backend keeps the host kernel's two promises (docs/device.md): a row's result is
bit-identical whatever the batch it rides in (1..16 rows), and a weight is prepared once."""

from __future__ import annotations

import numpy as np
import pytest
from backend_cases import BACKEND_IDS

SHAPES = [(37, 50), (256, 256), (96, 1024)]  # odd sizes pad on the NPU; 1024 is a long sum


def rows_for(backend_id: str, n: int, k: int, seed: int) -> np.ndarray:
    dtype = np.float64 if backend_id.endswith("float64") else np.float32
    return np.random.default_rng(seed).standard_normal((n, k)).astype(dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("backend_id", BACKEND_IDS)
def test_rows_are_batch_invariant_1_to_16(make, backend_id, shape):
    """Row r of a batch of R rows (R = 1..16) has exactly the bits it has alone; the weight is
    prepared once across all 136 products + 16 single-row ones."""
    backend = make(backend_id, [shape])
    out_features, in_features = shape
    rows = rows_for(backend_id, 16, in_features, seed=sum(shape))
    weight = rows_for(backend_id, out_features, in_features, seed=1) * 0.05
    fetches = []

    def fetch(key):
        fetches.append(key)
        return weight

    alone = np.stack([backend.linear("w", fetch, rows[r : r + 1])[0] for r in range(16)])
    for n in range(1, 17):
        batch = backend.linear("w", fetch, rows[:n])
        assert batch.shape == (n, out_features) and batch.dtype == rows.dtype
        different = [r for r in range(n) if not np.array_equal(batch[r], alone[r])]
        assert not different, f"{backend_id}: rows {different} of a {n}-row batch differ from alone"
    assert fetches == ["w"] and backend.prepares == 1 and backend.products == 32


@pytest.mark.parametrize("backend_id", ["torch", "torch-float64", "cuda", "npu-f32"])
def test_products_within_the_reduction_budget_of_exact(make, backend_id):
    """Each product lies within 4 * eps * K * mean|a| * mean|b| of the exact (float64 of the
    same inputs) result: the budget the device logits are held to, per product."""
    out_features, in_features = 96, 1024
    backend = make(backend_id, [(out_features, in_features)])
    rows = rows_for(backend_id, 8, in_features, seed=7)
    weight = rows_for(backend_id, out_features, in_features, seed=8)
    got = backend.linear("w", lambda key: weight, rows)
    exact = rows.astype(np.float64) @ weight.astype(np.float64).T
    eps = np.finfo(rows.dtype).eps
    budget = 4 * eps * in_features * np.abs(rows).mean() * np.abs(weight).mean()
    assert np.abs(got - exact).max() <= budget


def test_not_resident_prepares_every_product(make):
    """`resident=False` (the residency A/B's slow arm) fetches and prepares on every product,
    and keeps nothing; the bits are the resident backend's."""
    from onebit.backends import make_backend

    weight = rows_for("host", 24, 40, seed=2)
    rows = rows_for("host", 5, 40, seed=3)
    slow, fast = make_backend("host", resident=False), make_backend("host")
    outs = [slow.linear("w", lambda key: weight, rows) for _ in range(3)]
    assert slow.prepares == 3 and slow.prepared_weights == 0
    assert all(np.array_equal(o, fast.linear("w", lambda key: weight, rows)) for o in outs)
