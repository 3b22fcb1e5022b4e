"""The loop's batched prefill on the real forward (fabricated Qwen3 and Qwen3.5, Q4NX): a
prompt sent through `verify` + `commit_verify` in batches of `max_prefill_rows()` leaves the
model, the text, the hidden rows a head is handed and the taps a DFlash head reads bit for bit
as stepping the prompt one token at a time leaves them."""

from __future__ import annotations

import numpy as np
import pytest

import onebit
from onebit.heads import fabricate_dflash, fabricate_mtp, load_dflash, load_mtp
from onebit.models import load_model

PROMPT = [(37 * i + 11) % 256 for i in range(45)]  # past the KV cache's first capacity of 64
N = 6


class Recording:
    """A head wrapper that keeps every `commit_rows` and `propose` the loop makes."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.commits: list[tuple[list[int], np.ndarray, int]] = []
        self.proposals: list[tuple[int, int, int, list[int]]] = []

    def needs_last_hidden(self) -> bool:
        return self.inner.needs_last_hidden()

    def reset(self) -> None:
        self.commits, self.proposals = [], []
        self.inner.reset()

    def commit_rows(self, tokens, rows, count) -> None:
        self.commits.append((list(tokens[:count]), np.array(rows[:count]), count))
        self.inner.commit_rows(tokens, rows, count)

    def propose(self, token, pos, k, hidden):
        drafts = list(self.inner.propose(token, pos, k, hidden))
        self.proposals.append((token, pos, k, drafts))
        return drafts


class Silent:
    """A one-pass head that never drafts: the run is plain decode with a head's bookkeeping."""

    def needs_last_hidden(self) -> bool:
        return False

    def reset(self) -> None: ...

    def commit_rows(self, tokens, rows, count) -> None: ...

    def propose(self, token, pos, k, hidden):
        return []


def _stepped(model, tokens):
    """Step `tokens` from a reset: the hidden row after each, and the last step's logits."""
    model.reset()
    rows = []
    for pos, token in enumerate(tokens):
        logits = model.step(token, pos)
        rows.append(model.last_hidden())
    return np.stack(rows), logits


