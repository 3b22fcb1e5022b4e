"""What a batched engine needs from a base: rows of several sequences in one pass.

A `BatchRows` holds `slots` sequence slots, each with a cache of its own. One `rows` call runs
tokens of any slots at their own positions and returns one logits row per token, scoring the
position after it, exactly as a step of that slot's sequence alone would: the engine's whole
promise of batch invariance rests on that, and `pytest_onebit.batch` checks it from outside.

The cache follows llama.cpp's cell model, which is also where its bugs live: a row at position p
of a slot reads what that slot holds at positions <= p, so the engine must drop what it no
longer means (`truncate`, after a verify's rejected drafts; `free`, before a slot is reused).
The compiled stack's cache is indexed by position, so a rewrite at p replaces what p held and
`truncate` has nothing to do there; a cell cache (the toy base's, llama.cpp's) would read both.

`StackRows` is the adapter over a real model's sequences (`model.sequence_stack`): the
compiled stack's for the llama family, a Gemma model's own caches a sequence for Gemma.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class BatchRows(Protocol):
    """A base that runs rows of several sequences, each in a slot with its own cache."""

    @property
    def vocab_size(self) -> int:
        """The length of every logits row."""
        ...

    @property
    def slots(self) -> int:
        """How many sequences it holds at once."""
        ...

    def context(self) -> int | None:
        """The most positions one slot holds (None: no limit of its own)."""
        ...

    def rows(self, tokens: Sequence[int], positions: Sequence[int], slots: Sequence[int],
             last_of: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
        """Run token i at `positions[i]` of slot `slots[i]` (a slot's rows in position order,
        every earlier position of it already written). Returns `(logits, hidden)`: `logits`
        `[R, vocab]` (a row whose `last_of` is False may be left unscored: zeros), `hidden`
        `[R, H]`, the final hidden rows."""
        ...

    def truncate(self, slot: int, length: int) -> None:
        """Forget what `slot` holds at positions >= `length`."""
        ...

    def free(self, slot: int) -> None:
        """Forget everything `slot` holds: it is as new."""
        ...


class StackRows:
    """`BatchRows` over a model's `sequence_stack`: `slots` KV caches on the model's weights
    (shared, not copied). The model's own cache and committed state are never touched."""

    def __init__(self, model, slots: int) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be an integer >= 1, got {slots!r}")
        make = getattr(model, "sequence_stack", None)
        stack = make(slots) if callable(make) else None
        if stack is None:
            raise ValueError("batching needs a model that runs several sequences (a Gemma "
                             "model, or the compiled stack: kernel='int8' on a dense model "
                             "whose layers are in ggml blocks); this one decodes one sequence "
                             "at a time")
        self.model = model
        self.stack = stack
        self._slots = slots

    @property
    def vocab_size(self) -> int:
        return int(self.model.vocab_size)

    @property
    def slots(self) -> int:
        return self._slots

    def context(self) -> int | None:
        limit = getattr(self.model, "position_limit", None)
        return limit() if callable(limit) else None

    def kv_bytes_per_position(self) -> int:
        """What one position of one slot costs in the KV cache (keys and values, float32), at
        most."""
        own = getattr(self.stack, "kv_bytes_per_position", None)
        if callable(own):
            return int(own())
        c = self.model.config
        return 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * 4

    def rows(self, tokens, positions, slots, last_of):
        wanted = np.flatnonzero(np.asarray(last_of, bool))
        every = len(wanted) == len(tokens)  # decode and verify rows: no scatter to make
        logits, hidden, _ = self.model.sequence_rows(self.stack, list(tokens), positions, slots,
                                                     logits_of=None if every else wanted)
        if every:
            return logits, hidden
        full = np.zeros((len(tokens), logits.shape[1]), logits.dtype)
        full[wanted] = logits
        return full, hidden

    def truncate(self, slot: int, length: int) -> None:
        # position-indexed: the next row at `length` overwrites it before anything reads it
        return None

    def free(self, slot: int) -> None:
        self.stack.free(slot)
