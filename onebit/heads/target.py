"""What a weighted draft head reads from its target, duck-typed.

The heads know the protocols, not `onebit.models`: a target is any object with
- `vocab_size`, `hidden_size`, `layer_count`;
- `embed_row(token) -> [H]` (unscaled) and `lm_head_logits(rows) -> [R, V]`;
- `set_layer_taps(ids)` and `tapped_rows() -> [T, len(ids), H]` (DFlash only);
- `final_norm(rows) -> [R, H]`, the norm its forward applies before the lm_head (DFlash, only
  when it taps the last layer: the reference's hidden states end with the final-normed one).

Every weighted head turns its rows into draft tokens the same way: `head_logits` (the
target's lm_head) then `pick_tokens`, the one place a logit row becomes a token.
"""

from __future__ import annotations

import numpy as np

from onebit.heads.errors import DraftMismatchError

NEEDS = ("vocab_size", "hidden_size", "embed_row", "lm_head_logits")


def check_target(target: object, what: str, needs: tuple[str, ...] = NEEDS) -> None:
    """Raise `TypeError` if `target` lacks what a head needs."""
    missing = [name for name in needs if not hasattr(target, name)]
    if missing:
        raise TypeError(
            f"{what} needs a target with {', '.join(needs)}; {type(target).__name__} lacks "
            f"{', '.join(missing)}"
        )


def check_hidden_size(target: object, hidden: int, what: str) -> None:
    if int(target.hidden_size) != hidden:  # type: ignore[attr-defined]
        raise DraftMismatchError(
            f"{what} has hidden size {hidden}, its target {target.hidden_size}: "  # type: ignore[attr-defined]
            "the draft was made for another model"
        )


def final_norm(target: object):
    """The target's final norm as a function of `[R, H]` rows; `TypeError` if it has none."""
    norm = getattr(target, "final_norm", None)
    if not callable(norm):
        raise TypeError(f"{type(target).__name__} has no final_norm(rows): a DFlash draft "
                        "that taps the target's last layer reads it after the final norm")
    return norm


def embed_rows(target: object, tokens: list[int], scale: float, dtype: np.dtype) -> np.ndarray:
    """`[len(tokens), H]`: the target's embedding of each token, times `scale`."""
    rows = np.stack([np.asarray(target.embed_row(t)) for t in tokens]).astype(dtype)  # type: ignore[attr-defined]
    return rows * dtype.type(scale) if scale != 1.0 else rows


def head_logits(target: object, rows: np.ndarray) -> np.ndarray:
    """`[R, V]`: the target's lm_head on final-normed rows `[R, H]`."""
    logits = np.asarray(target.lm_head_logits(rows))  # type: ignore[attr-defined]
    return logits.reshape(rows.shape[0], -1)


def pick_tokens(logits: np.ndarray) -> list[int]:
    """The draft token of each logit row: greedy (argmax)."""
    return [int(t) for t in np.argmax(logits, axis=1)]


def argmax_tokens(target: object, rows: np.ndarray) -> list[int]:
    """The target's greedy token for each final-normed row."""
    return pick_tokens(head_logits(target, rows))
