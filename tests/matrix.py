"""Which combinations of a test's parameters README line 2 runs, and which wait for the slow step.

A test parametrised over several axes (family x precision x kernel, say) runs the whole product
in .ci/run's slow step, and in README line 2 a covering set of it: the product's diagonal, in
which every value of every axis appears at least once. A change that breaks one family, one
precision or one kernel on its own therefore still fails line 2; a fault that shows only in
one particular pairing is left to the slow step, which CI runs on every submission. On two cores
the rest of the products was about 165 worker-seconds of a cold line 2 (with the kernels they
alone compiled) and 87 of a warm one, by the tests' junit durations (issue 36).

    @pytest.mark.parametrize("kernel, dtype", cover(["numpy", "numba"], ["float32", "float64"]))

(tests/matrix.py is importable from any test file: pytest puts tests/ on sys.path when it loads
tests/conftest.py.)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest


def diagonal(*axes: Sequence[object]) -> list[tuple[object, ...]]:
    """The combinations line 2 runs: the i-th takes each axis's i-th value (cycling the shorter
    axes), for i up to the longest axis, so each value of each axis is in at least one."""
    width = max(len(axis) for axis in axes)
    return [tuple(axis[i % len(axis)] for axis in axes) for i in range(width)]


def cover(*axes: Sequence[object], as_tuple: bool = False) -> list[object]:
    """`pytest.param`s for the whole product of `axes`, in product order, with every
    combination off `diagonal(*axes)` marked slow. `as_tuple=True` makes each combination one
    value (for a fixture's `params`), its id the values joined by "-" as parametrize joins
    them."""
    if not axes or any(len(axis) == 0 for axis in axes):
        raise ValueError("cover() needs at least one axis, and no axis may be empty")
    quick = set(diagonal(*axes))
    params = []
    for combo in itertools.product(*axes):
        marks = () if combo in quick else pytest.mark.slow
        if as_tuple:
            params.append(pytest.param(combo, marks=marks, id="-".join(map(str, combo))))
        else:
            params.append(pytest.param(*combo, marks=marks))
    return params
