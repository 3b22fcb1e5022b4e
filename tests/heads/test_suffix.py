"""Suffix decoding (`onebit.heads.suffix`): the tree counts what a brute-force count of the
text counts and drafts what the rule says; the shared cache keeps its bounds, frees what it
evicts and stays consistent under threads; the head holds the loop's contract (I1..I13 and
S1..S4), never lets a rejected draft into its answer or the cache, and drafts long on text
that repeats."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import onebit
from onebit import Sampling
from onebit.heads import SuffixCache, SuffixHead, SuffixTree
from onebit.heads.policy import PolicyHead
from onebit.heads.suffix import MIN_PROB, SPEC_FACTOR, SUFFIX_DEPTH, SUFFIX_K
from pytest_onebit.doubles.heads import Proposal
from pytest_onebit.doubles.sampling_heads import MemoToyBase
from pytest_onebit.doubles.toy import ToyBase
from pytest_onebit.loop.runner import check_loop
from pytest_onebit.loop.scenarios import standard_scenarios
from pytest_onebit.sampling.enumeration import (
    assert_distribution_equivalent,
    exact_distribution,
    plain_distribution,
)
from pytest_onebit.sampling.runner import check_sampling

# -- a brute-force reference ---------------------------------------------------------------


class Reference:
    """The tree's counts and drafts computed from the sequences themselves: a run's count is
    how often it occurs inside one sequence, its time the tick of its latest occurrence's last
    token (ticks run on across sequences, in the order they were added)."""

    def __init__(self, seqs, depth):
        self.seqs = [list(s) for s in seqs]
        self.depth = depth
        self.vocab = sorted({t for s in self.seqs for t in s})

    def count(self, run):
        run = list(run)
        if not run:  # the root: every token
            return sum(map(len, self.seqs))
        return sum(s[i:i + len(run)] == run for s in self.seqs
                   for i in range(len(s) - len(run) + 1))

    def last(self, run):
        run, tick, best = list(run), 0, -1
        for s in self.seqs:
            for i in range(len(s) - len(run) + 1):
                if s[i:i + len(run)] == run:
                    best = tick + i + len(run) - 1
            tick += len(s)
        return best

    def counts(self):
        out = {}
        for s in self.seqs:
            for i in range(len(s)):
                for m in range(1, min(self.depth, len(s) - i) + 1):
                    run = tuple(s[i:i + m])
                    out[run] = out.get(run, 0) + 1
        return out

    def draft(self, context, k, min_prob, spec_factor):
        tail = list(context[-self.depth:])
        for m in range(len(tail), 0, -1):
            cap = min(k, int(spec_factor * m))
            if cap < 1:
                break
            run = tail[len(tail) - m:]
            if self.count(run) == 0:
                continue
            tokens, probs = [], []
            while len(tokens) < cap:
                if len(run) >= self.depth:
                    run = run[len(run) - self.depth + 1:]
                kids = {a: self.count([*run, a]) for a in self.vocab}
                kids = {a: c for a, c in kids.items() if c}
                if not kids:
                    break
                best = max(kids, key=lambda a: (kids[a], self.last([*run, a])))
                p = kids[best] / self.count(run)
                if p < min_prob:
                    break
                tokens.append(best)
                probs.append(p)
                run.append(best)
            if tokens:
                return tokens, probs, m
        return [], [], 0


tokens3 = st.lists(st.integers(0, 2), min_size=0, max_size=24)


@settings(max_examples=150, deadline=None)
@given(seqs=st.lists(tokens3, min_size=1, max_size=3), depth=st.integers(1, 6),
       contexts=st.lists(tokens3, min_size=1, max_size=3), k=st.integers(1, 9),
       min_prob=st.sampled_from([0.0, 0.1, 0.4, 0.6]),
       spec_factor=st.sampled_from([0.5, 1.0, 2.0]))
def test_tree_counts_and_drafts_equal_brute_force(seqs, depth, contexts, k, min_prob,
                                                  spec_factor):
    """Over three tokens: the tree's count of every run (up to depth) equals a brute-force
    count of the sequences inserted, its node count is the number of distinct runs, and its
    drafts for any context are the reference's (longest tail that drafts anything, most
    frequent child with the latest as tie-break, the floor, the cap of spec_factor x match and
    k, the walk dropping its oldest token at the depth), with the same step probabilities."""
    tree = SuffixTree(depth)
    for s in seqs:
        tree.insert(s)
    ref = Reference(seqs, depth)
    want = ref.counts()
    assert tree.counts() == want
    assert tree.nodes == len(want) and tree.tokens == sum(map(len, seqs))
    for run in list(want)[:20]:
        assert tree.count(run) == want[run]
    for context in contexts:
        got = tree.draft(context, k, min_prob=min_prob, spec_factor=spec_factor)
        tokens, probs, match = ref.draft(context, k, min_prob, spec_factor)
        assert (got.tokens, got.match) == (tokens, match)
        assert got.probs == pytest.approx(probs)
        assert got.score == pytest.approx(float(np.prod(probs)) if probs else 0.0)


@settings(max_examples=100, deadline=None)
@given(text=tokens3, cuts=st.lists(st.integers(0, 24), max_size=4), depth=st.integers(1, 6))
def test_extend_in_pieces_counts_the_one_running_sequence(text, cuts, depth):
    """Growing the request's tree a few tokens at a time (as tokens are committed) gives the
    counts of the whole text at once: runs cross the pieces' boundaries."""
    tree = SuffixTree(depth)
    at = 0
    for cut in sorted(cuts):
        tree.extend(text[at:max(at, cut)])
        at = max(at, cut)
    tree.extend(text[at:])
    assert tree.counts() == Reference([text], depth).counts()


