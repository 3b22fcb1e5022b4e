"""What a served answer says, read the same way by every served check: its token ids, its
text, and what speculation did by the server's own account (onebit serve's `onebit` field, or
the counters of its /metrics)."""

from __future__ import annotations

from pytest_onebit.peers.openai_client import choice_text
from pytest_onebit.peers.served_metrics import Metrics


def answer_ids(body: dict, *, verbose: bool = True) -> list[int] | None:
    """The answer's token ids: `choices[0].token_ids` (onebit serve, vLLM's
    `return_token_ids`), or llama-server's `__verbose.tokens` (asked for with `verbose` and
    `return_tokens`; a streamed chunk's holds that chunk's only, so `verbose=False` there)."""
    ids = body["choices"][0].get("token_ids")
    if not isinstance(ids, list) and verbose:
        ids = (body.get("__verbose") or {}).get("tokens")
    return list(ids) if isinstance(ids, list) else None


def answer_text(body: dict) -> str:
    """The answer's text, either endpoint's shape."""
    return choice_text(body["choices"][0])


def accepted_note(bodies: list[dict]) -> str:
    """What speculation did, where the server says (onebit serve's `onebit` field)."""
    stats = [b.get("onebit") for b in bodies if isinstance(b.get("onebit"), dict)]
    if not stats:
        return ""
    accepted = sum(s.get("accepted", 0) for s in stats)
    proposed = sum(s.get("proposed", 0) for s in stats)
    return f"; {accepted}/{proposed} drafts accepted"


def counted_note(before: Metrics | None, after: Metrics | None) -> str:
    """What speculation did, where the server's /metrics counts it (llama-server, vLLM);
    nothing when no draft was counted (the answers may have come from the arm's memo)."""
    if before is None or after is None:
        return ""
    done = after - before
    if done.drafted <= 0:
        return ""
    return f"; {int(done.accepted)}/{int(done.drafted)} drafts accepted (its /metrics)"


def drafted(bodies: list[dict], before: Metrics | None, after: Metrics | None) -> int | None:
    """Drafts proposed over `bodies`, by onebit serve's `onebit` field or the server's
    /metrics; None where the server says neither."""
    stats = [b.get("onebit") for b in bodies if isinstance(b.get("onebit"), dict)]
    if stats:
        return sum(int(s.get("proposed", 0)) for s in stats)
    if before is not None and after is not None:
        return int((after - before).drafted)
    return None