@pytest.mark.parametrize("width", [1, 8, 13, 32, 45, 64])
def test_batched_prefill_is_bit_identical_to_stepping(model_dirs, kind, width):
    """With prefill batches of `width` rows (one row, which the forward widens to its verify
    width of 8; 13, which leaves a remainder of 6; 32; the whole prompt; the default 64,
    wider than it), the head is handed the
    45 prompt rows bit for bit as stepping gives them, in one call, the text is greedy()'s
    (which steps its prompt), the stats count ceil(45 / width) prefill batches apart from the
    decode, and the next step after the run gives greedy's logits bit for bit."""
    path = model_dirs[kind, "q4nx"]
    reference = load_model(path)
    rows, _ = _stepped(reference, PROMPT)
    greedy = onebit.greedy(reference, PROMPT, max_tokens=N)
    after = reference.step(5, len(PROMPT) + N)

    model = load_model(path, max_prefill_rows=width)
    assert model.max_prefill_rows() == max(width, model.max_batch_rows())
    head = Recording(Silent())
    result = onebit.run(model, head, PROMPT, max_tokens=N, k=3)
    assert result.tokens == greedy.tokens
    tokens, got, count = head.commits[0]
    assert (tokens, count) == (PROMPT, len(PROMPT))
    assert got.dtype == rows.dtype and np.array_equal(got, rows)
    s = result.stats
    wide = model.max_prefill_rows()
    assert (s.prefill_batches, s.prefill_rows, s.prefill_steps) == (-(-len(PROMPT) // wide),
                                                                    len(PROMPT), 0)
    assert (s.steps, s.batches) == (N, 0)  # the decode alone: the silent head never drafts
    assert np.array_equal(model.step(5, len(PROMPT) + N), after)


def test_batched_prefill_leaves_the_taps_of_stepping(model_dirs, kind):
    """The tapped layer outputs a DFlash head reads after a batched prefill (32 + 13 rows)
    equal stepping's for every prompt token and layer, bit for bit, and so does the state:
    the next step's logits."""
    path = model_dirs[kind, "q4nx"]
    reference, model = load_model(path), load_model(path, max_prefill_rows=32)
    for m in (reference, model):
        m.set_layer_taps(list(range(m.layer_count)))
    _, stepped_logits = _stepped(reference, PROMPT)
    result = onebit.run(model, None, PROMPT, max_tokens=0, k=0)
    assert result.stats.prefill_batches == 2
    assert np.array_equal(model.tapped_rows(), reference.tapped_rows())
    t1 = int(np.argmax(stepped_logits))
    assert np.array_equal(model.step(t1, len(PROMPT)), reference.step(t1, len(PROMPT)))


def _first_proposal_after_stepping(model, head, k):
    """What `head` drafts first when the prompt is stepped and handed over by hand: the
    reference a batched prefill must match."""
    head.reset()
    rows, logits = _stepped(model, PROMPT)
    head.commit_rows(PROMPT, rows, len(PROMPT))
    t1, pos = int(np.argmax(logits)), len(PROMPT)
    hidden = None
    if head.needs_last_hidden():
        model.step(t1, pos)
        hidden = model.last_hidden()
        head.commit_rows([t1], hidden[None, :], 1)
    return t1, pos, k, list(head.propose(t1, pos, k, hidden))


@pytest.mark.parametrize("name", ["dflash", "mtp"])
def test_heads_draft_the_same_after_a_batched_prefill(model_dirs, kind, name, tmp_path):
    """A DFlash head (which reads the prompt's tapped layers) and an MTP head (which reads its
    hidden rows) draft exactly the same first proposal after the loop's batched prefill as
    after stepping the prompt and handing it the rows by hand."""
    model = load_model(model_dirs[kind, "q4nx"])
    if name == "dflash":
        head = load_dflash(fabricate_dflash(tmp_path / "draft", model, block_size=5), model)
    else:
        head = load_mtp(fabricate_mtp(tmp_path / "mtp", model), model)
    recording = Recording(head)
    onebit.run(model, recording, PROMPT, max_tokens=4, k=3)
    assert recording.proposals, "the head was never asked to draft"
    assert recording.proposals[0] == _first_proposal_after_stepping(model, head, 3)


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "64"])
def test_bad_prefill_width_option_is_refused(model_dirs, value):
    """load_model(max_prefill_rows=...) must be an integer >= 1: anything else is a
    ValueError naming the option and the value."""
    with pytest.raises(ValueError, match=f"max_prefill_rows must be an integer >= 1, got "
                                         f"{value!r}"):
        load_model(model_dirs["qwen3", "q4nx"], max_prefill_rows=value)


def test_a_verify_wider_than_the_prefill_width_is_refused(model_dirs):
    """A verify of max_prefill_rows() + 1 rows is refused, naming the row count; one of
    max_prefill_rows() rows runs."""
    model = load_model(model_dirs["qwen3", "q4nx"], max_prefill_rows=12)
    with pytest.raises(ValueError, match="verify got 13 rows; max_batch_rows"):
        model.verify(PROMPT[:13], 0)
    model.verify(PROMPT[:12], 0)
    model.commit_verify(12)
    assert model.committed_length == 12


def test_gemma4_prefills_at_its_verify_width(tmp_path):
    """Gemma 4's sliding-window ring holds max_batch_rows() rows past the window, so it
    declares no wider prefill batch and refuses to be given one."""
    from onebit.models.gemma4_fabricate import fabricate_gemma4

    path = fabricate_gemma4(tmp_path / "g")
    model = load_model(path, max_batch_rows=4)
    assert model.max_prefill_rows() == model.max_batch_rows() == 4
    with pytest.raises(ValueError, match="max_prefill_rows = 16: a Gemma 4 model prefills in "
                                         r"batches of max_batch_rows \(4\)"):
        load_model(path, max_batch_rows=4, max_prefill_rows=16)
    result = onebit.run(model, None, PROMPT[:10], max_tokens=3, k=0)
    assert result.tokens == onebit.greedy(load_model(path, max_batch_rows=4), PROMPT[:10],
                                          max_tokens=3).tokens
    assert result.stats.prefill_batches == 3
