"""The served contract's checks V1..V8: what a client receives from a served engine is the
library's answer to the same request, whole or streamed, one at a time or batched, with any
knobs, stops, logprobs and `n`, whoever else is served and whoever leaves.

Each check reads one `ServedTrace` (`pytest_onebit.serve.trace`) and raises `AssertionError`
saying what broke, naming the request. docs/serve.md explains each; the mutant catalogue
`mutants/serve/` shows each failing on a believable bug of the layer between the engine's
rows and the client.
"""

from __future__ import annotations

import math

from pytest_onebit.contract.core import Contract, NotApplicable
from pytest_onebit.serve.reference import Expected
from pytest_onebit.serve.scenarios import standard_served_scenarios
from pytest_onebit.serve.trace import AskTrace, ServedTrace, execute
from pytest_onebit.serve.view import Answer, streamed, whole

#: The served contract: a case is one `ServedTrace`; the target is `make_server`.
SERVED = Contract("served", prepare=execute, scenarios=standard_served_scenarios)
SERVED_CHECKS = SERVED.checks

#: how far a listed logprob may be from the reference's, which scores the same rows in another
#: grouping (the forward's rows are bitwise those of a step; this is slack for float32 -> JSON)
LOGPROB_TOLERANCE = 1e-6


def _first_difference(a: list, b: list) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _same_answer(got: Answer, want: Expected, where: str) -> None:
    """Text, ids and finish reason as the reference has them."""
    __tracebackhide__ = True
    if got.ids != want.ids:
        i = _first_difference(got.ids or [], want.ids)
        raise AssertionError(f"{where}: token_ids differ from the library's answer at answer "
                             f"token {i}: served {(got.ids or [])[i:i + 6]} vs "
                             f"{want.ids[i:i + 6]} ({len(got.ids or [])} vs {len(want.ids)} "
                             f"tokens)")
    if got.text != want.text:
        i = _first_difference(list(got.text), list(want.text))
        raise AssertionError(f"{where}: the text differs from the library's answer at "
                             f"character {i}: served {got.text[i:i + 20]!r} vs "
                             f"{want.text[i:i + 20]!r} (whole: {got.text!r} vs {want.text!r})")
    if got.finish != want.finish:
        raise AssertionError(f"{where}: finish_reason {got.finish!r}, the library's answer "
                             f"ends with {want.finish!r}")


def _sent(t: AskTrace):
    """(label, Answer) for what the client got: the whole answer's choices, then the stream's
    answer (a client that left is not judged here)."""
    out = []
    if t.whole is not None:
        answers, _ = whole(t.whole)
        out += [(f"request {t.index} ({t.ask.label}), whole, answer {a.index}", a)
                for a in answers]
    if t.streamed is not None and not t.streamed.left:
        out.append((f"request {t.index} ({t.ask.label}), streamed", streamed(t.streamed).answer))
    return out


def _usage(usage: dict | None, want: list[Expected], where: str) -> None:
    __tracebackhide__ = True
    made = sum(len(e.ids) for e in want)
    wanted = {"prompt_tokens": want[0].prompt_tokens, "completion_tokens": made,
              "total_tokens": want[0].prompt_tokens + made}
    got = {k: (usage or {}).get(k) for k in wanted}
    if got != wanted:
        raise AssertionError(f"{where}: usage is {got}; the answer's prompt and tokens make "
                             f"{wanted}")


def _judged(trace: ServedTrace) -> list[AskTrace]:
    return trace.asks + ([trace.after] if trace.after is not None else [])


@SERVED.check("V1-answer")
def check_answer(trace: ServedTrace) -> None:
    """V1: a whole (not streamed) answer is the library's answer to the same request: each
    choice's text, token ids and finish reason equal `onebit.generate`'s with the server's
    head, seed, knobs and budget, cut where a stop ends it; choices are numbered 0..n-1; usage
    counts the prompt once and every token emitted (the one that ended the answer included)."""
    __tracebackhide__ = True
    for t in _judged(trace):
        if t.ask.ends_by_itself and not (t.expected[0].finish == "stop"
                                         and t.expected[0].ids[-1] == 256):
            raise AssertionError(f"request {t.index}: the scenario means its answer to end at "
                                 f"the EOS, but the library's answer does not: the scenario "
                                 f"needs another bias")
        if t.whole is None:
            continue
        answers, usage = whole(t.whole)
        where = f"request {t.index} ({t.ask.label}), whole"
        if [a.index for a in answers] != list(range(len(t.expected))):
            raise AssertionError(f"{where}: choices numbered {[a.index for a in answers]}, "
                                 f"{len(t.expected)} asked")
        for a, want in zip(answers, t.expected, strict=True):
            _same_answer(a, want, f"{where}, answer {a.index}")
        _usage(usage, t.expected, where)


