"""Which draft head a request runs with: the one place the server decides it.

Today the served head is prompt lookup (`ngram`), which needs no weights. A trained head and a
policy that picks per model are coming; they change `DEFAULT_HEAD` and `head_for`, and
nothing else in the server.
"""

from __future__ import annotations

from onebit.text.generate import HEAD_NAMES, resolve_head

DEFAULT_HEAD = "ngram"
SERVE_HEADS = HEAD_NAMES  # "none" serves plain decode only


def head_for(name: str, model, *, speculative: bool = True, draft: str | None = None,
             k: int | None = None):
    """(head, k) for one request: a fresh head (its state is per run), or (None, 1) for plain
    decode when the server runs none or the request asked `speculative: false`."""
    if not speculative or name == "none":
        return None, 1
    # the named heads as they are, every draft sent: the served checks (S1) judge drafts,
    # and a policy that withholds them would leave nothing to judge
    return resolve_head(name, model, k=k, draft=draft, named_under_policy=False)
