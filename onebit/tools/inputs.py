"""What the tools read: prompt files of token ids, the target, and the head to score.

A prompt file holds one prompt per line, token ids separated by spaces or commas (the
tokenizer stays out of the harness). Blank lines and lines starting with `#` are skipped.
Every problem is a `ToolInputError` (a `ValueError`) with a one-line message naming the file
and line, which the commands print without a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

HEADS = ("dflash", "mtp", "ngram", "perfect")


class ToolInputError(ValueError):
    """Bad input to a tool: a prompt file, a token id, an option."""


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
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        prompt = []
        for word in re.split(r"[\s,]+", line):
            if not word:
                continue
            if not re.fullmatch(r"\d+", word):
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
        import onebit
        from onebit.heads import GreedyOracleHead

        return GreedyOracleHead({tuple(p): onebit.greedy(target, p, max_tokens=tokens).tokens
                                 for p in prompts})
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
