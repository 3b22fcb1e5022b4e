"""What a served request must answer, worked out without the server.

Two references, each from a body as the client sent it (OpenAI's field meanings, read here
again, not through the server's parser):
- `library_answer`: the library's answer to the same request, `onebit.generate` with the
  server's head, the same seed, knobs and budget, then cut where a stop token id or stop
  string ends it. A served answer must equal it token for token, greedy or seeded-sampled.
- `definition_answer` (greedy only): the model stepped one token at a time, each knob applied
  to the raw scores as its own definition says (vLLM's and OpenAI's), with no loop, no head,
  no processor of onebit's: knobs that combine wrongly, or a knob the server drops, differ.
Log-probabilities are the raw scores of each token's own prefix (`raw_scores`: the model run
over prompt + answer), whatever knobs were on: what vLLM reports by default.

The end of an answer, by definition: it ends at the first token that is a stop id (the
model's EOS / end of turn, or a `stop_token_ids` entry), kept in the ids, its text not in the
text; or at the first token after which the text holds a stop string, kept in the ids, the
text cut before the stop; or at the budget. Logprobs list the tokens whose text the client
got: all but a stop id, and where a stop string cut the text, those wholly inside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pytest_onebit.serve.scenarios import CHAT, Ask

#: the score a held-back token gets (min_tokens): far below any real score
HELD = -1.0e30


@dataclass
class Expected:
    ids: list[int]  # every token emitted for the answer, the one that ended it included
    text: str
    finish: str  # "stop" or "length"
    prompt_tokens: int
    logprobs: list[tuple[float, tuple[tuple[int, float], ...]]] = field(default_factory=list)
    listed: int = 0  # how many of `ids` the logprobs list: those whose text the client got
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    accepted: int = 0  # drafts the library's run accepted (a prediction's, where one is sent)
    proposed: int = 0


def messages_or_prompt(ask: Ask):
    return [{"role": "user", "content": ask.prompt}] if ask.endpoint == CHAT else ask.prompt


def prompt_ids(model, ask: Ask) -> list[int]:
    """The prompt as the library tokenizes it (the chat template's text carries its BOS)."""
    from onebit.text.generate import prompt_text

    tok = model.tokenizer
    text, templated = prompt_text(tok, messages_or_prompt(ask), chat=ask.endpoint == CHAT,
                                  system=None)
    return tok.encode(text, add_special_tokens=not templated)


def budget(model, ask: Ask, body: dict, prompt: int) -> int:
    room = int(model.context_length) - prompt
    wanted = body.get("max_completion_tokens") or body.get("max_tokens")
    return room if wanted is None else min(int(wanted), room)


def _stop_list(body: dict) -> tuple[str, ...]:
    stop = body.get("stop") or ()
    return (stop,) if isinstance(stop, str) else tuple(stop)


def _bias(body: dict) -> dict[int, float]:
    return {int(k): float(v) for k, v in (body.get("logit_bias") or {}).items()}


def _sampling(body: dict):
    import onebit

    t = float(body.get("temperature", 1.0))
    if t == 0.0:
        return None
    top_k = int(body.get("top_k", 0))
    return onebit.Sampling(temperature=t, top_k=0 if top_k == -1 else top_k,
                           top_p=float(body.get("top_p", 1.0)))


def _grammar(body: dict):
    form = body.get("response_format") or {}
    if form.get("type") in (None, "text"):
        return None
    from onebit.grammar import Grammar

    if form["type"] == "json_object":
        return Grammar.json_object()
    return Grammar.json_schema(form["json_schema"]["schema"], "response_format")


def library_answer(model, ask: Ask, body: dict, *, head: str) -> Expected:
    """`onebit.generate` on the same request with the server's `head`, cut as a server cuts."""
    import onebit

    ids = prompt_ids(model, ask)
    stop_ids = tuple(body.get("stop_token_ids") or ())
    knobs = onebit.Processors(
        presence_penalty=float(body.get("presence_penalty") or 0),
        frequency_penalty=float(body.get("frequency_penalty") or 0),
        repetition_penalty=float(body.get("repetition_penalty") or 1),
        logit_bias=_bias(body), min_tokens=int(body.get("min_tokens") or 0),
        held=frozenset(stop_ids), grammar=_grammar(body))
    sampling = _sampling(body)
    made = onebit.generate(model, messages_or_prompt(ask), chat=ask.endpoint == CHAT,
                           max_tokens=budget(model, ask, body, len(ids)), head=head,
                           sampling=sampling, seed=body.get("seed") if sampling else None,
                           processors=knobs, prediction=prediction_text(body))
    answer = end_of(model, ids, list(made.result.tokens), body)
    answer.accepted, answer.proposed = made.result.stats.accepted, made.result.stats.proposed
    return answer


def prediction_text(body: dict) -> str | None:
    """OpenAI's `prediction` as one text (its parts joined), or None."""
    form = body.get("prediction")
    if form is None:
        return None
    content = form["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def definition_answer(model, ask: Ask, body: dict) -> Expected:
    """Greedy, the model stepped token by token, each knob by its definition: repetition
    penalty over prompt and answer (s / r above 0, s * r below), frequency and presence
    penalties over the answer, the bias added, the stop ids held back below `min_tokens`."""
    if _sampling(body) is not None or _grammar(body) is not None:
        raise ValueError("the definitions' reference decodes greedy requests without a grammar")
    ids = prompt_ids(model, ask)
    tok = model.tokenizer
    stop_ids = frozenset(tok.stop_ids) | frozenset(body.get("stop_token_ids") or ())
    r = float(body.get("repetition_penalty") or 1)
    presence = float(body.get("presence_penalty") or 0)
    frequency = float(body.get("frequency_penalty") or 0)
    least = int(body.get("min_tokens") or 0)
    bias = _bias(body)
    rows = _prompt_rows(model, ids)
    row = rows[-1]
    answer: list[int] = []
    for _ in range(budget(model, ask, body, len(ids))):
        s = np.asarray(row, np.float64).copy()
        for t in set(ids) | set(answer):
            s[t] = s[t] / r if s[t] > 0 else s[t] * r
        for t in set(answer):
            s[t] -= frequency * answer.count(t) + presence
        for t, b in bias.items():
            s[t] += b
        if len(answer) < least:
            for t in stop_ids:
                s[t] = HELD
        token = int(np.argmax(s))
        answer.append(token)
        if token in stop_ids:
            break
        row = model.step(token, len(ids) + len(answer) - 1)
    return end_of(model, ids, answer, body)


def _prompt_rows(model, ids: list[int]) -> np.ndarray:
    """The model's rows over `ids` from a reset, committed (verify in the base's width)."""
    model.reset()
    width = max(1, int(model.max_batch_rows()))
    rows = []
    for start in range(0, len(ids), width):
        chunk = ids[start:start + width]
        rows.append(np.asarray(model.verify(chunk, start), np.float64))
        model.commit_verify(len(chunk))
    return np.concatenate(rows)


def raw_scores(model, ids: list[int], answer: list[int], top: int):
    """(logprob, top alternatives) of each answer token from the raw scores of its prefix:
    log-softmax in float64, alternatives likeliest first, ties to the lower id."""
    if not answer:
        return []
    rows = _prompt_rows(model, ids + answer[:-1])[len(ids) - 1:]
    out = []
    for token, row in zip(answer, rows, strict=True):
        logp = row - row.max()
        logp = logp - np.log(np.exp(logp).sum())
        order = np.lexsort((np.arange(logp.size), -logp))[:top]
        out.append((float(logp[token]), tuple((int(i), float(logp[i])) for i in order)))
    return out


def end_of(model, ids: list[int], tokens: list[int], body: dict) -> Expected:
    """Where the answer `tokens` (decoded past any stop) ends under the body's stops."""
    tok = model.tokenizer
    stop_ids = frozenset(tok.stop_ids) | frozenset(body.get("stop_token_ids") or ())
    stops = _stop_list(body)
    kept: list[int] = []
    for i, token in enumerate(tokens):
        if token in stop_ids:
            return _expected(model, ids, tokens[:i + 1], tok.decode(kept, skip_special_tokens=True),
                             "stop", i, body, stops)
        kept.append(token)
        text = tok.decode(kept, skip_special_tokens=True)
        found = [at for s in stops if (at := text.find(s)) >= 0]
        if found:  # listed: the tokens with a character before the cut
            cut = min(found)
            listed = sum(len(tok.decode(kept[:j], skip_special_tokens=True)) < cut
                         for j in range(len(kept)))
            return _expected(model, ids, tokens[:i + 1], text[:cut], "stop", listed, body,
                             stops)
    return _expected(model, ids, tokens, tok.decode(kept, skip_special_tokens=True), "length",
                     len(tokens), body, stops)


def _expected(model, ids, tokens, text, finish, listed, body, stops) -> Expected:
    wanted = body.get("logprobs")
    scores = []
    # chat: true and top_logprobs; completions: the count (0: the chosen token only)
    if wanted is not None and wanted is not False:
        top = (body.get("top_logprobs") or 0) if wanted is True else int(wanted)
        scores = raw_scores(model, ids, tokens, int(top))
    return Expected(list(tokens), text, finish, len(ids), scores, listed, stops,
                    tuple(body.get("stop_token_ids") or ()))
