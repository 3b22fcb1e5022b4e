"""Which draft head a request runs with: the server's face on the head registry
(onebit.heads.registry), which decides it for the library and the server alike.

The served default is `auto`, as `onebit generate`'s: prompt lookup under the cost policy,
which sends a round's drafts only where it has measured that they pay, so speculation is
never much slower than plain decoding (prompt lookup with every draft sent lost to plain on
JSON whose keys repeat but whose values do not, and the policy did not: docs/serve.md). A
seeded sampled request under `auto` decodes plainly, as in `onebit.generate`. The named heads
(`ngram`, `trained`, ...) send every draft, for the served checks that judge drafts.

Served in parallel (`--parallel N`), every sequence needs a head of its own (heads keep state
per run), made by `batched_head` for each request. `auto` is then prompt lookup under a cost
policy of its own whose clock is the sequence's share of each pass (`BatchEngine`), so it
sends drafts while the batch leaves rows spare and backs off as the batch fills.
"""

from __future__ import annotations

from onebit.heads import registry

DEFAULT_HEAD = "auto"
SERVE_HEADS = registry.HEAD_NAMES  # "none" serves plain decode only
#: the heads a batched server can run: they read nothing of the base but its tokens
BATCHED_HEADS = registry.BATCHED_HEAD_NAMES


def head_for(name: str, model, *, speculative: bool = True, draft: str | None = None,
             k: int | None = None, seeded: bool = False):
    """(head, k) for one request: a fresh head with every draft sent, or (None, 1) for plain
    decode (the head "none", `speculative: false`, or a seeded sampled request under
    `auto`)."""
    return registry.resolve(name, model, k=k, draft=draft, every_draft=True,
                            speculative=speculative, seeded=seeded)


def batched_head(name: str, *, speculative: bool = True, k: int | None = None,
                 seeded: bool = False):
    """(factory, k) for one request served in parallel: `factory(clock)` makes a fresh head
    for the sequence (`BatchRequest.head`), or (None, 0) for plain decode."""
    return registry.batched(name, k=k, speculative=speculative, seeded=seeded)
