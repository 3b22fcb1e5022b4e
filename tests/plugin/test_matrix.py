"""tests/matrix.py: README line 2 runs a covering set of each parametrised product, and the slow
step the rest."""

from __future__ import annotations

import itertools

import pytest
from matrix import cover, diagonal


def _slow(param) -> bool:
    return any(mark.name == "slow" for mark in param.marks)


@pytest.mark.parametrize("axes", [
    (["a", "b"],),
    (["a", "b"], [1, 2]),
    (["numpy", "numba", "numba-float"], ["float32", "float64"], [3, 55]),
    (["x"], [1, 2, 3, 4, 5], ["u", "s"]),
])
def test_the_whole_product_with_every_value_in_line_2(axes):
    """cover() gives the whole product once, in product order; the combinations left unmarked
    (line 2's) are exactly diagonal(), and among them every value of every axis appears."""
    params = cover(*axes)
    assert [p.values for p in params] == list(itertools.product(*axes))
    quick = [p.values for p in params if not _slow(p)]
    assert quick == [c for c in itertools.product(*axes) if c in set(diagonal(*axes))]
    assert len(quick) == max(len(a) for a in axes)
    for i, axis in enumerate(axes):
        assert {combo[i] for combo in quick} == set(axis)


def test_as_tuple_gives_one_value_with_parametrizes_id():
    """With as_tuple=True each combination is one value (a fixture's param), its id the values
    joined by "-", its slow mark as without."""
    plain, packed = cover(["q", "r"], ["f32", "f64"]), cover(["q", "r"], ["f32", "f64"],
                                                             as_tuple=True)
    assert [p.values for p in packed] == [(p.values,) for p in plain]
    assert [p.id for p in packed] == ["q-f32", "q-f64", "r-f32", "r-f64"]
    assert [_slow(p) for p in packed] == [_slow(p) for p in plain] == [False, True, True, False]


def test_empty_axes_are_refused():
    """No axis, or an empty one, is a ValueError rather than a product with nothing in it."""
    for axes in [(), (["a"], [])]:
        with pytest.raises(ValueError, match="empty"):
            cover(*axes)
