"""The contract's checks as a black-box engine can be held to them: each reads only tokens
and counted target passes, and reuses the harness's own assertions (`assert_tokens_equal`,
`assert_pass_law`) so a peer fails with the same first-divergence message a loop does."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pytest_onebit.contract.assertions import assert_pass_law, assert_tokens_equal, first_divergence
from pytest_onebit.peers.protocol import Outcome, failed, passed

#: The checks a peer is held to, in table order. Ids follow docs/contract.md's invariants.
CHECK_DOCS = {
    "I1-text": "tokens equal the engine's own plain greedy decode",
    "I1-reference": "tokens equal onebit's greedy() on the same toy",
    "I2-next-step": "after the run, plain decoding from the returned cache continues as "
                    "plain greedy would",
    "I7-pass-law": "perfect drafts: ceil(N / (k + 1)) target passes, at most one a plain step",
    "I7-pass-law-half": "half-right drafts: the passes the acceptance rule predicts",
    "I8-pass-law-garbage": "always-wrong drafts: one target pass per token",
    "I9-budget": "never more than max_new_tokens, and exactly that many when nothing stops",
    "I10-eos": "EOS inside an accepted block ends the text there, as plain greedy",
    "I10-stop-string": "a stop string ends the text where plain greedy ends it",
    "I10-stopping-criteria": "a stopping criterion ends the text where plain greedy ends it",
    "S1-distribution": "sampled output distributed as plain sampling's (test power stated)",
}
CHECKS = tuple(CHECK_DOCS)


def judged(fn: Callable[[], str | None]) -> Outcome:
    """Run one comparison: an AssertionError is a failure with its message, any other
    exception is a failure naming it (the engine raised: a contract violation too)."""
    try:
        detail = fn()
    except AssertionError as error:
        return failed(" ".join(str(error).split()))
    except Exception as error:  # the peer raised
        return failed(f"raised {type(error).__name__}: {' '.join(str(error).split())[:300]}")
    return passed(detail or "")


def first_failure(outcomes: Sequence[Outcome]) -> Outcome:
    """Several runs of one check: the first failure, else a pass listing how many ran."""
    for outcome in outcomes:
        if outcome.status != "passed":
            return outcome
    return passed(f"{len(outcomes)} run(s)")


def assert_text(actual: Sequence[int], expected: Sequence[int], *, where: str,
                names: tuple[str, str] = ("assisted", "plain greedy")) -> None:
    """I1: the same tokens, or the first divergence and `where` the run was."""
    __tracebackhide__ = True
    try:
        assert_tokens_equal(list(actual), list(expected), names=names)
    except AssertionError as error:
        raise AssertionError(f"{where}: {str(error).splitlines()[0]}") from None


def assert_budget(emitted: int, max_new: int, *, exact: bool, where: str) -> None:
    """I9: at most `max_new` tokens; exactly that many when nothing could stop the run."""
    __tracebackhide__ = True
    if emitted > max_new or (exact and emitted != max_new):
        raise AssertionError(f"{where}: max_new_tokens={max_new} returned {emitted} new tokens")


def split_passes(sizes: Sequence[int], prompt_len: int) -> tuple[int, int]:
    """(steps, batches) from the input widths of the target's passes, read as onebit counts a
    one-pass round of the last token and its drafts: the first pass is the prefill and the
    first verify at once (its drafts are the widths past the prompt, plus the token the
    prefill chooses), a later pass of one token is a plain step, a wider one a batch."""
    if not sizes:
        return 0, 0
    rest = [sizes[0] - prompt_len + 1, *sizes[1:]]
    steps = sum(1 for width in rest if width <= 1)
    return steps, len(rest) - steps


def assert_law(sizes: Sequence[int], *, prompt_len: int, emitted: int, k: int, head: str,
               where: str) -> None:
    """I7 / I8 from counted passes, through the harness's own `assert_pass_law` with
    max_batch_rows = k + 1 (the target verifies the last token and k drafts at once)."""
    __tracebackhide__ = True
    steps, batches = split_passes(sizes, prompt_len)
    try:
        assert_pass_law(steps=steps, batches=batches, emitted=emitted, k=k,
                        max_batch_rows=k + 1, two_pass=False, head=head)
    except AssertionError as error:
        raise AssertionError(f"{where}: {error} (pass widths {list(sizes)})") from None


def predicted_passes(emitted: int, k: int, right: Callable[[int], bool], start: int) -> int:
    """The target passes a draft that is right exactly where `right(pos)` says costs, for
    `emitted` tokens from position `start`: each round drafts min(k, room - 1), keeps the
    drafts up to the first wrong one, and adds the target's own token."""
    done = passes = 0
    while done < emitted:
        drafts = min(k, emitted - done - 1)
        kept = 0
        while kept < drafts and right(start + done + kept):
            kept += 1
        done += kept + 1
        passes += 1
    return passes


def assert_law_predicted(sizes: Sequence[int], *, emitted: int, k: int,
                         right: Callable[[int], bool], start: int, where: str) -> None:
    """I7 for a half-right draft: exactly the passes `predicted_passes` counts."""
    __tracebackhide__ = True
    want = predicted_passes(emitted, k, right, start)
    if len(sizes) != want:
        raise AssertionError(f"{where}: expected {want} target passes for {emitted} tokens "
                             f"(k={k}), counted {len(sizes)} (pass widths {list(sizes)})")


def assert_stopped_at(actual: Sequence[int], plain: Sequence[int], stop_index: int, *,
                      what: str, where: str) -> None:
    """I10: the run ends right after token `stop_index` (where the stop completed), with
    plain greedy's tokens up to it."""
    __tracebackhide__ = True
    want = list(plain[: stop_index + 1])
    actual = list(actual)
    if actual != want:
        at = first_divergence(actual, want)
        raise AssertionError(f"{where}: {what} completed at new token {stop_index}; the run "
                             f"returned {len(actual)} new tokens (first difference from "
                             f"plain greedy cut there at index {at})")