@SERVED.check("V2-stream")
def check_stream(trace: ServedTrace) -> None:
    """V2: a streamed answer is the same answer: chat opens with the assistant's role; the
    pieces join to exactly the text (none after the chunk with the finish reason, which comes
    once, with the ids); the usage chunk (every stream asks for it) comes once, last, and
    counts what the whole answer counts;
    `[DONE]` ends the stream, once; at every stream interval, pieces coalesced or not."""
    __tracebackhide__ = True
    for t in _judged(trace):
        if t.streamed is None or t.streamed.left:
            continue
        where = f"request {t.index} ({t.ask.label}), streamed"
        s = streamed(t.streamed)
        if not s.done_last:
            raise AssertionError(f"{where}: the stream does not end with one [DONE] "
                                 f"(last events {(t.streamed.events or [])[-3:]})")
        if t.ask.endpoint == "chat" and not s.role_first:
            raise AssertionError(f"{where}: the first chunk does not name the assistant's role")
        if s.after_finish:
            raise AssertionError(f"{where}: text after the finish chunk: {s.after_finish}")
        _same_answer(s.answer, t.expected[0], where)
        if len(s.usage_chunks) != 1 or s.chunks[-1] is not s.usage_chunks[0]:
            raise AssertionError(f"{where}: include_usage asks for one usage chunk, last; "
                                 f"{len(s.usage_chunks)} came")
        _usage(s.answer.usage, t.expected, where)


@SERVED.check("V3-stops", applies=lambda s: s.stops)
def check_stops(trace: ServedTrace) -> None:
    """V3: a stop ends the answer where its definition says, whole and streamed: a stop
    string at its first occurrence (the text cut before it, even when it begins as earlier
    text did or straddles tokens; a stop that never completes holds nothing back for good),
    a stop token id at its first occurrence; the ids end at the token that ended it, and the
    finish reason is "stop"."""
    __tracebackhide__ = True
    for t in _judged(trace):
        if not t.ask.stopped:
            continue
        want = t.expected[0]
        meant_to_stop = t.ask.stops or t.ask.repeat_stop or t.ask.stop_token_at is not None
        if meant_to_stop and want.finish != "stop":
            raise AssertionError(f"request {t.index}: the scenario's stop never ends the "
                                 "library's answer: the scenario exercises nothing")
        for where, got in _sent(t):
            for stop in want.stop:
                if stop in got.text:
                    raise AssertionError(f"{where}: the text holds the stop string {stop!r}: "
                                         f"{got.text!r}")
            _same_answer(got, want, where)


def _join_check(tok, got: Answer, want: Expected, where: str) -> None:
    """The listed tokens join to the text; where a stop string cut the answer, they may run
    past it by a part of the last one (the token the cut went through)."""
    __tracebackhide__ = True
    joined = "".join(e.text for e in got.logprobs)
    if joined == got.text:
        return
    stop_ids = frozenset(tok.stop_ids) | frozenset(want.stop_token_ids)
    cut_by_string = want.finish == "stop" and want.ids and want.ids[-1] not in stop_ids
    if (cut_by_string and got.logprobs and joined.startswith(got.text)
            and len(joined) - len(got.text) < len(got.logprobs[-1].text)):
        return
    raise AssertionError(f"{where}: the logprobs' tokens join to {joined!r}, not to the text "
                         f"{got.text!r}")


def _with_their_text(got: Answer, where: str) -> None:
    """Streamed, each chunk carries the entries of the tokens whose text begins in it, as
    OpenAI streams them: after every chunk the entries so far cover the text so far (they
    may run past it by the rest of the last token) and none begins past it."""
    __tracebackhide__ = True
    text, joined = "", ""
    for i, (piece, entries) in enumerate(got.chunked):
        text += piece
        joined += "".join(e.text for e in entries)
        last = next((e.text for e in reversed(entries)), None)
        if not joined.startswith(text):
            raise AssertionError(f"{where}: after chunk {i} the text is {text!r} but its "
                                 f"logprobs cover {joined!r}: a chunk's logprobs came apart "
                                 f"from its content")
        if last is not None and (len(joined) - len(last) > len(text)
                                 or (len(joined) - len(last) == len(text) and last)):
            raise AssertionError(f"{where}: chunk {i} sends the logprob of {last!r} before "
                                 f"its text ({text!r} sent so far)")


