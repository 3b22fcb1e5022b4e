"""`greedy_answers`: the base's greedy answers to many prompts, several decoded in each pass.

`generate` decodes one prompt at a time, so every token streams all of the weights for one
row. Here up to `batch` prompts are decoded side by side, each in a sequence slot of its own
(its own KV cache in a compiled stack: `sequence_stack`), and one pass of the weights gives
every slot its next token (`sequence_rows`). When an answer ends, the next prompt is prefilled
into its slot, so the batch stays full.

The answers are exactly `generate`'s greedy ones: the same prompt ids (`prompt_ids`), the same
stop tokens (the stop token ends the answer and is kept, as `generate`'s run commits it), the
same budget; and a row's logits have the bits a step of that sequence alone gives (the
compiled stack's rows are independent of the batch), so the argmax is the same token.
tests/text/test_answers.py holds that against `generate`.

A model without a compiled stack (another kernel, another family) answers one prompt at a time
through `generate`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from onebit.text.generate import generate, model_tokenizer, prompt_ids


@dataclass
class Answer:
    """One prompt's ids and the base's greedy answer to it (ending with its stop token, if one
    ended it)."""

    prompt_ids: list[int]
    tokens: list[int]


@dataclass
class _Slot:
    """A sequence slot's prompt, its answer so far and its budget."""

    prompt: int
    answer: list[int]
    budget: int
    tail: bool = False  # the answer is done; its last token's row is still to be seen


def greedy_answers(model, prompts: Sequence, *, max_tokens: int, batch: int = 8,
                   on_answer: Callable[[int, Answer], None] | None = None,
                   on_rows: Callable[[int, int, np.ndarray, np.ndarray, np.ndarray], None]
                   | None = None, taps: tuple[int, ...] = ()) -> list[Answer]:
    """The greedy answer to each prompt (text or chat messages, as `generate` takes them), in
    order, at most `max_tokens` tokens each, up to `batch` decoded per pass. `on_answer(i,
    answer)` is told as each one ends (in the order they end).

    `on_rows(i, first, logits, hidden, tapped)`, if given, sees every position of prompt i's
    whole sequence (prompt and answer, the last answer token too) exactly once and in order:
    rows `first ..` with their logits `[n, V]`, final-normed hidden rows `[n, H]` and the
    `taps` layers' outputs `[n, len(taps), H]`, all before `on_answer(i, ..)`. It needs the
    compiled stack: a model without one is refused with ValueError."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an integer >= 1, got {batch!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    tok = model_tokenizer(model)
    # every prompt is encoded (and refused) before anything is decoded
    encoded = [prompt_ids(model, tok, p, max_tokens) for p in prompts]
    make_stack = getattr(model, "sequence_stack", None)
    stack = make_stack(min(batch, len(prompts))) if make_stack and prompts else None
    if on_rows is not None and stack is None and prompts:
        raise ValueError("on_rows needs a model with a compiled stack (kernel='int8' on a "
                         "dense model whose layers are in ggml blocks)")
    answers: list[Answer | None] = [None] * len(prompts)

    def finish(i: int, answer: list[int]) -> None:
        answers[i] = made = Answer(list(encoded[i][0]), answer)
        if on_answer is not None:
            on_answer(i, made)

    if stack is None:
        for i, prompt in enumerate(prompts):
            gen = generate(model, prompt, max_tokens=max_tokens, head=None)
            finish(i, [int(t) for t in gen.result.tokens])
        return answers  # type: ignore[return-value]

    stops = set(int(t) for t in tok.stop_ids)
    observe = on_rows is not None
    waiting = list(range(len(prompts)))[::-1]  # popped from the end: prompt order

    slots: list[_Slot | None] = [None] * stack.sequences

    def done(slot: _Slot) -> bool:
        return slot.answer[-1] in stops or len(slot.answer) >= slot.budget

    def fill(n: int) -> None:
        """Prefill the next prompt into slot n; its first token comes from the last row."""
        while waiting:
            i = waiting.pop()
            ids, budget = encoded[i]
            rows = len(ids)
            logits, hidden, tapped = model.sequence_rows(
                stack, ids, np.arange(rows), np.full(rows, n), taps=taps,
                logits_of=None if observe else np.array([rows - 1]))
            if observe:
                on_rows(i, 0, logits, hidden, tapped)
            slot = _Slot(i, [int(np.argmax(logits[-1]))], budget)
            if not done(slot):
                slots[n] = slot
                return
            if observe:
                slot.tail = True
                slots[n] = slot
                return
            finish(i, slot.answer)
        slots[n] = None

    for n in range(stack.sequences):
        fill(n)
    while any(s is not None for s in slots):
        live = [n for n, s in enumerate(slots) if s is not None]
        tokens = [slots[n].answer[-1] for n in live]
        positions = [len(encoded[slots[n].prompt][0]) + len(slots[n].answer) - 1 for n in live]
        logits, hidden, tapped = model.sequence_rows(stack, tokens, positions, live, taps=taps)
        for row, n in enumerate(live):
            slot = slots[n]
            if observe:
                on_rows(slot.prompt, positions[row], logits[row:row + 1],
                        hidden[row:row + 1], tapped[row:row + 1])
            if slot.tail:
                finish(slot.prompt, slot.answer)
                fill(n)
                continue
            slot.answer.append(int(np.argmax(logits[row])))
            if done(slot):
                if observe:
                    slot.tail = True
                else:
                    finish(slot.prompt, slot.answer)
                    fill(n)
    return answers  # type: ignore[return-value]
