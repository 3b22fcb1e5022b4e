"""Driving transformers' `generate` black-box: plain and assisted greedy, counted target
passes, the cache it hands back, and the settings that make an assistant draft exactly k."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from transformers import StoppingCriteria

from pytest_onebit.peers.hf_toy import CACHE_FIELD


def quiet() -> None:
    """transformers warns about deprecated argument mixes on every call; the report is ours."""
    from transformers.utils import logging

    logging.set_verbosity_error()


def draft_exactly(assistant, k: int):
    """An assistant that drafts k tokens every round: a constant schedule, and no confidence
    threshold (the default 0.4 stops drafting early)."""
    config = assistant.generation_config
    config.num_assistant_tokens = k
    config.num_assistant_tokens_schedule = "constant"
    config.assistant_confidence_threshold = 0.0
    return assistant


@contextlib.contextmanager
def counted(model) -> Iterator[list[int]]:
    """The input width of every forward pass of `model` (transformers counts none): one pass
    per round, the first the prefill and the first verify at once."""
    widths: list[int] = []

    def hook(_module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        widths.append(int(ids.shape[1]) if ids is not None else 0)

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield widths
    finally:
        handle.remove()


def generate(model, prompt: list[int], max_new: int, **kwargs) -> list[int]:
    """The new tokens of one greedy (unless kwargs say otherwise) `generate` call."""
    ids = torch.tensor([prompt])
    kwargs.setdefault("do_sample", False)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new,
                             **kwargs)
    return out[0, len(prompt):].tolist()


def generate_with_cache(model, prompt: list[int], max_new: int, **kwargs):
    """(new tokens, the cache `generate` hands back)."""
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new,
                             do_sample=False, return_dict_in_generate=True, **kwargs)
    cache = getattr(out, CACHE_FIELD, None)
    return out.sequences[0, len(prompt):].tolist(), cache


def continue_plainly(model, tokens: list[int], cache, more: int) -> list[int]:
    """Plain greedy from `tokens` with the cache a run handed back: a cache cropped wrong by
    the run (a rejected draft left in) shows in these tokens."""
    ids = torch.tensor([tokens])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=more,
                             do_sample=False, **{CACHE_FIELD: cache})
    return out[0, len(tokens):].tolist()


class StopAtLength(StoppingCriteria):
    """A consumer's stop: done once the sequence is `length` tokens long (or longer)."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __call__(self, input_ids, scores, **kwargs):
        done = input_ids.shape[-1] >= self.length
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool)


def fresh_index(tokens: list[int], start: int) -> int:
    """The first index >= start whose token does not occur earlier (an EOS there stops the
    text there and nowhere before)."""
    for j in range(start, len(tokens)):
        if tokens[j] not in tokens[:j]:
            return j
    raise ValueError(f"no token from index {start} on is new in {tokens}")
