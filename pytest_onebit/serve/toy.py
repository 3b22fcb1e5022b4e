"""`ServedToy`: a small real model a served engine can run, one sequence at a time or batched.

The served contract needs a model with a tokenizer (a server speaks text), a context limit (a
server refuses what does not fit) and, for the batched mode, rows of several sequences in one
pass (`onebit.batch.BatchRows`). It must be quick: every mutant of `mutants/serve/` runs the
contract again. So it is onebit's own NumPy forward on a fabricated Qwen3 (random weights,
nothing to compile or download), with a tokenizer of printable ASCII and 128 two-letter tokens:
every token decodes to text a JSON body carries as it is, and a stop string can begin in the
middle of a token, which is where stop handling goes wrong.

Batched, each slot is a model instance of its own, driven by exactly the calls the sequence
alone would make (`verify(tokens, pos)`, then the commit its next call implies), so a slot's
rows are those of the sequence alone bit for bit: what the contract compares is then the
engine's scheduling and hand-back, not a kernel's batch invariance (the batch contract M1..M6
and the base contract B1..B8 hold those). `pass_delay` makes each pass (a batched one, or a
step or verify of the one sequence) take at least that long: a client that goes away
mid-answer then leaves while its decode still has a long way to go, and lands inside a pass,
where the hand-back is hardest.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np

from onebit.wrapped import WrappedBase

#: the letters the two-letter tokens are made of (the commonest in English, and a space)
PAIR_LETTERS = "etaoinshrdlu "
#: the toy's context: small, so a request past it is cheap to make
CONTEXT = 512


@cache
def ascii_tokenizer():
    """A byte-level BPE vocabulary (llama.cpp's `gpt2` model): ids 0..127 the ASCII bytes,
    128..255 two-letter tokens with their merges, then `<|endoftext|>` (EOS),
    `<|im_start|>` (BOS) and `<|im_end|>` (end of turn). No chat template: chat prompts are
    rendered as ChatML."""
    from onebit.text import Tokenizer
    from onebit.text.bytelevel import byte_alphabet

    alphabet = byte_alphabet()
    pairs = [a + b for a in PAIR_LETTERS for b in PAIR_LETTERS][:128]
    spelled = ["".join(alphabet[ord(c)] for c in pair) for pair in pairs]
    tokens = [alphabet[b] for b in range(128)] + spelled + [
        "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    return Tokenizer.from_gguf_metadata({
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [1] * 256 + [3] * 3,
        "tokenizer.ggml.merges": [" ".join(s) for s in spelled],
        "tokenizer.ggml.bos_token_id": 257,
        "tokenizer.ggml.eos_token_id": 256,
    })


_lock = threading.Lock()
_folder: list[Path] = []


def _model_path() -> Path:
    """The fabricated model's folder, written once per process."""
    from onebit.models.fabricate import fabricate_model

    with _lock:
        if not _folder:
            root = Path(tempfile.mkdtemp(prefix="onebit-served-toy-"))
            _folder.append(fabricate_model(root / "model", "qwen3", vocab_size=259, seed=7))
        return _folder[0]


def load_toy_model():
    """A fresh instance of the fabricated model on the NumPy kernel, with the tokenizer and
    the context limit attached (as the GGUF loader attaches a file's)."""
    from onebit.models import load_model

    model = load_model(_model_path(), kernel="numpy")
    model.tokenizer = ascii_tokenizer()
    model.context_length = CONTEXT
    return model


class _Slot:
    """One slot: a model instance, and the verify whose rows are not yet committed (its first
    position and row count): the slot commits what the next call's position implies."""

    def __init__(self) -> None:
        self.model = load_toy_model()
        self.pending: tuple[int, int] | None = None

    def settle(self, pos: int) -> None:
        committed = self.model.committed_length
        if self.pending is not None:
            first, n = self.pending
            if not first <= pos <= first + n:
                raise ValueError(f"a row at position {pos}, after a verify of {n} rows at "
                                 f"{first}: the slot cannot rewind or skip")
            self.model.commit_verify(pos - first)
            self.pending = None
        elif pos != committed:
            raise ValueError(f"a row at position {pos}; the slot holds {committed}")

    def forget(self) -> None:
        self.model.reset()
        self.pending = None


class ServedToy(WrappedBase):
    """The toy model for one sequence (a `BaseModel` with `.tokenizer`) and, with `slots`,
    for `slots` sequences at once (a `BatchRows`: onebit's `BatchEngine` takes it as it is).
    `context` is the context it states (the model itself takes any length): wider than
    `CONTEXT` for a prompt that needs it, such as one listing tools."""

    def __init__(self, slots: int = 1, *, pass_delay: float = 0.0,
                 context: int = CONTEXT) -> None:
        super().__init__(load_toy_model())
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.tokenizer = self._base.tokenizer
        self.context_length = context
        self.pass_delay = pass_delay
        self._slots = [_Slot() for _ in range(slots)]

    # -- one sequence (the base the loop runs one at a time): each pass as slow as asked ---

    def _paced(self, started: float):
        left = self.pass_delay - (time.perf_counter() - started)
        if left > 0:
            time.sleep(left)

    def step(self, token: int, pos: int):
        started = time.perf_counter()
        row = self._base.step(token, pos)
        self._paced(started)
        return row

    def verify(self, tokens: Sequence[int], pos: int):
        started = time.perf_counter()
        rows = self._base.verify(tokens, pos)
        self._paced(started)
        return rows

    # -- BatchRows ------------------------------------------------------------------------

    @property
    def slots(self) -> int:
        return len(self._slots)

    def context(self) -> int | None:
        return self.context_length

    def rows(self, tokens: Sequence[int], positions: Sequence[int], slots: Sequence[int],
             last_of: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
        started = time.perf_counter()
        logits = np.zeros((len(tokens), self.vocab_size), np.float32)
        i = 0
        while i < len(tokens):  # each slot's rows are one call of its sequence, in a run
            j = i + 1
            while (j < len(tokens) and slots[j] == slots[i]
                   and positions[j] == positions[j - 1] + 1):
                j += 1
            slot = self._slots[int(slots[i])]
            slot.settle(int(positions[i]))
            logits[i:j] = slot.model.verify([int(t) for t in tokens[i:j]], int(positions[i]))
            slot.pending = (int(positions[i]), j - i)
            i = j
        self._paced(started)
        # the batched heads (none, auto, ngram) read no hidden rows
        return logits, np.zeros((len(tokens), 1), np.float32)

    def truncate(self, slot: int, length: int) -> None:
        if length == 0:
            self._slots[slot].forget()
        # otherwise the next call's position says what is kept (`_Slot.settle`)

    def free(self, slot: int) -> None:
        self._slots[slot].forget()
