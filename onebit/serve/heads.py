"""Which draft head a request runs with: the one place the server decides it.

The served default is `auto`, as `onebit generate`'s: prompt lookup under the cost policy,
which sends a round's drafts only where it has measured that they pay, so speculation is
never much slower than plain decoding (prompt lookup with every draft sent lost to plain on
JSON whose keys repeat but whose values do not, and the policy did not: docs/serve.md). A
sampled request under `auto` decodes plainly: the policy's draft lengths follow its clock,
and a seeded answer must not. The named heads (`ngram`, `trained`, ...) send every draft,
for the served checks that judge drafts.

Served in parallel (`--parallel N`), every sequence needs a head of its own (heads keep state
per run), made by `batched_head` for each request. `auto` is then prompt lookup under a cost
policy of its own whose clock is the sequence's share of each pass (`BatchEngine`), so it
sends drafts while the batch leaves rows spare and backs off as the batch fills.
"""

from __future__ import annotations

from onebit.text.generate import HEAD_NAMES, resolve_head

DEFAULT_HEAD = "auto"
SERVE_HEADS = HEAD_NAMES  # "none" serves plain decode only


def head_for(name: str, model, *, speculative: bool = True, draft: str | None = None,
             k: int | None = None, sampled: bool = False):
    """(head, k) for one request: a fresh head (its state is per run), or (None, 1) for plain
    decode when the server runs none or the request asked `speculative: false`. A sampled
    request under `auto` decodes plain, as `onebit.generate` does: the cost policy's draft
    lengths follow its clock, the draws follow the draft lengths, and a seed must give the
    same text every time."""
    if not speculative or name == "none" or (sampled and name == "auto"):
        return None, 1
    # the named heads as they are, every draft sent: the served checks (S1) judge drafts,
    # and a policy that withholds them would leave nothing to judge
    return resolve_head(name, model, k=k, draft=draft, named_under_policy=False)


#: the heads a batched server can run: they read nothing of the base but its tokens (the
#: trained, MTP and DFlash heads read layer taps or hidden rows the batched rows do not carry)
BATCHED_HEADS = ("none", "auto", "ngram")


def batched_head(name: str, *, speculative: bool = True, k: int | None = None,
                 sampled: bool = False):
    """(factory, k) for one request served in parallel: `factory(clock)` makes a fresh head
    for the sequence (`BatchRequest.head`), or (None, 0) for plain decode. A sampled request
    under `auto` decodes plain (`head_for`): its clock, a share of passes, depends on the
    batch, and a seeded answer must not."""
    from onebit.heads import NgramHead
    from onebit.heads.policy import PolicyHead

    if name not in BATCHED_HEADS:
        raise ValueError(f"--head {name} cannot be served in parallel yet (it reads the base's "
                         f"layer taps or hidden rows); parallel serving runs "
                         f"{', '.join(BATCHED_HEADS)}")
    if not speculative or name == "none" or (sampled and name == "auto"):
        return None, 0
    if name == "auto":
        def policy(clock):
            return PolicyHead(NgramHead(n=3, k=k or 8), max_k=k or 7, clock=clock)

        return policy, k or 7
    return (lambda clock: NgramHead(n=3, k=k or 8)), k or 7  # as head_for's ngram
