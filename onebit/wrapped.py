"""`WrappedBase`: what every base wrapper forwards unchanged.

A wrapper (the served log-probabilities' `ScoredBase`, the knobs' `ProcessedBase`) changes
what some passes return and passes everything else through to the base it wraps: the members
the loop reads (`vocab_size`, `max_batch_rows`, the hidden rows) explicitly, and any other
attribute (a tokenizer, a config, an optional `max_prefill_rows`) by `__getattr__`. A wrapper
overrides `reset`, `step`, `verify`, `verify_last` and `commit_verify` as it needs.
"""

from __future__ import annotations


class WrappedBase:
    """The base `base`, with every member forwarded; subclasses change the passes."""

    def __init__(self, base) -> None:
        self._base = base

    def __getattr__(self, name: str):
        return getattr(self._base, name)

    @property
    def vocab_size(self) -> int:
        return self._base.vocab_size

    def max_batch_rows(self) -> int:
        return self._base.max_batch_rows()

    def last_hidden(self):
        return self._base.last_hidden()

    def last_hidden_rows(self):
        return self._base.last_hidden_rows()
