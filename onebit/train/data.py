"""Self-distilled training data for a draft head: the base's own greedy answers, and what the
base computed on the way.

For each prompt (`prompts.chat_prompts`) the base decodes greedily through `onebit.generate`,
exactly as `onebit generate` would (the chat template, the stop tokens). The whole sequence,
prompt and answer, is then run once more in prefill batches with the head's layer taps set,
which gives for every position t the three rows the head reads at run time: the raw outputs
of the two tapped layers and the final-normed hidden row. Batched rows are bit-identical to
stepped ones (the B-checks), so these are the rows the head will see when it drafts.

A `Sequence` keeps them in float16 (half the memory; the head normalises what it reads), with
the token ids and where the answer starts: only answer tokens are the base's own choices, so
only they are targets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence as Seq
from dataclasses import dataclass

import numpy as np

from onebit.heads.eagle import default_taps  # noqa: F401 (the recipe reads it here)


@dataclass
class Sequence:
    """One prompt and the base's greedy answer."""

    tokens: np.ndarray  # [T] int64: prompt then answer
    answer_start: int  # index of the first answer token
    features: np.ndarray  # [T, 3, H] float16: tap low, tap mid (raw), final-normed hidden

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


def features_of(model, tokens: Seq[int], taps: tuple[int, int]) -> np.ndarray:
    """`[T, 3, H]` float32: for each position of `tokens`, the two tapped layers' outputs and
    the final-normed hidden row, from prefill batches of the model's widest prefill."""
    width = int(model.max_prefill_rows())
    model.reset()
    model.set_layer_taps(list(taps))
    hidden = []
    tokens = [int(t) for t in tokens]
    for pos in range(0, len(tokens), width):
        chunk = tokens[pos: pos + width]
        model.verify_last(chunk, pos)
        model.commit_verify(len(chunk))
        hidden.append(model.last_hidden_rows())
    tapped = model.tapped_rows()  # [T, 2, H]
    model.reset()
    return np.concatenate([tapped, np.concatenate(hidden)[:, None, :]], axis=1)


def distil(model, prompts: Seq[str], *, max_tokens: int, taps: tuple[int, int],
           on_prompt: Callable[[int, int], None] | None = None) -> list[Sequence]:
    """The base's greedy answer to each prompt, with its features. `on_prompt(i, answer
    length)` is told after each prompt (the progress bar)."""
    import onebit

    out = []
    for i, prompt in enumerate(prompts):
        gen = onebit.generate(model, prompt, max_tokens=max_tokens)
        answer = [int(t) for t in gen.result.tokens]
        tokens = [int(t) for t in gen.prompt_ids] + answer
        feats = features_of(model, tokens, taps).astype(np.float16)
        out.append(Sequence(np.asarray(tokens, np.int64), len(gen.prompt_ids), feats))
        if on_prompt is not None:
            on_prompt(i, len(answer))
    return out


def draft_vocabulary(sequences: Seq[Sequence], size: int, vocab_size: int) -> np.ndarray:
    """The `size` tokens the base emits most in its answers (ties: the lower id), sorted by
    id: the head's reduced vocabulary, its `d2t` map (draft index -> base token id). Tokens
    the answers never use fill the tail by id, so the map always has `size` entries."""
    if not 0 < size <= vocab_size:
        raise ValueError(f"draft vocabulary size {size} is not in [1, {vocab_size}]")
    counts = np.zeros(vocab_size, np.int64)
    for s in sequences:
        np.add.at(counts, s.tokens[s.answer_start:], 1)
    order = np.lexsort((np.arange(vocab_size), -counts))
    return np.sort(order[:size]).astype(np.int64)


def coverage(sequences: Seq[Sequence], d2t: np.ndarray) -> float:
    """The share of answer tokens the draft vocabulary holds."""
    inside = np.zeros(int(max(d2t.max() + 1, max(int(s.tokens.max()) for s in sequences) + 1)),
                      bool)
    inside[d2t] = True
    answers = np.concatenate([s.tokens[s.answer_start:] for s in sequences])
    return float(inside[answers].mean()) if answers.size else 0.0
