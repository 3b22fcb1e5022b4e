"""N4 on transformers: each knob in transformers' own names, greedy with speculation (a perfect
assistant, and prompt lookup) against plain greedy with the same knob, in process.

transformers applies a knob as a logits processor (`LogitsProcessorList`): `repetition_penalty`,
`sequence_bias` (OpenAI's `logit_bias` for one-token sequences), `min_new_tokens` (OpenAI's
`min_tokens`, holding the EOS back). It has no presence or frequency penalty, so those come as
a processor of ours (`OpenAIPenalties`, OpenAI's formula) passed in `logits_processor`: the way
a user adds a knob transformers lacks, and the way a processor reaches the verify rows of an
assisted run. Each knob is judged as onebit serve's N4 is: the same tokens (the knob applied
to every verified row with its own prefix), a difference (a finding), or no effect on the
answer (not judged).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from pytest_onebit.contract.assertions import first_divergence
from pytest_onebit.peers.hf_run import counted, fresh_index, generate
from pytest_onebit.peers.protocol import Outcome, failed, passed

LOOKUP = 3  # prompt_lookup_num_tokens


class OpenAIPenalties(LogitsProcessor):
    """OpenAI's presence and frequency penalties over the tokens generated after the prompt:
    score - frequency * count - presence * [count > 0]."""

    def __init__(self, prompt_len: int, *, presence: float = 0.0, frequency: float = 0.0):
        self.prompt_len = prompt_len
        self.presence = presence
        self.frequency = frequency

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor):
        generated = input_ids[:, self.prompt_len:]
        counts = torch.zeros_like(scores)
        counts.scatter_add_(1, generated, torch.ones_like(generated, dtype=scores.dtype))
        return scores - self.frequency * counts - self.presence * (counts > 0).to(scores.dtype)


def knob_cases(prompt: list[int], plain: list[int]) -> list[tuple[str, Callable[[], dict]]]:
    """(name, a maker of the generate keywords) per knob; `plain` is the answer without knobs
    (the bias bans its first token, min_new_tokens holds back an EOS placed on a fresh token
    early in it). A maker builds fresh processors for every call: they may keep state."""
    n = len(prompt)
    eos_at = fresh_index(plain, 2)
    eos = {"eos_token_id": plain[eos_at], "pad_token_id": 0 if plain[eos_at] else 1}

    def penalties(**values) -> dict:
        return {"logits_processor": LogitsProcessorList([OpenAIPenalties(n, **values)])}

    return [
        ("presence_penalty", lambda: penalties(presence=2.0)),
        ("frequency_penalty", lambda: penalties(frequency=2.0)),
        ("repetition_penalty", lambda: {"repetition_penalty": 1.3}),
        ("logit_bias", lambda: {"sequence_bias": {(plain[0],): -100.0}}),
        ("min_tokens", lambda: {"min_new_tokens": eos_at + 4, **eos}),
        ("all", lambda: {**penalties(presence=0.5, frequency=0.5), "repetition_penalty": 1.2,
                         "sequence_bias": {(plain[0],): -100.0}, "min_new_tokens": eos_at + 4,
                         **eos}),
    ]


def judge_knobs(target, prompt: list[int], tokens: int, speculation: dict,
                mode: str) -> Outcome:
    """Every knob, `speculation` (generate keywords: an assistant, or prompt lookup) against
    plain greedy with the same knob; the detail lists each knob's verdict and the target
    passes the speculative run took (fewer than its tokens: drafts were accepted)."""
    bare = generate(target, prompt, tokens)
    verdicts, bad = [], []
    for name, make in knob_cases(prompt, bare):
        plain = generate(target, prompt, tokens, **make())
        with counted(target) as widths:
            spec = generate(target, prompt, tokens, **speculation, **make())
        where = first_divergence(spec, plain)
        passes = f" ({len(widths)} passes, {len(spec)} tokens)"
        if where is not None:
            bad.append(f"{name}: {mode} gives {spec[where:where + 4]} at new token {where}, "
                       f"plain greedy {plain[where:where + 4]}")
            verdicts.append(f"{name}: DIFFERS")
        elif plain == bare:
            verdicts.append(f"{name}: no effect")
        else:
            verdicts.append(f"{name}: equal{passes}")
    detail = "; ".join(verdicts)
    return failed(detail + " -- " + "; ".join(bad)) if bad else passed(detail)


def lookup_prompt(target, prompt: list[int], tokens: int) -> list[int]:
    """The arm's prompt, its plain answer, and the prompt again: the answer to the second
    copy repeats some of the first answer's n-grams, which prompt lookup drafts from (on the
    prompt alone a tiny random model's answer gives it almost nothing to draft)."""
    return prompt + generate(target, prompt, tokens) + prompt


def lookup_speculation() -> dict:
    return {"prompt_lookup_num_tokens": LOOKUP}
