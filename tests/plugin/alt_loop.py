"""A second, independently written correct loop: the conformance suite must pass it.

It shares no round logic with onebit.loop (only the argument check and the result types):
rounds are one flat function, acceptance is counted with numpy comparisons, and it checks no
logits. A suite that failed this loop would be testing onebit's way of writing the loop, not
the contract.
"""

import numpy as np

from onebit import RunResult, check_request


def _accepted_prefix(drafts, choices):
    """Length of the prefix of `drafts` equal to `choices`."""
    same = np.asarray(drafts) == np.asarray(choices)[: len(drafts)]
    return len(same) if same.all() else int(np.argmin(same))


def run(base, head, prompt, *, max_tokens, k, on_token=None):
    prompt = check_request(base, prompt, max_tokens=max_tokens, k=k)
    out = RunResult()
    stats = out.stats

    def give(tokens):
        """Emit until the consumer stops; return how many were emitted."""
        for i, token in enumerate(tokens):
            out.tokens.append(int(token))
            stats.emitted += 1
            if on_token is not None and on_token(int(token)) is False:
                out.stopped = True
                return i + 1
        return len(tokens)

    base.reset()
    if head is not None:
        head.reset()
    cap = base.max_batch_rows()
    wide = getattr(base, "max_prefill_rows", None)
    wide = wide() if wide is not None else cap
    prompt_rows = []
    at = 0
    while at < len(prompt):  # the prompt in batches of `wide`, each kept whole
        piece = prompt[at : at + wide]
        scores = base.verify(piece, at)
        base.commit_verify(len(piece))
        prompt_rows.extend(base.last_hidden_rows()[: len(piece)])
        stats.prefill_batches += 1
        stats.prefill_rows += len(piece)
        at += len(piece)
    if head is not None:
        head.commit_rows(prompt, np.array(prompt_rows), len(prompt))
    nxt, pos = int(np.argmax(scores[-1])), len(prompt)
    two_pass = head is not None and head.needs_last_hidden()

    while len(out.tokens) < max_tokens and not out.stopped:
        stats.rounds += 1
        left = max_tokens - len(out.tokens) - 1  # after t1
        if two_pass:
            logits = base.step(nxt, pos)
            stats.steps += 1
            hidden = base.last_hidden()
            head.commit_rows([nxt], hidden[None, :], 1)
            t1, pos = nxt, pos + 1
            nxt = int(np.argmax(logits))
            give([t1])
            if out.stopped:
                break
            want = min(k, cap, left)
            guess = list(head.propose(t1, pos - 1, want, hidden))[:want] if want > 0 else []
            stats.proposed += len(guess)
            if not guess or guess[0] != nxt:
                continue
            choices = np.argmax(base.verify(guess, pos), axis=1)
            stats.batches += 1
            stats.batch_rows += len(guess)
            take = 1 + _accepted_prefix(guess[1:], choices[: len(guess) - 1])
            n = give(guess[:take])
            base.commit_verify(n)
            head.commit_rows(guess, base.last_hidden_rows(), n)
            stats.accepted += n
            pos, nxt = pos + n, int(choices[n - 1])
            continue
        want = min(k, cap - 1, left) if head is not None else 0
        guess = list(head.propose(nxt, pos, want, None))[:want] if want > 0 else []
        stats.proposed += len(guess)
        if not guess:
            logits = base.step(nxt, pos)
            stats.steps += 1
            if head is not None:
                head.commit_rows([nxt], base.last_hidden()[None, :], 1)
            give([nxt])
            pos, nxt = pos + 1, int(np.argmax(logits))
            continue
        batch = [nxt, *guess]
        choices = np.argmax(base.verify(batch, pos), axis=1)
        stats.batches += 1
        stats.batch_rows += len(batch)
        n = give(batch[: _accepted_prefix(guess, choices) + 1])
        base.commit_verify(n)
        head.commit_rows(batch, base.last_hidden_rows(), n)
        stats.accepted += n - 1
        pos, nxt = pos + n, int(choices[n - 1])
    return out
