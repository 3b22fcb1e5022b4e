"""Suffix decoding: draft from text that repeats (ArcticInference's SuffixDecoding, vLLM's
`method: "suffix"`).

A `SuffixTree` counts every run of up to `depth` consecutive tokens of the text it is given
(a suffix trie cut at that depth): the node for a run w holds how often w occurred. Appending
one token touches the `depth` runs that end with it, so the tree grows by O(depth) a token and
is never rebuilt. A tree is fed two ways: one running sequence (`extend`: the prompt and the
answer so far, grown as tokens are committed) or separate sequences that share no runs across
their boundaries (`insert` / `remove`: the finished answers of `SuffixCache`).

Drafting (`SuffixTree.draft`): the longest tail of the context (up to `depth` tokens) that
occurred in the tree with something after it is the match; from its node the draft follows
the most frequent child (a tie: the one seen last) while count(child) / count(node) is at
least `min_prob` (ArcticInference's floor, 0.1), for at most `spec_factor` x the match's length
(ArcticInference's `max_spec_factor`, 1.0) and at most k tokens. A walk that reaches the
tree's depth drops its oldest token (the node of the run one shorter, which occurred wherever
the longer one did) and goes on, so a long, sure match drafts up to k = 32 with a tree of
depth 32. Each draft's step probability is kept; their product is the draft's `score`.

`SuffixHead` drafts from the request's own tree and, when given one, a shared `SuffixCache`
of recent answers: the draft with more expected accepted tokens (the sum over its drafts of
the product of the step probabilities so far) wins; a tie goes to the longer match, then to
the request's own tree. The head never writes into the cache: it keeps the committed tokens
after the prompt in `answer`, and whoever ran it adds a finished answer with
`cache.add(head.answer)`. The drafts are deterministic (q is one-hot), so greedy text equals
plain decoding's and sampled text is distributed as plain sampling's; a wrong draft costs a
verify row, never a token.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: how many tokens a run of the tree holds at most (ArcticInference's default is 24; 32 lets a
#: match of 32 tokens draft 32 at spec_factor 1)
SUFFIX_DEPTH = 32
#: the most drafts a round sends: a long, sure match is as good a source as a prediction
SUFFIX_K = 32
#: the least count(child) / count(node) a draft follows (ArcticInference's min_token_prob)
MIN_PROB = 0.1
#: the most drafts per matched token (ArcticInference's max_spec_factor)
SPEC_FACTOR = 1.0
#: the shared cache's default bounds: tokens (the tree holds at most depth nodes a token) and
#: answers
CACHE_TOKENS = 16384
CACHE_ANSWERS = 256


def _check_int(who: str, name: str, value, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{who}: {name} must be an integer >= {least}, got {value!r}")


def _check_number(who: str, name: str, value, low: float, high: float | None) -> None:
    ok = not isinstance(value, bool) and isinstance(value, int | float) \
        and math.isfinite(value) and value >= low and (high is None or value <= high)
    if not ok:
        span = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{who}: {name} must be a number {span}, got {value!r}")


class _Node:
    """A run of tokens: how often it occurred, when last (the tree's tick), its children by
    next token, and the token of its most frequent child (a tie: the one seen last). A node
    with one child keeps it in `one` (its token is `best`), one with more in the dict `kids`:
    a trie cut at depth d is mostly chains, and a dict a node would cost three nodes."""

    __slots__ = ("best", "count", "kids", "last", "one")

    def __init__(self) -> None:
        self.count = 0
        self.last = -1
        self.best = -1  # the most frequent child's token, -1 when none
        self.one: _Node | None = None  # the only child, when there is exactly one
        self.kids: dict[int, _Node] | None = None  # the children, when there are two or more

    def child(self, token: int) -> _Node | None:
        if self.kids is not None:
            return self.kids.get(token)
        return self.one if token == self.best else None

    def children(self) -> dict[int, _Node]:
        if self.kids is not None:
            return self.kids
        return {self.best: self.one} if self.one is not None else {}

    def add_child(self, token: int, tick: int) -> tuple[_Node, bool]:
        """Count one more occurrence of this run followed by `token`; returns the child and
        whether it is new."""
        child = self.child(token)
        new = child is None
        if child is None:
            child = _Node()
            if self.kids is None and self.one is None:
                self.one, self.best = child, token
            else:
                if self.kids is None:
                    self.kids = {self.best: self.one}  # type: ignore[dict-item]
                    self.one = None
                self.kids[token] = child
        child.count += 1
        child.last = tick
        # the child is the one seen last: it takes the lead on a tie
        if token != self.best and child.count >= self.child(self.best).count:  # type: ignore[union-attr]
            self.best = token
        return child, new

    def drop_child(self, token: int) -> _Node:
        """Count one occurrence less of this run followed by `token` (which must be there);
        a child that no longer occurs is removed."""
        child = self.child(token)
        assert child is not None
        child.count -= 1
        kids = self.kids
        if kids is None:
            if child.count == 0:
                self.one, self.best = None, -1
            return child
        if child.count == 0:
            del kids[token]
        if token == self.best:
            self.best = max(kids, key=lambda t: (kids[t].count, kids[t].last))
        if len(kids) == 1:
            self.one, self.kids = kids[self.best], None
        return child


@dataclass(frozen=True)
class SuffixDraft:
    """A tree's drafts for a context: the tokens, each one's step probability count(child) /
    count(parent), and the length of the match they continue."""

    tokens: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    match: int = 0

    @property
    def score(self) -> float:
        """The product of the step probabilities: how sure the tree is of the whole draft."""
        return float(np.prod(self.probs)) if self.probs else 0.0

    @property
    def expected(self) -> float:
        """The drafts expected to be accepted if the counts were the odds: the sum over the
        drafts of the product of the step probabilities up to each."""
        total, chain = 0.0, 1.0
        for p in self.probs:
            chain *= p
            total += chain
        return total


class SuffixTree:
    """The counts of every run of up to `depth` tokens of the text it was given."""

    def __init__(self, depth: int = SUFFIX_DEPTH) -> None:
        _check_int("suffix tree", "depth", depth, 1)
        self.depth = depth
        self.root = _Node()
        self.nodes = 0  # nodes besides the root
        self.tick = 0  # tokens ever added (each occurrence's time, for ties)
        self._open: list[_Node] = [self.root]  # extend's runs ending at its last token

    def __repr__(self) -> str:
        return f"SuffixTree(depth={self.depth}, {self.root.count} tokens, {self.nodes} nodes)"

    @property
    def tokens(self) -> int:
        """The tokens the tree counts now."""
        return self.root.count

    def _push(self, open_: list[_Node], token: int) -> list[_Node]:
        """Add `token` after the runs `open_` (the root first, then one token longer each):
        each run followed by it occurs once more. Returns the runs ending at it."""
        tick = self.tick
        self.tick += 1
        self.root.count += 1
        grown = [self.root]
        for node in open_:
            child, new = node.add_child(token, tick)
            self.nodes += new
            if len(grown) < self.depth:
                grown.append(child)
        return grown

    def extend(self, tokens: Sequence[int]) -> None:
        """Append `tokens` to the tree's running sequence: O(depth) a token."""
        open_ = self._open
        for token in tokens:
            open_ = self._push(open_, int(token))
        self._open = open_

    def insert(self, tokens: Sequence[int]) -> None:
        """Count `tokens` as a sequence of its own (no run crosses its ends); the running
        sequence of `extend` is not interrupted."""
        open_ = [self.root]
        for token in tokens:
            open_ = self._push(open_, int(token))

    def remove(self, tokens: Sequence[int]) -> None:
        """Take back what `insert(tokens)` counted: runs that no longer occur are freed."""
        open_ = [self.root]
        for token in tokens:
            token = int(token)
            self.root.count -= 1
            grown = [self.root]
            for node in open_:
                child = node.drop_child(token)
                if child.count == 0:
                    self.nodes -= 1
                if len(grown) < self.depth:
                    grown.append(child)
            open_ = grown

    def node(self, run: Sequence[int]) -> _Node | None:
        """The node of `run`, or None where it never occurred (or is longer than depth)."""
        if len(run) > self.depth:
            return None
        node: _Node | None = self.root
        for token in run:
            node = node.child(int(token))  # type: ignore[union-attr]
            if node is None:
                return None
        return node

    def count(self, run: Sequence[int]) -> int:
        """How often `run` occurred (runs up to `depth` tokens; the empty run: every token)."""
        node = self.node(run)
        return 0 if node is None else node.count

    def draft(self, context: Sequence[int], k: int, *, min_prob: float = MIN_PROB,
              spec_factor: float = SPEC_FACTOR) -> SuffixDraft:
        """Up to `k` drafts continuing `context`: from the longest tail of it (up to `depth`
        tokens) that drafts anything, the most frequent child while its step probability is
        at least `min_prob`, for at most `spec_factor` x the match's length."""
        tail = [int(t) for t in context[-self.depth:]]
        for m in range(len(tail), 0, -1):
            cap = min(k, int(spec_factor * m))
            if cap < 1:
                break  # shorter matches draft even less
            run = tail[len(tail) - m:]
            node = self.node(run)
            if node is None:
                continue
            tokens, probs = self._follow(node, run, cap, min_prob)
            if tokens:
                return SuffixDraft(tokens, probs, m)
        return SuffixDraft()

    def _follow(self, node: _Node, run: list[int], cap: int,
                min_prob: float) -> tuple[list[int], list[float]]:
        tokens: list[int] = []
        probs: list[float] = []
        run = list(run)
        while len(tokens) < cap:
            if len(run) >= self.depth:  # a run this long has no children: drop its oldest
                run = run[len(run) - self.depth + 1:]
                node = self.node(run)  # type: ignore[assignment]  # occurred with it
            if node.best < 0:
                break
            child = node.child(node.best)
            p = child.count / node.count  # type: ignore[union-attr]
            if p < min_prob:
                break
            tokens.append(node.best)
            probs.append(p)
            run.append(node.best)
            node = child  # type: ignore[assignment]
        return tokens, probs

    def counts(self) -> dict[tuple[int, ...], int]:
        """Every run the tree holds and its count (for tests: O(nodes))."""
        out: dict[tuple[int, ...], int] = {}
        stack: list[tuple[tuple[int, ...], _Node]] = [((), self.root)]
        while stack:
            run, node = stack.pop()
            for token, child in node.children().items():
                out[(*run, token)] = child.count
                stack.append(((*run, token), child))
        return out


class SuffixCache:
    """A thread-safe suffix tree over recent finished answers, for drafting across requests
    (the server's, `onebit chat`'s). At most `max_answers` answers and `max_tokens` tokens:
    adding past either evicts the oldest answers first, their counts taken back so their runs'
    nodes are freed. An answer longer than `max_tokens` is kept to its first `max_tokens`."""

    def __init__(self, *, max_tokens: int = CACHE_TOKENS, max_answers: int = CACHE_ANSWERS,
                 depth: int = SUFFIX_DEPTH) -> None:
        _check_int("suffix cache", "max_tokens", max_tokens, 1)
        _check_int("suffix cache", "max_answers", max_answers, 1)
        _check_int("suffix cache", "depth", depth, 1)
        self.max_tokens = max_tokens
        self.max_answers = max_answers
        self.tree = SuffixTree(depth)
        self.answers: deque[tuple[int, ...]] = deque()
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        size = self.size()
        return (f"SuffixCache({size['answers']} answers, {size['tokens']} tokens, "
                f"{size['nodes']} nodes)")

    @property
    def depth(self) -> int:
        return self.tree.depth

    def add(self, answer_tokens: Sequence[int]) -> None:
        """Remember a finished answer (an empty one is ignored), evicting the oldest answers
        past the bounds."""
        answer = tuple(int(t) for t in answer_tokens)[: self.max_tokens]
        if not answer:
            return
        with self.lock:
            self.tree.insert(answer)
            self.answers.append(answer)
            while len(self.answers) > self.max_answers or self.tree.tokens > self.max_tokens:
                self.tree.remove(self.answers.popleft())

    def draft(self, context: Sequence[int], k: int, *, min_prob: float = MIN_PROB,
              spec_factor: float = SPEC_FACTOR) -> SuffixDraft:
        """`SuffixTree.draft` over the cached answers."""
        with self.lock:
            return self.tree.draft(context, k, min_prob=min_prob, spec_factor=spec_factor)

    def size(self) -> dict[str, int]:
        """{"answers", "tokens", "nodes"}: what the cache holds now (for /metrics)."""
        with self.lock:
            return {"answers": len(self.answers), "tokens": self.tree.tokens,
                    "nodes": self.tree.nodes}

    def clear(self) -> None:
        with self.lock:
            self.tree = SuffixTree(self.tree.depth)
            self.answers.clear()


class SuffixHead:
    """A one-pass `DraftHead` drafting from the request's own suffix tree (the prompt and the
    answer so far) and, if given, a shared `SuffixCache` (read only). `prompt_len` says how
    many committed tokens are the prompt; None: the first `commit_rows` after `reset` is the
    prompt (the loop hands it over whole). `k` caps a round's drafts; `depth` is the request
    tree's; `min_prob` and `spec_factor` as in `SuffixTree.draft`.

    After each `propose`, `confidence` holds each draft's step probability (the policy judges
    drafts by it, onebit.heads.policy) and `stop_below`, when a policy sets it, raises the
    floor for the next proposal."""

    def __init__(self, cache: SuffixCache | None = None, *, k: int = SUFFIX_K,
                 depth: int = SUFFIX_DEPTH, min_prob: float = MIN_PROB,
                 spec_factor: float = SPEC_FACTOR, prompt_len: int | None = None) -> None:
        _check_int("suffix head", "k", k, 1)
        _check_int("suffix head", "depth", depth, 1)
        _check_number("suffix head", "min_prob", min_prob, 0.0, 1.0)
        _check_number("suffix head", "spec_factor", spec_factor, 0.0, None)
        if prompt_len is not None:
            _check_int("suffix head", "prompt_len", prompt_len, 0)
        if cache is not None and not isinstance(cache, SuffixCache):
            raise ValueError(f"suffix head: cache must be a SuffixCache or None, got {cache!r}")
        self.cache = cache
        self.k = k
        self.depth = depth
        self.min_prob = float(min_prob)
        self.spec_factor = float(spec_factor)
        self.prompt_len = prompt_len
        self.stop_below = 0.0
        self.reset()

    def __repr__(self) -> str:
        shared = ", cache" if self.cache is not None else ""
        return f"SuffixHead(k={self.k}, depth={self.depth}{shared})"

    def needs_last_hidden(self) -> bool:
        return False

    def reset(self) -> None:
        self.tree = SuffixTree(self.depth)
        self.text: list[int] = []  # committed tokens, the prompt's included
        self.answer: list[int] = []  # committed tokens after the prompt
        self._prompt = self.prompt_len  # None until the first commit_rows names it
        self.confidence: list[float] = []
        self.source = ""  # where the last drafts came from: "request", "cache" or ""

    def commit_rows(self, tokens: Sequence[int], rows: np.ndarray, count: int) -> None:
        committed = [int(t) for t in tokens[:count]]
        if self._prompt is None:
            self._prompt = len(committed)
        start = len(self.text)
        self.text.extend(committed)
        self.tree.extend(committed)
        self.answer.extend(committed[max(0, self._prompt - start):])

    def propose(self, token: int, pos: int, k: int, hidden: np.ndarray | None) -> list[int]:
        # t1 sits at `pos`, not yet committed (one-pass): the context is what precedes it
        reach = max(self.depth, self.cache.depth if self.cache is not None else 0)
        context = [*self.text[max(0, pos - reach + 1):pos], int(token)]
        k = min(k, self.k)
        floor = max(self.min_prob, float(self.stop_below or 0.0))
        best = self.tree.draft(context, k, min_prob=floor, spec_factor=self.spec_factor)
        self.source = "request" if best.tokens else ""
        if self.cache is not None:
            shared = self.cache.draft(context, k, min_prob=floor, spec_factor=self.spec_factor)
            if (shared.expected, shared.match) > (best.expected, best.match):
                best, self.source = shared, "cache"
        self.confidence = list(best.probs)
        return list(best.tokens)
