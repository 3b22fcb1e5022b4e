"""commit_verify takes a whole row count: 1.7 is not 1."""

from __future__ import annotations

import numpy as np
import pytest

from onebit.models import ModelInputError


@pytest.mark.parametrize("n", [1.7, 1.0, "1", True, None, -1, 3])
def test_commit_verify_refuses_what_is_not_a_row_count(q4_model, n):
    """A float, a string, a bool, None, a negative count or one past the batch is a
    ModelInputError naming the value; nothing of the batch is committed."""
    model = q4_model
    model.reset()
    model.step(1, 0)
    model.verify([2, 3], 1)
    with pytest.raises(ModelInputError, match=rf"commit_verify\({n}\) on a batch of 2 rows"):
        model.commit_verify(n)
    assert model.committed_length == 1


def test_commit_verify_takes_numpy_integers(q4_model):
    """A numpy integer is a row count like an int (what an argmax-based loop hands over)."""
    q4_model.reset()
    q4_model.step(1, 0)
    q4_model.verify([2, 3], 1)
    q4_model.commit_verify(np.int64(1))
    assert q4_model.committed_length == 2
