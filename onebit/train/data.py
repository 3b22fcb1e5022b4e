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

import os
import zipfile
from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import numpy as np

#: how many of the base's likeliest next tokens are kept per position, with their logits: the
#: soft targets a head is distilled on (the rest of the distribution is too small to matter)
TOP = 32


@dataclass
class Sequence:
    """One prompt and the base's greedy answer."""

    tokens: np.ndarray  # [T] int64: prompt then answer
    answer_start: int  # index of the first answer token
    features: np.ndarray  # [T, 3, H] float16: tap low, tap mid (raw), final-normed hidden
    top_ids: np.ndarray  # [T, TOP] int32: the base's likeliest tokens after each position
    top_logits: np.ndarray  # [T, TOP] float32: their logits, best first

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


def top_of(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The TOP likeliest tokens of each row of logits and their logits, best first (ties in
    logit: the order argsort's stable sort gives the partition's), `[n, TOP]` each."""
    top = np.argpartition(-rows, TOP, axis=1)[:, :TOP]
    vals = np.take_along_axis(rows, top, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")
    return (np.take_along_axis(top, order, axis=1).astype(np.int32),
            np.take_along_axis(vals, order, axis=1).astype(np.float32))


def features_of(model, tokens: Seq[int], taps: tuple[int, int]):
    """For each position of `tokens`: `[T, 3, H]` float32, the two tapped layers' outputs and
    the final-normed hidden row; and the base's TOP likeliest next tokens with their logits
    (`[T, TOP]` each), from prefill batches of the model's widest prefill."""
    width = int(model.max_prefill_rows())
    model.reset()
    model.set_layer_taps(list(taps))
    hidden, ids, logits = [], [], []
    tokens = [int(t) for t in tokens]
    for pos in range(0, len(tokens), width):
        chunk = tokens[pos: pos + width]
        rows = model.verify(chunk, pos)
        model.commit_verify(len(chunk))
        hidden.append(model.last_hidden_rows())
        top_ids, top_logits = top_of(rows)
        ids.append(top_ids)
        logits.append(top_logits)
    tapped = model.tapped_rows()  # [T, 2, H]
    model.reset()
    feats = np.concatenate([tapped, np.concatenate(hidden)[:, None, :]], axis=1)
    return feats, np.concatenate(ids), np.concatenate(logits)


def sequence_of(model, tokens: Seq[int], answer_start: int, taps: tuple[int, int]) -> Sequence:
    """The `Sequence` of a prompt + answer whose answer starts at `answer_start`."""
    feats, ids, logits = features_of(model, tokens, taps)
    return Sequence(np.asarray(tokens, np.int64), int(answer_start), feats.astype(np.float16),
                    ids, logits)


def distil(model, prompts: Seq[str], *, max_tokens: int, taps: tuple[int, int],
           on_prompt: Callable[[int, int], None] | None = None,
           at_once: int = 8) -> list[Sequence]:
    """The base's greedy answer to each prompt, with its features, in prompt order.

    The answers are `generate`'s greedy ones. On a model with the compiled stack, `at_once`
    of them are decoded side by side (`onebit.text.answers.greedy_answers`: one pass of the
    weights for all), and each position's rows are kept as the pass computes them: the same
    bits a prefill of the whole sequence gives (rows do not depend on the batch), without
    running it. Elsewhere each answer is decoded alone and then prefilled (`sequence_of`).
    `on_prompt(i, answer length)` is told as each prompt's answer is done (the progress
    bar)."""
    from onebit.text.answers import greedy_answers

    out: list[Sequence | None] = [None] * len(prompts)
    if getattr(model, "sequence_stack", None) is None or model.sequence_stack(1) is None:
        for i, answer in enumerate(greedy_answers(model, prompts, max_tokens=max_tokens)):
            out[i] = sequence_of(model, answer.prompt_ids + answer.tokens,
                                 len(answer.prompt_ids), taps)
            if on_prompt is not None:
                on_prompt(i, len(answer.tokens))
        return out  # type: ignore[return-value]

    kept: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = {}

    def rows(i: int, first: int, logits, hidden, tapped) -> None:
        top_ids, top_logits = top_of(logits)
        feats = np.concatenate([tapped, hidden[:, None, :]], axis=1).astype(np.float16)
        kept.setdefault(i, []).append((feats, top_ids, top_logits))

    def done(i: int, answer) -> None:
        feats, ids, logits = (np.concatenate(part) for part in zip(*kept.pop(i), strict=True))
        tokens = np.asarray(answer.prompt_ids + answer.tokens, np.int64)
        out[i] = Sequence(tokens, len(answer.prompt_ids), feats, ids, logits)
        if on_prompt is not None:
            on_prompt(i, len(answer.tokens))

    greedy_answers(model, prompts, max_tokens=max_tokens, batch=at_once, on_answer=done,
                   on_rows=rows, taps=tuple(taps))
    return out  # type: ignore[return-value]


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


class SequenceFileError(ValueError):
    """A file of distilled sequences (`save_sequences`) that is not one: names the file and
    what is wrong with it."""


#: the arrays a sequences file holds, with their dtypes
_FIELDS = {"tokens": np.int64, "lengths": np.int64, "answer_starts": np.int64,
           "features": np.float16, "top_ids": np.int32, "top_logits": np.float32}


def save_sequences(path: str | os.PathLike, sequences: Seq[Sequence]) -> None:
    """Write `sequences` to one `.npz` file (plain arrays, no pickles), so a benchmark can fit
    heads on them again without distilling again."""
    if not sequences:
        raise ValueError("no sequences to save")
    np.savez(path, tokens=np.concatenate([s.tokens for s in sequences]).astype(np.int64),
             lengths=np.array([len(s) for s in sequences], np.int64),
             answer_starts=np.array([s.answer_start for s in sequences], np.int64),
             features=np.concatenate([s.features for s in sequences]).astype(np.float16),
             top_ids=np.concatenate([s.top_ids for s in sequences]).astype(np.int32),
             top_logits=np.concatenate([s.top_logits for s in sequences]).astype(np.float32))


def load_sequences(path: str | os.PathLike, *, vocab_size: int,
                   hidden_size: int) -> list[Sequence]:
    """The sequences `save_sequences` wrote, checked against the base they are for: every
    array present with its dtype and a shape that agrees with the others, token ids inside
    the vocabulary, every answer start inside its sequence. Pickled objects are refused."""
    def bad(why: str) -> SequenceFileError:
        return SequenceFileError(f"{path}: {why}")

    _check_sizes(path, bad)
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {name: f[name] for name in _FIELDS if name in f.files}
    except (OSError, ValueError, EOFError) as e:
        raise bad(f"not a sequences file ({e})") from e
    for name, dtype in _FIELDS.items():
        if name not in arrays:
            raise bad(f"no {name!r} array")
        if arrays[name].dtype != dtype:
            raise bad(f"{name!r} is {arrays[name].dtype}, not {np.dtype(dtype)}")
    tokens, lengths, starts = arrays["tokens"], arrays["lengths"], arrays["answer_starts"]
    total = int(tokens.shape[0]) if tokens.ndim == 1 else -1
    if total < 0 or lengths.ndim != 1 or starts.shape != lengths.shape:
        raise bad("tokens, lengths and answer_starts must be 1-d, one start per length")
    if (lengths < 2).any() or int(lengths.sum()) != total:
        raise bad(f"the lengths (each at least 2) must add up to the {total} tokens")
    if ((starts < 1) | (starts >= lengths)).any():
        raise bad("an answer start lies outside its sequence")
    if total and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise bad(f"a token id lies outside the base's vocabulary of {vocab_size}")
    for name, shape in (("features", (total, 3, hidden_size)), ("top_ids", (total, TOP)),
                        ("top_logits", (total, TOP))):
        if arrays[name].shape != shape:
            raise bad(f"{name!r} has shape {arrays[name].shape}, not {shape}")
    ends = np.cumsum(lengths)
    return [Sequence(tokens[e - n:e], int(a), arrays["features"][e - n:e],
                     arrays["top_ids"][e - n:e], arrays["top_logits"][e - n:e])
            for n, e, a in zip(lengths.tolist(), ends.tolist(), starts.tolist(), strict=True)]


def _check_sizes(path, bad) -> None:
    """Refuse, before anything is allocated, an array whose header claims more bytes than the
    whole file holds (a hostile header would otherwise make NumPy allocate what it claims)."""
    try:
        size = os.path.getsize(path)
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if info.compress_type != zipfile.ZIP_STORED:
                    raise bad(f"{info.filename!r} is compressed (save_sequences stores)")
                with z.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                            else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read(member)
                if int(np.prod(shape, dtype=object)) * dtype.itemsize > size:
                    raise bad(f"{info.filename!r} claims shape {shape}, more than the file's "
                              f"{size} bytes")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        if isinstance(e, SequenceFileError):
            raise
        raise bad(f"not a sequences file ({e})") from e