@settings(max_examples=100, deadline=None)
@given(seqs=st.lists(tokens3, min_size=1, max_size=5), gone=st.data(), depth=st.integers(1, 5))
def test_remove_takes_back_exactly_what_insert_counted(seqs, gone, depth):
    """Removing inserted sequences leaves the counts and node count of a tree that only ever
    held the rest: emptied runs are freed, not left at zero."""
    drop = gone.draw(st.sets(st.integers(0, len(seqs) - 1)))
    tree = SuffixTree(depth)
    for s in seqs:
        tree.insert(s)
    for i in sorted(drop):
        tree.remove(seqs[i])
    kept = [s for i, s in enumerate(seqs) if i not in drop]
    want = Reference(kept, depth).counts()
    assert tree.counts() == want
    assert tree.nodes == len(want) and tree.tokens == sum(map(len, kept))


def test_a_long_sure_match_drafts_past_the_depth_up_to_k():
    """A walk that reaches the tree's depth drops its oldest token and goes on: with depth 8, a
    text seen before drafts all k = 20 of its continuation, each step sure (probability 1)."""
    text = list(range(100, 160))
    tree = SuffixTree(8)
    tree.insert(text)
    d = tree.draft(text[:30], 20, spec_factor=4.0)
    assert d.tokens == text[30:50] and d.probs == [1.0] * 20 and d.match == 8


def test_the_floor_and_the_cap():
    """The draft stops where the most frequent continuation falls under the floor, and is at
    most spec_factor x the match's length."""
    tree = SuffixTree(8)
    for tail in range(11):  # "1 2" followed by eleven different tokens: 1/11 < 0.1
        tree.insert([1, 2, 50 + tail])
    assert tree.draft([9, 1, 2], 5).tokens == []
    assert tree.draft([9, 1, 2], 5, min_prob=0.05).tokens == [60]  # the latest wins a tie
    tree = SuffixTree(8)
    tree.insert(list(range(20)))
    assert tree.draft([3], 10).tokens == [4]  # a 1-token match drafts 1 at factor 1
    assert tree.draft([2, 3], 10).tokens == [4, 5]
    assert tree.draft([2, 3], 10, spec_factor=2.5).tokens == [4, 5, 6, 7, 8]