@SERVED.check("V4-logprobs", applies=lambda s: s.logprobs)
def check_logprobs(trace: ServedTrace) -> None:
    """V4: logprobs are the model's raw scores, whatever knobs are on: one entry per token
    with text in what the client got (never the end-of-turn or a stop id, never a token
    wholly inside a stop string), each the log-softmax of its own prefix's raw row with the
    asked number of alternatives, likeliest first; joined, their tokens are the text; and
    streamed, each chunk carries the entries of the tokens whose text begins in it."""
    __tracebackhide__ = True
    tok = trace.tokenizer
    for t in _judged(trace):
        if not t.ask.logprobs:
            continue
        for where, got in _sent(t):
            want = t.expected[got.index] if t.ask.n > 1 else t.expected[0]
            if got.logprobs is None:
                raise AssertionError(f"{where}: logprobs were asked and none came")
            if len(got.logprobs) != want.listed:
                raise AssertionError(f"{where}: {len(got.logprobs)} logprob entries for "
                                     f"{want.listed} tokens whose text was sent (ids "
                                     f"{want.ids[-3:]}, finish {want.finish})")
            for i, (entry, (logprob, top)) in enumerate(zip(got.logprobs, want.logprobs,
                                                            strict=False)):
                if not math.isclose(entry.logprob, logprob, rel_tol=0,
                                    abs_tol=LOGPROB_TOLERANCE):
                    raise AssertionError(f"{where}: token {i}'s logprob is {entry.logprob}; "
                                         f"its raw score gives {logprob} (processed scores "
                                         f"reported, or a row of another prefix)")
                want_top = [(tok.decode([a]), lp) for a, lp in top]
                if len(entry.top) != len(want_top) or any(
                        a != b or not math.isclose(x, y, abs_tol=LOGPROB_TOLERANCE)
                        for (a, x), (b, y) in zip(entry.top, want_top, strict=False)):
                    raise AssertionError(f"{where}: token {i}'s alternatives are "
                                         f"{entry.top}; the raw row gives {want_top}")
            _join_check(tok, got, want, where)
            _with_their_text(got, where)


@SERVED.check("V5-n", applies=lambda s: s.answers_n)
def check_n(trace: ServedTrace) -> None:
    """V5: `n` answers are independent: answer i is the answer the same request gets alone
    with seed + i, whatever the others drew, and they are not copies of one another."""
    __tracebackhide__ = True
    for t in _judged(trace):
        if t.ask.n == 1 or t.whole is None:
            continue
        if len({tuple(e.ids) for e in t.expected}) < 2:
            raise AssertionError(f"request {t.index}: the n answers alone are all the same; "
                                 "the scenario cannot tell independent answers from copies")
        answers, _ = whole(t.whole)
        if len(answers) != t.ask.n:
            raise AssertionError(f"request {t.index}: {len(answers)} choices for n={t.ask.n}")
        for i, (a, want) in enumerate(zip(answers, t.expected, strict=True)):
            _same_answer(a, want, f"request {t.index}, answer {i} (seed + {i})")


@SERVED.check("V6-knobs", applies=lambda s: s.knobs)
def check_knobs(trace: ServedTrace) -> None:
    """V6: knobs combine as each one alone defines it: a greedy answer with several knobs is
    the model stepped token by token with each knob applied to the raw scores by its own
    definition (repetition over prompt and answer, presence and frequency over the answer, the
    bias added, the stop ids held back below min_tokens), whole and streamed."""
    __tracebackhide__ = True
    judged = 0
    for t in _judged(trace):
        if not t.ask.knobs or t.defined is None:
            continue
        judged += 1
        for where, got in _sent(t):
            _same_answer(got, t.defined, f"{where}, against the knobs' definitions")
    if not judged:
        raise NotApplicable("no greedy request of this scenario sends knobs")


