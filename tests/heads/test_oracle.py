"""The perfect head the tools offer (`--head perfect`): the ceiling a real head is held to."""

import numpy as np

import onebit
from onebit.heads import GreedyOracleHead


def test_greedy_oracle_head_is_perfect_under_the_contract(target):
    """Given each prompt's greedy text, the head drafts exactly that text, so on the real
    forward (qwen3 and the qwen3_5 hybrid) a run equals greedy at the one-pass pass law's
    cost, for whichever of its prompts is decoded."""
    prompts = [(1, 2, 3), (9, 8, 7, 6)]
    texts = {p: onebit.greedy(target, p, max_tokens=16).tokens for p in prompts}
    head = GreedyOracleHead(texts)
    for p in prompts:
        result = onebit.run(target, head, list(p), max_tokens=16, k=7)
        assert result.tokens == texts[p]
        assert (result.stats.steps, result.stats.batches) == (0, 2)


def test_unknown_prompt_gets_no_drafts():
    """A prompt the head was not given has no known text: the head proposes nothing (the run
    is plain decode), never a guess."""
    head = GreedyOracleHead({(1, 2): [5, 6, 7]})
    head.reset()
    head.commit_rows([4, 4], np.zeros((2, 3)), 2)
    assert head.propose(8, 2, 3, None) == []
    head.reset()
    head.commit_rows([1, 2], np.zeros((2, 3)), 2)
    assert head.propose(5, 2, 2, None) == [6, 7]