def test_defaults_are_arctic_inferences():
    """The floor (min_token_prob 0.1) and the cap (max_spec_factor 1.0) are ArcticInference's
    defaults; depth 32 and k 32 let a 32-token match draft a whole 33-row round."""
    assert (MIN_PROB, SPEC_FACTOR, SUFFIX_DEPTH, SUFFIX_K) == (0.1, 1.0, 32, 32)


# -- the shared cache ----------------------------------------------------------------------


def _answer(i: int, n: int = 20) -> list[int]:
    """Answer i: n tokens no other answer uses."""
    return [1000 * (i + 1) + j for j in range(n)]


def test_cache_evicts_the_oldest_answers_past_max_answers():
    """Past max_answers the oldest answers are gone: their text no longer drafts, the newest
    still do, and the cache holds exactly the nodes of a cache given only the kept answers."""
    cache = SuffixCache(max_answers=3, depth=8)
    for i in range(5):
        cache.add(_answer(i))
    for i in (0, 1):
        assert cache.draft(_answer(i)[:6], 8).tokens == []
    for i in (2, 3, 4):
        assert cache.draft(_answer(i)[:6], 8).tokens == _answer(i)[6:12]
    fresh = SuffixCache(depth=8)
    for i in (2, 3, 4):
        fresh.add(_answer(i))
    assert cache.size() == fresh.size() == {"answers": 3, "tokens": 60,
                                            "nodes": fresh.tree.nodes}
    assert cache.tree.counts() == fresh.tree.counts()


def test_cache_bound_in_tokens_and_memory_shrinks():
    """Past max_tokens the oldest answers go until the rest fit, and the nodes shrink with
    them: one long answer evicted by short ones leaves fewer nodes than it held; an answer
    longer than the bound is kept to its first max_tokens tokens."""
    cache = SuffixCache(max_tokens=100, depth=8)
    cache.add(_answer(0, 100))
    big = cache.size()
    assert big["tokens"] == 100 and big["nodes"] == sum(min(8, 100 - i) for i in range(100))
    cache.add(_answer(1, 10))
    after = cache.size()
    assert after == {"answers": 1, "tokens": 10, "nodes": sum(min(8, 10 - i) for i in range(10))}
    assert after["nodes"] < big["nodes"]
    cache.add(_answer(2, 500))
    assert cache.size()["tokens"] == 100 and list(cache.answers[-1]) == _answer(2, 100)
    cache.add([])
    assert cache.size()["answers"] == 1


def test_concurrent_adds_keep_counts_consistent():
    """Eight threads adding and drafting at once: without eviction the counts equal those of
    adding the same answers one by one (counts do not depend on order); with eviction the
    cache holds its bound and exactly the counts of the answers it kept."""
    rng = random.Random(5)
    answers = [[rng.randrange(6) for _ in range(rng.randrange(1, 30))] for _ in range(160)]

    def fill(cache):
        def work(part):
            for a in part:
                cache.add(a)
                cache.draft(a[:4], 8)
                cache.size()

        threads = [threading.Thread(target=work, args=(answers[i::8],)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    unbounded = SuffixCache(max_tokens=10**6, max_answers=10**6, depth=6)
    fill(unbounded)
    assert unbounded.tree.counts() == Reference(answers, 6).counts()
    assert unbounded.size()["nodes"] == len(unbounded.tree.counts())
    bounded = SuffixCache(max_tokens=300, max_answers=20, depth=6)
    fill(bounded)
    size = bounded.size()
    assert size["tokens"] <= 300 and size["answers"] <= 20
    assert bounded.tree.counts() == Reference(list(bounded.answers), 6).counts()
    assert size["nodes"] == len(bounded.tree.counts())


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"k": 0}, "k"), ({"depth": True}, "depth"), ({"min_prob": 1.5}, "min_prob"),
    ({"spec_factor": -1}, "spec_factor"), ({"prompt_len": -1}, "prompt_len"),
    ({"cache": object()}, "cache"), ({"min_prob": float("nan")}, "min_prob")])
