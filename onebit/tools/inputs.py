"""What the tools read: prompt files of token ids, the target, and the head to score.

A prompt file holds one prompt per line, token ids (ASCII digits) separated by spaces or commas
(the tokenizer stays out of the harness). `#` starts a comment, at the start of a line or
after its ids; blank lines and comment lines are skipped.
Every problem is a `ToolInputError` (a `ValueError`) with a one-line message naming the file
and line, which the commands print without a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

HEADS = ("dflash", "mtp", "ngram", "perfect")


class ToolInputError(ValueError):
    """Bad input to a tool: a prompt file, a token id, an option."""


class ComputeError(ToolInputError):
    """The model or head under a tool failed: a forward raised, or gave logits that are not
    finite. A tool refuses to report a score from such a run (argmax over NaN is token 0 at
    every step, which scores as a perfect head)."""


@contextmanager
def refusing_faults(where: str) -> Iterator[None]:
    """Run a tool's compute; any failure of the model or head in it (a onebit `DecodeError`,
    or anything else they raise) becomes a `ComputeError` naming `where` and the cause.
    numpy's overflow warnings are silenced inside: the logits are checked instead, and the
    error is the one line a tool prints."""
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            yield
    except ToolInputError:
        raise
    except Exception as error:
        message = " ".join(str(error).split()) or "(no message)"
        raise ComputeError(f"{where}: {type(error).__name__}: {message}") from error


def checked_logits(logits: object, vocab: int, pos: int) -> np.ndarray:
    """`logits` when they are `vocab` finite scores; a `ComputeError` naming `pos` else."""
    row = np.asarray(logits)
    if row.shape != (vocab,):
        raise ComputeError(f"the model's logits scoring position {pos} have shape {row.shape}; "
                           f"expected ({vocab},)")
    if row.dtype.kind not in "fiu":
        raise ComputeError(f"the model's logits scoring position {pos} have dtype {row.dtype}; "
                           "expected numbers")
    if not np.isfinite(row).all():
        raise ComputeError(f"the model gave non-finite logits scoring position {pos} "
                           f"({int((~np.isfinite(row)).sum())} of {vocab}); no score from a "
                           "broken forward")
    return row


def read_prompt_ids(path: str | Path, vocab_size: int | None = None) -> list[list[int]]:
    """The prompts of a token-id file, each a non-empty list of ids in [0, vocab_size)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ToolInputError(f"{path}: no such prompt file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ToolInputError(f"{path}: cannot read the prompt file: {error}") from None
    prompts = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        prompt = []
        for word in re.split(r"[\s,]+", line):
            if not word:
                continue
            if not re.fullmatch(r"[0-9]+", word):  # \d would take full-width and other digits
                raise ToolInputError(
                    f"{path}:{number}: {word[:20]!r} is not a token id (a prompt line holds "
                    "non-negative integers separated by spaces or commas)"
                )
            token = int(word)
            if vocab_size is not None and token >= vocab_size:
                raise ToolInputError(
                    f"{path}:{number}: token id {token} is past the vocabulary [0, {vocab_size})"
                )
            prompt.append(token)
        if not prompt:
            raise ToolInputError(f"{path}:{number}: a prompt line with no token ids")
        prompts.append(prompt)
    if not prompts:
        raise ToolInputError(f"{path}: no prompts (one prompt of token ids per line)")
    return prompts


def make_head(kind: str, target: object, *, draft: str | Path | None = None,
              k: int = 8, ngram_n: int = 3, prompts: Sequence[Sequence[int]] = (),
              tokens: int = 0, model: str | Path | None = None):
    """The head `kind` ("dflash", "mtp", "ngram", "perfect") for `target`; the weighted heads
    load their draft from directory `draft` ("mtp" without one: the MTP layers of the `model`
    checkpoint itself, as Qwen3.5 ships them); "perfect" runs the target greedily for `tokens`
    tokens after each of `prompts` and proposes that text (the ceiling to measure against).
    Raises `ToolInputError` / `DraftError` (ValueErrors)."""
    if kind not in HEADS:
        raise ToolInputError(f"unknown head {kind!r}; one of {', '.join(HEADS)}")
    if kind == "perfect":
        from onebit.heads import GreedyOracleHead
        from onebit.reference import greedy

        texts = {}
        for i, p in enumerate(prompts, start=1):
            with refusing_faults(f"the greedy text of prompt {i} (for --head perfect)"):
                texts[tuple(p)] = greedy(target, p, max_tokens=tokens).tokens
        return GreedyOracleHead(texts)
    if kind == "ngram":
        from onebit.heads import NgramHead

        return NgramHead(n=ngram_n, k=k)
    if draft is None and kind == "mtp" and model is not None:
        from onebit.heads import load_own_mtp

        return load_own_mtp(model, target)
    if draft is None:
        raise ToolInputError(f"--head {kind} needs --draft DIR (the draft's weights)")
    if kind == "dflash":
        from onebit.heads import load_dflash

        return load_dflash(draft, target)
    from onebit.heads import load_mtp

    return load_mtp(draft, target)


def natural_k(head: object, default: int = 7) -> int:
    """How many drafts a head makes by nature: a DFlash block's B - 1, else `default`."""
    block = getattr(head, "block_size", None)
    return block - 1 if block else default


def load_target(path: str | Path):
    """The model in directory `path` (`onebit.models.load_model`)."""
    from onebit.models import load_model

    return load_model(path)
