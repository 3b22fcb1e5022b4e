"""The prediction head (OpenAI's predicted outputs, `onebit.heads.prediction`) on a real
forward (the served contract's fabricated Qwen3), its checks named for `mutants/serve/`:
PR1 whatever the prediction says, the text is plain greedy decoding's and the base ends where
greedy's does; PR2 after an edit the head finds its place again from an anchor of the answer's
last tokens, never from fewer; PR3 a right prediction drafts whole rounds of it; PR4 a false
anchor makes the next one longer."""

from __future__ import annotations

import pytest

import onebit
from onebit.heads.prediction import ANCHOR, PredictionHead
from pytest_onebit.serve.toy import load_toy_model

N = 60


@pytest.fixture(scope="module")
def model():
    return load_toy_model()


@pytest.fixture(scope="module")
def case(model):
    ids = model.tokenizer.encode("the rain in spain stays")
    return ids, onebit.greedy(model, ids, max_tokens=N).tokens


def _predictions(answer: list[int]) -> dict[str, list[int]]:
    return {
        "exact": answer,
        "edited-middle": answer[:20] + [88, 89, 90] + answer[26:],
        "edited-start": [7, 7] + answer[5:],
        "truncated": answer[:25],
        "longer": answer + answer,
        "garbage": [(31 * i + 5) % 250 for i in range(80)],
        "empty": [],
    }


@pytest.mark.parametrize("k", [4, 32])
@pytest.mark.parametrize("which", list(_predictions(list(range(60)))))
def test_PR1_text_is_greedy_whatever_the_prediction(model, case, which, k):
    """The run with the prediction head emits exactly greedy's tokens (I1) for a right, an
    edited, a truncated, a longer, a garbage and an empty prediction, at k = 4 and 32, and the
    base holds exactly prompt + answer afterwards (I2)."""
    ids, answer = case
    head = PredictionHead(_predictions(answer)[which], len(ids), k=k)
    result = onebit.run(model, head, ids, max_tokens=N, k=k)
    assert result.tokens == answer
    assert model.committed_length == len(ids) + N


def test_PR3_a_right_prediction_is_drafted_whole(model, case):
    """With the answer itself as the prediction every draft is accepted and every round is as
    wide as the base verifies: ceil(N / (k' + 1)) rounds (I7's pass law, k' the base's width
    less t1), not N passes."""
    ids, answer = case
    k = min(32, model.max_batch_rows() - 1)
    result = onebit.run(model, PredictionHead(answer, len(ids)), ids, max_tokens=N, k=32)
    s = result.stats
    assert s.accepted == s.proposed == N - s.rounds
    assert s.rounds == -(-N // (k + 1))


def test_PR2_after_an_edit_the_place_is_found_again():
    """The answer follows the prediction, leaves it (the edit), and once its last ANCHOR
    tokens occur in the prediction again, the drafts continue from there; one or two matching
    tokens find nothing (too common an anchor to trust)."""
    assert ANCHOR == 3
    p = list(range(100, 140))
    head = PredictionHead(p, prompt_len=2)
    head.commit_rows([1, 2] + p[:10], None, 12)  # the prompt, then 10 that follow it
    assert head.propose(p[10], 12, 5, None) == p[11:16]
    head.commit_rows([p[10], 7, 8], None, 3)  # the edit: 7, 8 are not predicted
    assert head.propose(p[14], 15, 5, None) == []  # one token back on the prediction
    head.commit_rows([p[14]], None, 1)
    assert head.propose(p[15], 16, 5, None) == []  # two
    head.commit_rows([p[15]], None, 1)
    assert head.propose(p[16], 17, 5, None) == p[17:22]  # three: the place is found
    head.commit_rows([p[16]] + p[17:22], None, 6)
    assert head.propose(p[22], 23, 5, None) == p[23:28]  # and kept


def test_bad_settings_are_refused():
    """k, n and the prompt's length are checked by name."""
    for kwargs, name in (({"k": 0}, "k"), ({"n": 1}, "n"), ({"prompt_len": -1}, "prompt_len")):
        with pytest.raises(ValueError, match=name):
            PredictionHead([1, 2, 3], **{"prompt_len": 2, **kwargs})


def test_PR4_a_false_anchor_makes_the_next_one_longer():
    """A place found again whose first draft is rejected was a false anchor: the next find
    needs one more matching token (up to n); an accepted draft from a found place brings it
    back to three. The drafts stay the prediction's, so the text is unchanged (PR1)."""
    p = [1, 2, 3, 50, 51, 52, 1, 2, 3, 60, 61, 62, 63]
    head = PredictionHead(p, prompt_len=1)
    head.commit_rows([0, 9], None, 2)  # the prompt, then an answer token off the prediction
    head.commit_rows([1, 2], None, 2)
    assert head.propose(3, 5, 4, None) == [50, 51, 52, 1]  # found at its first occurrence
    head.commit_rows([3, 77], None, 2)  # t1, then something else than the draft 50
    assert head.anchor == ANCHOR + 1
    head.commit_rows([1, 2], None, 2)
    assert head.propose(3, 9, 4, None) == []  # three matching tokens no longer anchor
    head.commit_rows([3], None, 1)
    head.commit_rows([60], None, 1)
    # four now: [2, 3, 60] + 61 matches p[7:11]; its first draft accepted brings it back
    assert head.propose(61, 11, 2, None) == [62, 63]
    head.commit_rows([61, 62], None, 2)
    assert head.anchor == ANCHOR