def test_bad_head_settings_are_refused_by_name(kwargs, name):
    """Each setting of the head is checked, the error naming it and the value."""
    with pytest.raises(ValueError, match=name):
        SuffixHead(**kwargs)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"max_tokens": 0}, "max_tokens"), ({"max_answers": 1.5}, "max_answers"),
    ({"depth": 0}, "depth")])
def test_bad_cache_settings_are_refused_by_name(kwargs, name):
    """The cache's bounds and depth are checked, the error naming them."""
    with pytest.raises(ValueError, match=name):
        SuffixCache(**kwargs)


# -- the head in the loop ------------------------------------------------------------------


class CopyBase(ToyBase):
    """A toy whose greedy choice copies: the token that followed the latest earlier occurrence
    of the last three tokens gets a large bonus (else the toy's own choice). A prompt holding
    a paragraph and its first words is answered with the paragraph, again and again."""

    def _copy(self, history):
        tail = history[-3:]
        for i in range(len(history) - 4, -1, -1):
            if history[i:i + 3] == tail:
                return history[i + 3]
        return None

    def _boost(self, logits, history):
        token = self._copy(history)
        if token is not None:
            logits[token] += 1000.0
        return logits

    def step(self, token, pos):
        history = [*self.committed, int(token)]
        return self._boost(super().step(token, pos), history)

    def verify(self, tokens, pos):
        before = list(self.committed)
        logits = super().verify(tokens, pos)
        for i in range(len(tokens)):
            self._boost(logits[i], before + [int(t) for t in tokens[:i + 1]])
        return logits


PARAGRAPH = random.Random(3).sample(range(64), 40)


def test_greedy_text_is_plain_greedy_with_and_without_the_cache():
    """On the toy (free text) and on the copying toy, with k from 1 to 32, alone, with a cache
    and under the cost policy, the run emits exactly `onebit.greedy`'s tokens and the base
    ends at prompt + answer."""
    for make, prompt in ((ToyBase, [3, 1, 4, 1, 5]),
                         (lambda: CopyBase(max_batch_rows=33), PARAGRAPH + PARAGRAPH[:3])):
        reference = onebit.greedy(make(), prompt, max_tokens=60).tokens
        cache = SuffixCache()
        cache.add(reference[:30])
        for k in (1, 3, 7, 32):
            for head in (SuffixHead(), SuffixHead(cache), PolicyHead(SuffixHead(cache),
                                                                    max_k=32)):
                base = make()
                result = onebit.run(base, head, prompt, max_tokens=60, k=k)
                assert result.tokens == reference
                assert base.committed == prompt + reference


def test_drafts_on_repeated_text_are_long_and_accepted():
    """A prompt holding a paragraph, answered by copying it: nearly every draft is accepted,
    rounds grow to the full 32 drafts as the match grows, and 120 tokens take under a fifth of
    a pass each."""
    base = CopyBase(max_batch_rows=33)
    prompt = PARAGRAPH + PARAGRAPH[:3]
    reference = onebit.greedy(CopyBase(max_batch_rows=33), prompt, max_tokens=120).tokens
    assert reference[:37] == PARAGRAPH[3:]  # the base copies
    head = SuffixHead()
    widths = []
    inner_propose = head.propose

    def propose(token, pos, k, hidden):
        drafts = inner_propose(token, pos, k, hidden)
        widths.append(len(drafts))
        return drafts

    head.propose = propose
    result = onebit.run(base, head, prompt, max_tokens=120, k=32)
    s = result.stats
    assert result.tokens == reference
    assert s.accepted >= 0.95 * s.proposed
    assert max(widths) == 32
    assert s.passes_per_token < 0.2


