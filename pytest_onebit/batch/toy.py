"""`ToyBatchRows`: a batched toy base (`onebit.batch.BatchRows`) that hides no batching slip.

Its cache is llama.cpp's cell model: each slot holds cells `(position, token)` in the order
they were written, and a row at position p of a slot reads every cell of that slot at a
position <= p, in that order. So a cell left behind by a rejected draft (no `truncate`), by the
slot's last tenant (no `free`), or written into the wrong slot, is read, and changes the row.
The row's state is the toy's rolling hash (`pytest_onebit.doubles.toy.mix`) over those cells,
its hidden row a function of the state, and its logits a fixed random matrix times the hidden
row, summed in a fixed order of column blocks (float64): every row's bits depend on its own
history only, never on the batch, which is what a batch-invariant kernel promises and what the
batch contract (M1..M6) compares bit for bit.

It does not trust the engine: it counts passes and rows and records every misuse (a row whose
earlier positions its slot does not hold, a slot out of range, a pass wider than `max_rows`)
in `misuse`, which check M5 reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pytest_onebit.doubles.toy import _remembered_row, mix

#: the logits' column blocks: a row's logits are the sum of these partial products, in order
BLOCK = 4


class ToyBatchRows:
    """`BatchRows` for `slots` sequences over a vocabulary of `vocab_size` tokens."""

    def __init__(self, slots: int = 4, *, vocab_size: int = 48, hidden: int = 16,
                 seed: int = 0, context: int | None = None, max_rows: int | None = None) -> None:
        if slots < 1 or vocab_size < 2 or hidden < 1:
            raise ValueError(f"toy batch rows: slots {slots}, vocab {vocab_size}, hidden "
                             f"{hidden}: each must be >= 1 (vocab >= 2)")
        self._slots = slots
        self._vocab = vocab_size
        self.hidden = hidden
        self._context = context
        self.max_rows = max_rows
        self._unembed = np.random.default_rng(seed).standard_normal((vocab_size, hidden))
        self.cells: list[list[tuple[int, int]]] = [[] for _ in range(slots)]
        self.passes = 0
        self.rows_run = 0
        self.pass_widths: list[int] = []
        self.misuse: list[str] = []

    @property
    def vocab_size(self) -> int:
        return self._vocab

    @property
    def slots(self) -> int:
        return self._slots

    def context(self) -> int | None:
        return self._context

    def state_of(self, slot: int, pos: int) -> int:
        """The hash over the slot's cells at positions <= pos, in the order they were
        written."""
        state = 0
        for p, t in self.cells[slot]:
            if p <= pos:
                state = mix(state, t, p)
        return state

    def logits_of(self, hidden: np.ndarray, batch: int) -> np.ndarray:
        """`unembed @ hidden`, summed block by block in a fixed order (`batch` is not read:
        the order must not depend on it)."""
        logits = np.zeros(self._vocab)
        for b in range(0, self.hidden, BLOCK):
            logits += self._unembed[:, b:b + BLOCK] @ hidden[b:b + BLOCK]
        return logits

    def rows(self, tokens: Sequence[int], positions: Sequence[int], slots: Sequence[int],
             last_of: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
        R = len(tokens)
        if not (len(positions) == len(slots) == len(last_of) == R):
            raise ValueError("tokens, positions, slots and last_of must be one per row")
        self.passes += 1
        self.rows_run += R
        self.pass_widths.append(R)
        if self.max_rows is not None and self.max_rows < R:
            self.misuse.append(f"a pass of {R} rows; the engine's limit is {self.max_rows}")
        logits = np.zeros((R, self._vocab))
        hidden = np.zeros((R, self.hidden))
        for i, (t, p, s) in enumerate(zip(tokens, positions, slots, strict=True)):
            t, p, s = int(t), int(p), int(s)
            if not 0 <= s < self._slots:
                self.misuse.append(f"row {i}: slot {s} is not in [0, {self._slots})")
                continue
            if not 0 <= t < self._vocab:
                self.misuse.append(f"row {i}: token {t} is not in the vocabulary")
                continue
            held = {q for q, _ in self.cells[s]}
            if any(q not in held for q in range(p)):
                self.misuse.append(f"row {i}: position {p} of slot {s}, whose cache does not "
                                   f"hold every earlier position")
            if self._context is not None and p >= self._context:
                self.misuse.append(f"row {i}: position {p} is past the slot's {self._context}")
            self.cells[s].append((p, t))
            row = _remembered_row(self.state_of(s, p), self.hidden, False)
            hidden[i] = row
            logits[i] = self.logits_of(row, R)
        return logits, hidden

    def truncate(self, slot: int, length: int) -> None:
        self.cells[slot] = [(p, t) for p, t in self.cells[slot] if p < length]

    def free(self, slot: int) -> None:
        self.cells[slot] = []