@SERVED.check("V8-prediction", applies=lambda s: s.predicts)
def check_prediction(trace: ServedTrace) -> None:
    """V8: a `prediction` (OpenAI's predicted outputs) changes the time, never the answer: a
    greedy answer with one is the library's answer without it, whole and streamed; and the
    usage's `completion_tokens_details` say what the library's run with the same prediction
    did: `accepted_prediction_tokens` its accepted drafts, `rejected_prediction_tokens` the
    ones it drafted and rejected."""
    __tracebackhide__ = True
    for t in _judged(trace):
        if not t.ask.predict:
            continue
        want = t.expected[0]
        if t.ask.predict in ("exact", "edited") and not t.ask.sampled \
                and not 0 < want.accepted < want.proposed + 1:
            raise AssertionError(f"request {t.index}: the library's run with the {t.ask.predict} "
                                 f"prediction accepted {want.accepted} of {want.proposed} "
                                 "drafts: the scenario does not exercise what it means to")
        if t.unpredicted is not None:
            for where, got in _sent(t):
                _same_answer(got, t.unpredicted,
                             f"{where}, against the answer without prediction")
        wanted = {"accepted_prediction_tokens": want.accepted,
                  "rejected_prediction_tokens": want.proposed - want.accepted}
        usages = []
        if t.whole is not None:
            usages.append(("whole", whole(t.whole)[1]))
        if t.streamed is not None and not t.streamed.left:
            usages.append(("streamed", streamed(t.streamed).answer.usage))
        for how, used in usages:
            got = (used or {}).get("completion_tokens_details") or {}
            got = {k: got.get(k) for k in wanted}
            if got != wanted:
                raise AssertionError(f"request {t.index} ({t.ask.label}), {how}: "
                                     f"completion_tokens_details {got}; the library's run with "
                                     f"the same prediction accepted {want.accepted} of "
                                     f"{want.proposed} drafts: {wanted}")


@SERVED.check("V7-isolation", applies=lambda s: s.concurrent)
def check_isolation(trace: ServedTrace) -> None:
    """V7: clients served at once get each its own answer: every client that stayed gets
    exactly its answer alone (text, ids, finish, logprobs) while others join, finish and
    leave mid-answer (their decodes cancelled, some inside a prefill's pass); the leavers
    really left before their end, and a server that counts cancels (`onebit_cancelled_total`
    at /metrics) counts each leaver cancelled once nothing runs; and a request after the
    crowd is answered as alone (no slot or lock kept)."""
    __tracebackhide__ = True
    for t in _judged(trace):
        if t.ask.leave_after is not None:
            if t.expected and len(t.expected[0].ids) < 100:
                raise AssertionError(f"request {t.index} is to leave mid-answer, but its "
                                     f"answer alone is {len(t.expected[0].ids)} tokens: it "
                                     "may end before the client leaves (the scenario needs a "
                                     "longer answer or a long prompt)")
            if t.streamed is None or not t.streamed.left:
                raise AssertionError(f"request {t.index} was to leave mid-answer, but its "
                                     f"stream ended first: the scenario exercises no cancel")
            continue
        for where, got in _sent(t):
            _same_answer(got, t.expected[0], where)
            if t.ask.logprobs and got.logprobs is not None:
                got_lp = [e.logprob for e in got.logprobs]
                want_lp = [lp for lp, _ in t.expected[0].logprobs][:len(got_lp)]
                if any(not math.isclose(a, b, abs_tol=LOGPROB_TOLERANCE)
                       for a, b in zip(got_lp, want_lp, strict=True)):
                    raise AssertionError(f"{where}: logprobs differ from its answer alone")
    if trace.after is not None and trace.after.whole is None:
        raise AssertionError("the request after the crowd was not answered")
    leavers = sum(t.ask.leave_after is not None for t in trace.asks)
    served = trace.metrics or {}
    if "onebit_cancelled_total" in served:  # a server that counts its cancels says so right
        if served.get("onebit_running", 0):
            raise AssertionError(f"the crowd has gone, yet the server still runs "
                                 f"{served.get('onebit_running'):g} sequences: a leaver's "
                                 "decode goes on")
        if served["onebit_cancelled_total"] != leavers:
            raise AssertionError(f"{leavers} clients left mid-answer; the server counts "
                                 f"{served['onebit_cancelled_total']:g} cancelled (finished: "
                                 f"{served.get('onebit_finished_total', 0):g}): a leaver's "
                                 "decode was not cancelled, or was counted as an answer")