def test_SX2_rejected_drafts_never_enter_the_answer_or_the_cache():
    """On free text with a cache of unrelated answers, most drafts are rejected; afterwards the
    head's answer is exactly the emitted tokens, the cache is untouched (the head only reads
    it), and adding the answer counts only those tokens."""
    prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
    rng = random.Random(9)
    cache = SuffixCache(depth=8)
    for _ in range(30):
        cache.add([rng.randrange(64) for _ in range(40)])
    before = cache.tree.counts()
    head = SuffixHead(cache, depth=8, min_prob=0.0)
    result = onebit.run(ToyBase(), head, prompt, max_tokens=80, k=7)
    s = result.stats
    assert s.proposed - s.accepted > 40  # many rejected drafts
    assert head.answer == result.tokens
    assert head.text == prompt + result.tokens
    assert cache.tree.counts() == before
    alone = SuffixCache(depth=8)
    alone.add(head.answer)
    assert alone.tree.counts() == Reference([result.tokens], 8).counts()


def test_the_prompt_is_the_first_commit_unless_its_length_is_given():
    """Without prompt_len the first commit after reset is the prompt; with it, the first
    prompt_len committed tokens are, however they are handed over."""
    head = SuffixHead()
    head.commit_rows([1, 2, 3], None, 3)
    head.commit_rows([4, 5, 9], None, 2)
    assert head.answer == [4, 5]
    head = SuffixHead(prompt_len=4)
    head.commit_rows([1, 2], None, 2)
    head.commit_rows([3, 4, 5], None, 3)
    assert head.answer == [5]
    head.reset()
    assert head.answer == [] and head.text == [] and head.tree.tokens == 0


def test_the_better_source_wins_and_confidence_is_the_step_probabilities():
    """The request's tree and the cache each draft; the one with more expected accepted tokens
    is proposed (a tie: the request's), and `confidence` holds its step probabilities (what
    the cost policy bins)."""
    cache = SuffixCache(depth=8)
    cache.add([7, 8, 9, 10, 11, 12, 13, 14])
    head = SuffixHead(cache, depth=8)
    head.commit_rows([20, 21, 22, 23, 7, 8], None, 6)  # the prompt
    assert head.propose(9, 6, 8, None) == [10, 11, 12]  # "7 8 9" only in the cache
    assert head.source == "cache" and head.confidence == [1.0, 1.0, 1.0]
    head.commit_rows([9, 10, 11], None, 3)
    assert head.propose(50, 9, 8, None) == [] and head.confidence == []
    head.commit_rows([50], None, 1)
    assert head.propose(20, 10, 8, None) == [21]  # "20" only in the request
    assert head.source == "request" and head.confidence == [1.0]
    assert cache.size()["tokens"] == 8  # read, never written


# -- the loop contract with the suffix head drafting ----------------------------------------


class Drafting:
    """The contract's recording head beside a `SuffixHead` that does the drafting: the
    recorder is handed every reset and commit and records what the suffix head proposed, so
    the checks read what the loop did with a real head."""

    def __init__(self, recorder, head: SuffixHead) -> None:
        self.recorder = recorder
        self.head = head

    def needs_last_hidden(self) -> bool:
        return False

    def reset(self) -> None:
        self.recorder.reset()
        self.head.reset()

    def commit_rows(self, tokens, rows, count) -> None:
        self.recorder.commit_rows(tokens, rows, count)
        self.head.commit_rows(tokens, rows, count)

    def propose(self, token, pos, k, hidden):
        drafts = self.head.propose(token, pos, k, hidden)
        if hasattr(self.recorder, "proposals"):
            self.recorder.proposals.append(Proposal(int(token), int(pos), int(k), hidden,
                                                    tuple(drafts)))
        return drafts


def suffix_loop(base, head, prompt, **kwargs):
    """onebit.run with a `SuffixHead` drafting in place of the scenario's head. For the
    scenarios of a perfect head, the head's cache holds the greedy answer (spec_factor 8, so
    the very first round drafts all k), which makes the suffix head perfect: I7's pass law
    holds it to whole rounds."""
    cache = None
    if getattr(head, "name", None) in ("perfect", "over"):
        cache = SuffixCache()
        cache.add([*head.oracle.prompt, *head.oracle.tokens])
    return onebit.run(base, Drafting(head, SuffixHead(cache, spec_factor=8.0)), prompt,
                      **kwargs)


