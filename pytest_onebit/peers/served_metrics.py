"""A served engine's own speculation counters, read from its Prometheus `/metrics`: drafts
proposed and drafts accepted, as llama-server (`llamacpp:spec_decode_num_draft_tokens_total`,
with `--metrics`) and vLLM (`vllm:spec_decode_num_draft_tokens_total{...}`) count them. A peer
reads them before and after its requests to say whether speculation ran at all: a table of
passes on a server that drafted nothing compared plain decode with itself."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from dataclasses import dataclass

_COUNTER = re.compile(r"^[\w:]*?(spec_decode_num_(?:draft|accepted)_tokens_total)"
                      r"(?:\{[^}]*\})?\s+(\S+)")


@dataclass(frozen=True)
class Metrics:
    drafted: float = 0.0
    accepted: float = 0.0

    def __sub__(self, other: Metrics) -> Metrics:
        return Metrics(self.drafted - other.drafted, self.accepted - other.accepted)

    def __add__(self, other: Metrics) -> Metrics:
        return Metrics(self.drafted + other.drafted, self.accepted + other.accepted)


def parse_metrics(text: str) -> Metrics | None:
    """The counters in a Prometheus text page (summed over label sets), or None when the
    page has neither."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        m = _COUNTER.match(line)
        if m:
            values[m.group(1)] = values.get(m.group(1), 0.0) + float(m.group(2))
    if not values:
        return None
    return Metrics(values.get("spec_decode_num_draft_tokens_total", 0.0),
                   values.get("spec_decode_num_accepted_tokens_total", 0.0))


def read_metrics(url: str) -> Metrics | None:
    """The counters at `url/metrics`, or None when the server serves no such page or no
    such counters."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
            return parse_metrics(answer.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError, ValueError):
        return None
