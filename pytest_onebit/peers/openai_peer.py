"""The served variant: any OpenAI-compatible endpoint, black-box, against the same server's
own plain decode (docs/peers.md, "The openai arm").

The plain reference is a second server (`plain_url`, sent no extension field) or the same one
with `"speculative": false` in the request (onebit serve's switch). The arms are the two
endpoints, `completions` and `chat`; each check compares token ids where the server returns
them (`choices[0].token_ids`, as onebit serve and vLLM's `return_token_ids` do) and text
where it does not. Every request is greedy (temperature 0) except S1's, and short: the whole
table is a few dozen requests of at most 16 tokens.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from pytest_onebit.contract.assertions import first_divergence
from pytest_onebit.peers.answers import accepted_note as _accepted
from pytest_onebit.peers.answers import answer_ids as _ids
from pytest_onebit.peers.answers import answer_text as _text
from pytest_onebit.peers.answers import counted_note as _counted
from pytest_onebit.peers.openai_client import Client, ServerError, Unreachable
from pytest_onebit.peers.protocol import Outcome, chosen, failed, not_applicable, passed
from pytest_onebit.peers.served_metrics import read_metrics
from pytest_onebit.peers.served_s1 import Sampled, sampled_distribution

CHECKS = ("I1-text", "I1-stream", "I9-budget", "I10-stop-string", "I10-eos", "L1-logprobs",
          "C1-concurrent", "C2-concurrent-scale", "N4-knobs", "S1-distribution")
TOKENS = 16
BUDGETS = (1, 2, 3, 5)
TOP_LOGPROBS = 3
#: |logprob speculative - logprob plain| allowed, in nats. A base whose verify rows are the
#: same bits as its steps (onebit's kernels are batch-invariant) measures 0; a float32 batched
#: kernel that sums in another order differs by about 1e-6. A wrong row is off by >= 1e-2.
TOLERANCE = 1e-4
CONCURRENT = 3
#: C2: clients at once, their arrivals this many seconds apart, and the answer budgets they
#: cycle through; every other one streams, every third samples with a seed of its own
SCALE_CLIENTS = 8
SCALE_STAGGER = 0.03
SCALE_BUDGETS = (8, 24, 12, 32, 16)
SCALE_SAMPLED = {"temperature": 0.8, "top_p": 0.95}
#: N4: each knob, with the prompt it is sent on (an arm's prompt index) and its value; the
#: logit_bias case bans the plain answer's first token, so it must move the answer
KNOB_CASES = (
    ("presence_penalty", 2, {"presence_penalty": 2.0}),
    ("frequency_penalty", 2, {"frequency_penalty": 2.0}),
    ("repetition_penalty", 0, {"repetition_penalty": 1.3}),
    ("logit_bias", 0, None),
    ("all", 0, {"presence_penalty": 0.5, "frequency_penalty": 0.5, "repetition_penalty": 1.2}),
)
#: N4 on the chat arm: min_tokens on a question answered in one word, whose end of turn it
#: must hold back; response_format with a small JSON schema (an answer the schema ends within
#: JSON_TOKENS), whose answers must also parse and conform
KNOB_SCHEMA = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 16}, "country": {"type": "string", "maxLength": 16}},
    "required": ["city", "country"], "additionalProperties": False}
JSON_PROMPT = "Name a large city and its country. Answer in JSON."
CHAT_KNOB_CASES = (
    ("min_tokens", "Answer with one word: what is the capital of France?", {"min_tokens": 12}),
    ("response_format", JSON_PROMPT, {"response_format": {
        "type": "json_schema", "json_schema": {"name": "place", "schema": KNOB_SCHEMA}}}),
)
KNOB_TOKENS = 24
#: the JSON-schema case's budget: room for the schema's longest answer however the server
#: spaces it (llama-server puts each key on a line of its own: 26 tokens for a short answer)
JSON_TOKENS = 96
#: C2's prompts besides the arm's own: one answered in a few tokens, one at length
SCALE_PROMPTS = ("Answer with one word: what is the capital of France?",
                 "Write a haiku about rain.")
# Prompts on which prompt lookup drafts, and SmolLM2 accepts whole blocks (the first two) or
# rejects often (the third): a fault in the acceptance or the cut shows on one or the other.
COMPLETION_PROMPTS = ("A: hello\nB: hello\nA: hello\nB: hello\nA:",
                      "<li>apple</li>\n<li>apple</li>\n<li>apple</li>\n<li>",
                      "1, 2, 3, 4, 5, 6, 7, 8,")
CHAT_PROMPTS = ("Repeat this sentence twice: the cat sat on the mat.",
                "Count from 1 to 10, separated by commas.")
# (prompt index, stop): each completes inside the first accepted block on SmolLM2
COMPLETION_STOPS = ((0, "B:"), (1, "</li>"), (0, ["zzz", "\nA"]))
CHAT_STOPS = ((0, "mat"), (1, ", 4"))
# I10-eos: conversations SmolLM2 answers in a few tokens and then ends its turn; in the first
# two the same question was answered before, so prompt lookup finds the answer and the
# end-of-turn token after it in the prompt and drafts them in one block
EOS_CHATS = (
    [{"role": "user", "content": "Reply with only the word yes."},
     {"role": "assistant", "content": "Yes."},
     {"role": "user", "content": "Reply with only the word yes."}],
    [{"role": "user", "content": "What is 2 + 2? Answer with the number only."},
     {"role": "assistant", "content": "2 + 2 = 4"},
     {"role": "user", "content": "What is 2 + 2? Answer with the number only."}],
    [{"role": "user", "content": "Answer with one word: what is the capital of France?"}],
)
EOS_BUDGET = 48


def _logprobs(body: dict) -> list[tuple[float, list[float]]]:
    """(chosen logprob, the alternatives' logprobs) per token, from either endpoint's shape."""
    lp = body["choices"][0].get("logprobs") or {}
    if "content" in lp:
        return [(e["logprob"], [t["logprob"] for t in e.get("top_logprobs", [])])
                for e in lp["content"] or []]
    tops = lp.get("top_logprobs") or []
    return [(value, sorted((tops[i] or {}).values(), reverse=True) if i < len(tops) else [])
            for i, value in enumerate(lp.get("token_logprobs") or [])]


def _cut(*answers: dict) -> bool:
    """Whether any answer ended on the budget (finish_reason "length"): a JSON answer cut there
    is not a whole one."""
    return any(a["choices"][0].get("finish_reason") == "length" for a in answers)


def _cut_outside(*answers: dict) -> str | None:
    """Why an answer the budget cut has already left KNOB_SCHEMA (read byte by byte by
    llguidance: `onebit.grammar.Grammar.reads`), or None when every answer is a beginning of
    conforming JSON. Without llguidance nothing is judged (None)."""
    from onebit.grammar import Grammar, GrammarError

    try:
        grammar = Grammar.json_schema(KNOB_SCHEMA)
    except GrammarError:  # llguidance is not installed
        return None
    for which, answer in zip(("speculative", "plain"), answers, strict=False):
        text = _text(answer)
        if not grammar.reads(text)[0]:
            return f"the {which} answer {text[:60]!r}, cut by the budget, already left the schema"
    return None


def _not_conforming(*answers: dict) -> str | None:
    """Why an answer to N4's JSON-schema request is not JSON that conforms to KNOB_SCHEMA
    (checked with jsonschema where it is installed, else parsed only), or None when every
    answer is."""
    import json

    try:
        import jsonschema
    except ImportError:  # the plugin without the dev extra: parse, no schema check
        jsonschema = None
    invalid = (ValueError,) if jsonschema is None else (ValueError, jsonschema.ValidationError)
    for which, answer in zip(("speculative", "plain"), answers, strict=False):
        text = _text(answer)
        try:
            value = json.loads(text)
            if jsonschema is not None:
                jsonschema.validate(value, KNOB_SCHEMA)
        except invalid as error:
            first = str(error).splitlines()[0][:80]
            return f"the {which} answer {text[:60]!r} is not conforming JSON ({first})"
    return None


def _diverges(spec: dict, plain: dict) -> str | None:
    """Where a speculative answer first differs from plain's: ids when both have them (the
    text too), else the text."""
    a, b = _ids(spec), _ids(plain)
    if a is not None and b is not None:
        at = first_divergence(a, b)
        if at is not None:
            got = a[at] if at < len(a) else "end"
            want = b[at] if at < len(b) else "end"
            return f"token {at}: speculative {got} vs plain {want} ({len(a)} vs {len(b)} ids)"
    ta, tb = _text(spec), _text(plain)
    if ta != tb:
        at = next((i for i, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y),
                  min(len(ta), len(tb)))
        return f"text at character {at}: speculative {ta[at:at + 20]!r} vs plain " \
               f"{tb[at:at + 20]!r}"
    return None


class OpenAIPeer:
    """`onebit peer openai --url URL [--plain-url URL]`."""

    name = "openai"
    checks = CHECKS

    def __init__(self, url: str, plain_url: str | None = None, *,
                 arms: tuple[str, ...] | None = None, only: tuple[str, ...] | None = None,
                 sampled: bool = False, delta: float | None = None,
                 timeout: float = 120.0, fields: dict | None = None,
                 knob_names: dict | None = None, s1: Sampled | None = None) -> None:
        self.client = Client(url, timeout=timeout)
        self.plain = Client(plain_url, timeout=timeout) if plain_url else None
        self.only = chosen(only, CHECKS, "openai peer check")
        self.arm_names = chosen(arms, tuple(ENDPOINTS), "openai peer arm")
        self.sampled = sampled
        # S1's request and power (served_s1): `delta` sets the TV both of its tests detect
        self.s1 = s1 if s1 is not None else Sampled(delta=delta)
        self.model = "?"
        self.fields = dict(fields or {})  # sent in every request (a server's own switches)
        self.knob_names = dict(knob_names or {})  # N4: a knob's name in this server's API

    def unavailable(self) -> str | None:
        try:
            self.model = self.client.model_id()
            if self.plain is not None:
                self.plain.model_id()
        except Unreachable as error:
            return f"cannot reach the server: {error}"
        return None

    def version(self) -> str:
        plain = self.plain.root if self.plain else "the same server, speculative: false"
        return f"{self.model} at {self.client.root}; plain: {plain}"

    def arms(self) -> list:
        return [EndpointArm(self, name) for name in self.arm_names]


ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


class EndpointArm:
    def __init__(self, peer: OpenAIPeer, name: str) -> None:
        self.peer = peer
        self.name = name
        self.path = ENDPOINTS[name]
        self.prompts = COMPLETION_PROMPTS if name == "completions" else CHAT_PROMPTS
        self.stops = COMPLETION_STOPS if name == "completions" else CHAT_STOPS
        self.note = (f"POST {self.path}, greedy, {TOKENS} tokens, {len(self.prompts)} "
                     f"prompts; plain: {'--plain-url' if peer.plain else 'speculative: false'}")
        self._memo: dict[str, dict] = {}

    # -- requests ---------------------------------------------------------------------------

    def body(self, prompt: str, **fields) -> dict:
        key = "prompt" if self.name == "completions" else "messages"
        value = prompt if key == "prompt" else [{"role": "user", "content": prompt}]
        return {"model": self.peer.model, key: value, "temperature": 0, "max_tokens": TOKENS,
                **self.peer.fields, **fields}

    def logprob_fields(self) -> dict:
        if self.name == "completions":
            return {"logprobs": TOP_LOGPROBS}
        return {"logprobs": True, "top_logprobs": TOP_LOGPROBS}

    def ask(self, body: dict, *, plain: bool = False, fresh: bool = False) -> dict:
        if plain:
            client = self.peer.plain or self.peer.client
            if self.peer.plain is None:
                body = {**body, "speculative": False}
        else:
            client = self.peer.client
        key = json.dumps([plain, body], sort_keys=True)
        if fresh or key not in self._memo:
            self._memo[key] = client.post(self.path, body)
        return self._memo[key]

    def pair(self, body: dict) -> tuple[dict, dict]:
        return self.ask(body), self.ask(body, plain=True)

    # -- checks -----------------------------------------------------------------------------

    def judge(self) -> dict[str, Outcome]:
        outcomes = {name: self.run_check(name) for name in self.peer.only}
        for name in CHECKS:
            outcomes.setdefault(name, not_applicable("not asked (--check)"))
        return outcomes

    def run_check(self, name: str) -> Outcome:
        """One check on this endpoint (what `judge` runs for each; the pytest entry,
        pytest_onebit.peers.served, runs them one test each): a server error or an answer
        not in OpenAI's shape is the check's failure, naming it."""
        checks: dict[str, Callable[[], Outcome]] = {
            "I1-text": self.text, "I1-stream": self.stream, "I9-budget": self.budget,
            "I10-stop-string": self.stop, "I10-eos": self.eos, "L1-logprobs": self.logprobs,
            "C1-concurrent": self.concurrent, "C2-concurrent-scale": self.scale,
            "N4-knobs": self.knobs,
            "S1-distribution": self.distribution}
        if name not in checks:
            raise ValueError(f"unknown openai peer check {name!r}; one of {', '.join(CHECKS)}")
        try:
            return checks[name]()
        except (ServerError, Unreachable) as error:
            return failed(f"the server answered {error}")
        except (KeyError, IndexError, TypeError, ValueError) as error:
            return failed(f"an answer not in OpenAI's shape: {type(error).__name__}: {error}")

    def text(self) -> Outcome:
        bodies, bad = [], []
        before = read_metrics(self.peer.client.root)
        for i, prompt in enumerate(self.prompts):
            spec, plain = self.pair(self.body(prompt))
            bodies.append(spec)
            if (where := _diverges(spec, plain)) is not None:
                bad.append(f"prompt {i}: {where}")
        what = "ids" if _ids(bodies[0]) is not None else "text (no token_ids returned)"
        if bad:
            return failed("; ".join(bad))
        counted = _accepted(bodies) or _counted(before, read_metrics(self.peer.client.root))
        return passed(f"{len(self.prompts)} prompts, {what} equal{counted}")

    def stream(self) -> Outcome:
        bad = []
        for i, prompt in enumerate(self.prompts):
            body = self.body(prompt)
            whole = self.ask(body)
            streamed = self.peer.client.stream(self.path, body)
            if streamed.text != _text(whole):
                bad.append(f"prompt {i}: streamed {streamed.text[:40]!r}... != non-streamed "
                           f"{_text(whole)[:40]!r}...")
                continue
            want, last = _ids(whole), _ids(streamed.last, verbose=False) if streamed.last \
                else None
            if want is None or last is None:
                continue
            # two conventions: the last chunk holds every id (onebit serve), or each chunk
            # holds its own (vLLM); either way the ids must be the non-streamed answer's
            joined = [t for c in streamed.chunks if c.get("choices")
                      for t in (_ids(c, verbose=False) or [])]
            if want not in (last, joined):
                bad.append(f"prompt {i}: streamed token_ids {joined[:8]}... (last chunk "
                           f"{last[:8]}...) differ from non-streamed {want[:8]}...")
        return failed("; ".join(bad)) if bad else passed(
            f"{len(self.prompts)} prompts, streamed text joined equals non-streamed")

    def budget(self) -> Outcome:
        bad, bodies = [], []
        for n in BUDGETS:
            body = self.body(self.prompts[0], max_tokens=n)
            spec, plain = self.pair(body)
            bodies.append(spec)
            made = (spec.get("usage") or {}).get("completion_tokens")
            ids = _ids(spec)
            finish = spec["choices"][0].get("finish_reason")
            if ids is not None and len(ids) != n and finish == "length":
                bad.append(f"max_tokens={n} returned {len(ids)} token ids")
            elif made is not None and made != n and finish == "length":
                bad.append(f"max_tokens={n}: usage.completion_tokens = {made}")
            elif ids is not None and len(ids) > n or made is not None and made > n:
                bad.append(f"max_tokens={n} returned {len(ids or []) or made} tokens")
            elif (where := _diverges(spec, plain)) is not None:
                bad.append(f"max_tokens={n}: {where}")
        return failed("; ".join(bad)) if bad else passed(
            f"max_tokens in {BUDGETS}: exactly that many, plain's{_accepted(bodies)}")

    def stop(self) -> Outcome:
        bad, bodies, ends = [], [], []
        for i, stop in self.stops:
            spec, plain = self.pair(self.body(self.prompts[i], stop=stop))
            bodies.append(spec)
            text = _text(spec)
            stops = [stop] if isinstance(stop, str) else stop
            hit = [s for s in stops if s in text]
            if hit:
                bad.append(f"stop {stop!r}: the text holds {hit[0]!r} and goes on to "
                           f"{text[text.index(hit[0]):][:30]!r}")
            elif (where := _diverges(spec, plain)) is not None:
                bad.append(f"stop {stop!r}: {where}")
            elif spec["choices"][0].get("finish_reason") != plain["choices"][0].get(
                    "finish_reason"):
                bad.append(f"stop {stop!r}: finish_reason "
                           f"{spec['choices'][0].get('finish_reason')!r} vs plain's "
                           f"{plain['choices'][0].get('finish_reason')!r}")
            else:
                ends.append(f"{stop!r} after {len(text)} chars")
        return failed("; ".join(bad)) if bad else passed(
            f"text ends where plain's does: {', '.join(ends)}{_accepted(bodies)}")

    def eos(self) -> Outcome:
        """Where plain's answer ends its turn within EOS_BUDGET tokens, the speculative one
        ends at the same token: the same ids (none past the end), finish_reason "stop" and
        usage.completion_tokens."""
        if self.name != "chat":
            return not_applicable("chat only: a conversation ends its turn")
        ends, bad, bodies = [], [], []
        for i, messages in enumerate(EOS_CHATS):
            body = {**self.body("", max_tokens=EOS_BUDGET), "messages": messages}
            spec, plain = self.pair(body)
            bodies.append(spec)
            if plain["choices"][0].get("finish_reason") != "stop":
                continue
            ends.append(len(_ids(plain) or []) or len(_text(plain)))
            used = [(b.get("usage") or {}).get("completion_tokens") for b in (spec, plain)]
            if (where := _diverges(spec, plain)) is not None:
                bad.append(f"conversation {i}: {where}")
            elif spec["choices"][0].get("finish_reason") != "stop":
                bad.append(f"conversation {i}: finish_reason "
                           f"{spec['choices'][0].get('finish_reason')!r} where plain's turn "
                           f"ended")
            elif used[0] != used[1]:
                bad.append(f"conversation {i}: usage.completion_tokens {used[0]} vs plain's "
                           f"{used[1]}")
        if not ends:
            return not_applicable(f"no conversation ended its turn within {EOS_BUDGET} tokens")
        if bad:
            return failed("; ".join(bad))
        return passed(f"{len(ends)} answers end with the turn, after {ends} tokens, as "
                      f"plain's{_accepted(bodies)}")

    def logprobs(self) -> Outcome:
        worst, bad = 0.0, []
        for i, prompt in enumerate(self.prompts):
            spec, plain = self.pair(self.body(prompt, **self.logprob_fields()))
            if (where := _diverges(spec, plain)) is not None:
                bad.append(f"prompt {i}: {where}")
                continue
            a, b = _logprobs(spec), _logprobs(plain)
            if len(a) != len(b) or not a:
                bad.append(f"prompt {i}: {len(a)} logprobs vs plain's {len(b)}")
                continue
            for t, ((la, ta), (lb, tb)) in enumerate(zip(a, b, strict=True)):
                diffs = [abs(la - lb)] + [abs(x - y) for x, y in zip(ta, tb, strict=False)]
                if len(ta) != len(tb):
                    diffs.append(float("inf"))
                worst = max(worst, max(diffs))
                if max(diffs) > TOLERANCE:
                    bad.append(f"prompt {i} token {t}: logprob {la:.6f} vs plain {lb:.6f}")
                    break
        if bad:
            return failed("; ".join(bad) + f" (tolerance {TOLERANCE:g} nats)")
        return passed(f"largest difference {worst:.2g} nats (tolerance {TOLERANCE:g}), "
                      f"chosen token and top {TOP_LOGPROBS}")

    def concurrent(self) -> Outcome:
        prompts = self.prompts[:CONCURRENT]
        alone = [self.ask(self.body(p)) for p in prompts]
        together: list = [None] * len(prompts)
        start = threading.Barrier(len(prompts))

        def one(i: int) -> None:
            start.wait()
            try:
                together[i] = self.ask(self.body(prompts[i]), fresh=True)
            except (ServerError, Unreachable) as error:
                together[i] = error

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        bad = []
        for i, (a, b) in enumerate(zip(together, alone, strict=True)):
            if isinstance(a, Exception):
                bad.append(f"prompt {i}: {a}")
            elif (where := _diverges(a, b)) is not None:
                bad.append(f"prompt {i} concurrent vs alone: {where}")
        return failed("; ".join(bad)) if bad else passed(
            f"{len(prompts)} requests at once, each as alone")

    def scale_requests(self) -> list[tuple[dict, bool]]:
        """C2's requests: (body, streamed). Prompts of every length the arm has, each budget,
        streamed and not, greedy and seeded-sampled."""
        prompts = [*self.prompts, *SCALE_PROMPTS]
        out = []
        for i in range(SCALE_CLIENTS):
            fields = {"max_tokens": SCALE_BUDGETS[i % len(SCALE_BUDGETS)]}
            if i % 3 == 2:
                fields.update(SCALE_SAMPLED, seed=1000 + i)
            out.append((self.body(prompts[i % len(prompts)], **fields), i % 2 == 1))
        return out

    def send(self, body: dict, streamed: bool) -> list[int] | str:
        """One request's answer: its ids where the server returns them, else its text. A
        stream's answer is its text joined: servers put ids in streamed chunks by two
        conventions (all in the last, or each chunk its own), and chunk boundaries move with
        the load, so only the joined text is comparable across runs."""
        if streamed:
            return self.peer.client.stream(self.path, body).text
        answer = self.peer.client.post(self.path, body)
        ids = _ids(answer)
        return ids if ids is not None else _text(answer)

    def scale(self) -> Outcome:
        import time

        requests = self.scale_requests()
        alone = [self.send(b, st) for b, st in requests]
        # a seeded answer the server does not reproduce even alone is not judged together
        unstable = {i for i, (b, st) in enumerate(requests)
                    if "seed" in b and self.send(b, st) != alone[i]}
        together: list = [None] * len(requests)

        def one(i: int) -> None:
            time.sleep(SCALE_STAGGER * i)
            try:
                together[i] = self.send(*requests[i])
            except (ServerError, Unreachable) as error:
                together[i] = error

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        bad = []
        for i, (got, want) in enumerate(zip(together, alone, strict=True)):
            kind = ("sampled" if "seed" in requests[i][0] else "greedy") + \
                (", streamed" if requests[i][1] else "")
            if isinstance(got, Exception):
                bad.append(f"request {i} ({kind}): {got}")
            elif i not in unstable and got != want:
                at = first_divergence(list(got), list(want))
                bad.append(f"request {i} ({kind}) together vs alone: differs at "
                           f"{'token' if isinstance(got, list) else 'character'} {at}")
        note = (f"; {len(unstable)} seeded answers not reproducible even alone, not judged"
                if unstable else "")
        if bad:
            return failed("; ".join(bad) + note)
        return passed(f"{len(requests)} clients {SCALE_STAGGER * 1000:.0f} ms apart, budgets "
                      f"{min(SCALE_BUDGETS)}-{max(SCALE_BUDGETS)}, streamed and not, greedy and "
                      f"seeded-sampled: each as alone{note}")

    def knob_body(self, prompt: str, fields: dict) -> dict:
        """A knob request in the server's own names (`--knob-name` renames, e.g. llama-server's
        `repeat_penalty`); the JSON-schema case with a budget its whole answer fits in."""
        renamed = {self.peer.knob_names.get(k, k): v for k, v in fields.items()}
        budget = JSON_TOKENS if "response_format" in fields else KNOB_TOKENS
        return self.body(prompt, max_tokens=budget, **renamed)

    def knobs(self) -> Outcome:
        """Each knob, speculation against plain: the same ids (the knob applied to every
        drafted row with its own prefix's state), or a difference (a finding), or refused by
        the server (recorded as refused, never a pass), or no effect on the answer (the knob
        ignored, or too weak on this prompt: not judged). Completions take the penalties and
        the bias, chat `min_tokens` on a question answered in one word and `response_format`
        with a JSON schema, whose answers, speculative and plain, must also parse and conform
        (an answer that does not is a finding even when both agree; one the budget cut must
        still be inside the schema so far)."""
        chat = self.name == "chat"
        verdicts, bad = [], []
        for name, index, fields in CHAT_KNOB_CASES if chat else KNOB_CASES:
            prompt = index if chat else self.prompts[index]
            bare = self.ask(self.body(prompt, max_tokens=KNOB_TOKENS), plain=True)
            if fields is None:
                ids = _ids(bare)
                if not ids:
                    verdicts.append(f"{name}: not judged (no token ids)")
                    continue
                fields = {"logit_bias": {str(ids[0]): -100}}
            body = self.knob_body(prompt, fields)
            try:
                spec, plain = self.pair(body)
            except ServerError as error:
                if 400 <= error.status < 500:
                    verdicts.append(f"{name}: refused ({error.status})")
                    continue
                raise
            if (where := _diverges(spec, plain)) is not None:
                bad.append(f"{name}: {where}")
                verdicts.append(f"{name}: DIFFERS")
            elif name == "response_format" and _cut(spec, plain):
                if why := _cut_outside(spec, plain):
                    bad.append(f"{name}: {why}")
                    verdicts.append(f"{name}: INVALID JSON")
                else:
                    verdicts.append(f"{name}: equal, cut by the budget of {JSON_TOKENS} "
                                    "tokens inside the schema")
            elif name == "response_format" and (why := _not_conforming(spec, plain)):
                bad.append(f"{name}: {why}")
                verdicts.append(f"{name}: INVALID JSON")
            elif _diverges(plain, bare) is None:
                verdicts.append(f"{name}: no effect")
            else:
                verdicts.append(f"{name}: equal")
        detail = "; ".join(verdicts)
        return failed(detail + " -- " + "; ".join(bad)) if bad else passed(detail)

    def distribution(self) -> Outcome:
        """S1 (opt-in): sampled answers with speculation distributed as plain sampling's, by
        the one-sample test where the plain server's top_logprobs cover top-k, else the
        two-sample test (pytest_onebit/peers/served_s1.py)."""
        if not self.peer.sampled:
            return not_applicable(f"opt-in (--sampled): {self.peer.s1.plan()}")
        return sampled_distribution(self, self.peer.s1)
