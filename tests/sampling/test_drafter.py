"""SamplingDrafter, the mix-in DFlash and MTP draft through: greedy it is the argmax and a bare
list, exactly as before sampling existed; sampled, each row is one draw through the run's rng
and the answer carries exactly the warped rows the drafts were drawn from."""

import numpy as np

from onebit import Drafts, Sampling, warp
from onebit.heads.choose import SamplingDrafter
from pytest_onebit.sampling.enumeration import ScriptedRng

LOGITS = np.array([[0.1, 2.0, 1.9, -1.0],
                   [3.0, 0.0, 2.5, 1.0]])
TOP2 = Sampling(1.0, top_k=2)


def test_a_greedy_drafter_picks_the_argmax_and_answers_a_bare_list():
    """Before use_sampling, after use_sampling(None, None) and at temperature 0 (rng or not),
    choose_logits gives each row's argmax and no q, and answer is that bare list."""
    fresh = SamplingDrafter()
    cleared = SamplingDrafter()
    cleared.use_sampling(TOP2, ScriptedRng())
    cleared.use_sampling(None, None)
    cold = SamplingDrafter()
    cold.use_sampling(Sampling(0.0, top_k=2), ScriptedRng())
    no_rng = SamplingDrafter()
    no_rng.use_sampling(TOP2, None)
    for drafter in (fresh, cleared, cold, no_rng):
        tokens, q = drafter.choose_logits(LOGITS)
        assert (tokens, q) == ([1, 0], None)
        answer = drafter.answer(tokens, q)
        assert type(answer) is list and answer == [1, 0]


def test_a_sampling_drafter_draws_each_row_through_the_rng_and_reports_its_q():
    """Under top-k 2 each row is one rng.choice over its two best tokens (the script picks the
    second of row 0's {1, 2} and the first of row 1's {0, 2}); q is warp(row) for each row,
    and answer wraps both in Drafts."""
    drafter = SamplingDrafter()
    rng = ScriptedRng([1, 0])
    drafter.use_sampling(TOP2, rng)
    assert drafter.sampling is TOP2 and drafter.rng is rng
    tokens, q = drafter.choose_logits(LOGITS)
    assert tokens == [2, 0] and rng.branches == [2, 2]
    np.testing.assert_array_equal(q, np.stack([warp(row, TOP2) for row in LOGITS]))
    answer = drafter.answer(tokens, q)
    assert isinstance(answer, Drafts) and answer.tokens == [2, 0] and answer.q is q