def test_loop_contract_I1_to_I13_with_the_suffix_head():
    """I1..I13 on every one-pass scenario of the standard grid, the suffix head drafting: from
    its own tree (rejected drafts, short rounds, stops, budgets, narrow bases) and, where the
    scenario's head is perfect, from a cache holding the answer (I7). I8 judges an always-wrong
    or silent head, which a suffix head is not, so it is left out."""
    scenarios = [s for s in standard_scenarios() if s.head is not None and not s.two_pass]
    checks = [f"I{i}" for i in range(1, 14) if i != 8]
    check_loop(suffix_loop, scenarios, checks=checks)  # raises naming any failed check


def test_sampling_contract_S1_to_S4_with_the_suffix_head():
    """S1..S4 with the suffix head drafting (deterministic drafts, q one-hot) on the one-pass
    scenarios: the sampled loop's exact distribution is plain sampling's, a seed replays,
    temperature 0 is greedy, every leaf commits prompt + emitted to base and head."""
    def loop(base, head, prompt, **kwargs):
        return onebit.run(base, Drafting(head, SuffixHead(min_prob=0.0)), prompt, **kwargs)

    from pytest_onebit.sampling.scenarios import distribution_scenarios, seeded_scenarios

    for checks, grid in ((("S1", "S4"), distribution_scenarios()),
                         (("S2", "S3"), seeded_scenarios())):
        check_sampling(loop, checks=checks,
                       scenarios=[s for s in grid if s.flavour == "one-pass"])


@pytest.mark.parametrize("prompt", [[2, 0, 2, 0], [1, 2, 1, 2, 1]])
def test_sampled_distribution_is_exact_alone_and_under_the_policy(prompt):
    """On a repeating prompt over three tokens (so the suffix head drafts), a sampled run's
    exact distribution, enumerated over every rng answer, is plain sampling's, with the head
    alone, with a cache, and under the cost policy (which bins its confidence)."""
    s = Sampling(1.0, top_k=3)
    cache = SuffixCache()
    cache.add([2, 0, 1, 2, 0, 1])
    for head in (SuffixHead(min_prob=0.0), SuffixHead(cache),
                 PolicyHead(SuffixHead(cache), costs={n: 1.0 for n in range(1, 9)},
                            persist=False)):
        base = MemoToyBase(vocab_size=3, seed=4)
        d = exact_distribution(onebit.run, base, head, prompt, max_tokens=3, k=3, sampling=s)
        want = plain_distribution(ToyBase(vocab_size=3, seed=4), prompt, max_tokens=3,
                                  sampling=s)
        assert_distribution_equivalent(d, want, atol=1e-12)


# -- the registry --------------------------------------------------------------------------


def test_the_registry_row_builds_the_head_every_way():
    """"suffix" is a row of HEADS: a named head with every draft sent is a SuffixHead reading
    the process's cache; under the cost policy the policy wraps one; a batch slot's factory
    makes a fresh one; a seeded sampled request decodes plainly (the cache it drafts from
    changes between requests, so its draws would not replay)."""
    from onebit.heads import registry

    assert "suffix" in registry.HEAD_NAMES and "suffix" in registry.BATCHED_HEAD_NAMES
    model = ToyBase()
    head, k = registry.resolve("suffix", model, every_draft=True)
    assert isinstance(head, SuffixHead) and k == SUFFIX_K
    assert head.cache is registry.suffix_cache()
    policy, k = registry.resolve("suffix", model, k=7)
    assert isinstance(policy, PolicyHead) and isinstance(policy.inner, SuffixHead) and k == 7
    assert registry.resolve("suffix", model, k=7)[0] is policy  # one policy per model
    factory, k = registry.batched("suffix", k=5)
    one, two = factory(None), factory(None)
    assert isinstance(one, SuffixHead) and one is not two and one.k == k == 5
    assert registry.decodes_plain("suffix", seeded=True)
    assert not registry.decodes_plain("suffix")
