"""The draft heads a user can name, in one table: how each is built for one sequence and for
a slot of the batch engine, whether a seeded sampled request drafts with it, and its
natural k.

`onebit generate`, `onebit chat` and `onebit serve` take their `--head` choices from
`HEAD_NAMES`; `onebit.generate` and the server build every head through `resolve` (one
sequence) and `batched` (a slot), so the rule for when a request decodes plainly is written
once (`decodes_plain`). Adding a head is one row of `HEADS` and its own module
(CONTRIBUTING.md, "Adding a head").

Two ways to run a one-pass head: under the cost policy (`PolicyHead`), which sends a round's
drafts only where it has measured that they pay on this model, or with every draft sent (the
server's named heads: the served checks judge drafts, and a policy that withholds them would
leave nothing to judge; and a seeded run's named head, whose draws must replay, as the policy's
draft lengths follow its clock).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

#: whether `auto` drafts with a trained head where one is found. Off: with the shipped head,
#: the hybrid under the policy ran ten chat prompts at a median 1.00 of prompt lookup under
#: the policy (worst 0.84, best 1.17; benchmarks/default_ab.py, docs/heads.md), so it does
#: not beat the default it would replace
USE_TRAINED_BY_DEFAULT = False

# model -> {(head name, k): its PolicyHead} (policy_head): one policy per model and head, so
# what it measured of the model's verify cost and of the head's acceptance carries over
_POLICIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class HeadSpec:
    """One row of the table. `build(model, k, draft, every_draft)` gives (head, k) for one
    sequence; `slot(k)` gives (factory, k) for a slot of the batch engine, `factory(clock)`
    making a fresh head on the sequence's own clock, or is None where the head reads what a
    batched slot does not carry (layer taps, hidden rows); `drafts_seeded` is False where a
    seeded sampled request decodes plainly instead (the policy's draft lengths follow its
    clock, a sampled answer's draws follow the draft lengths, and a seed promises the same
    answer again); `learn(tokens)` is what the head keeps of a finished answer for the
    requests after it (None: nothing), called by whoever ran the request (`learn` below)."""

    name: str
    summary: str
    build: Callable | None  # None: plain decode
    slot: Callable | None = None
    drafts_seeded: bool = True
    learn: Callable | None = None

    @property
    def batchable(self) -> bool:
        return self.build is None or self.slot is not None


def _file_name(model) -> str:
    path = getattr(model, "source_path", None)
    return path.name if path is not None else type(model).__name__


def trained_head_dir(model):
    """The directory of the head for the model's file: the one `onebit train-head` saved for
    it, else the one shipped with onebit for it (onebit.heads.shipped), else None (also when
    the model does not know its file). Both are found by the file's sha256."""
    from onebit.heads.eagle import CONFIG_FILE, cached_head_dir
    from onebit.heads.shipped import shipped_for

    path = getattr(model, "source_path", None)
    if path is None or not path.is_file():
        return None
    folder = cached_head_dir(path)
    return folder if (folder / CONFIG_FILE).is_file() else shipped_for(path)


def trained_head(model, *, k: int | None = None):
    """The `EagleHead` of `trained_head_dir(model)`, or None when there is none. A head for
    another file is never found, and loading checks the file's sha256 again."""
    from onebit.heads.eagle import load_head

    folder = trained_head_dir(model)
    if folder is None:
        return None
    return load_head(folder, model, base_path=model.source_path, k=k)


def _trained_or_error(model, k: int | None):
    trained = trained_head(model, k=k)
    if trained is None:
        from onebit.heads.errors import DraftError

        raise DraftError(f"no trained head for {_file_name(model)}: make one with "
                         "`onebit train-head` (or pick another --head)")
    return trained


def _lookup(k: int | None):
    """Prompt lookup as every head that uses it builds it: trigrams, 8 drafts at most."""
    from onebit.heads import NgramHead

    return NgramHead(n=3, k=k or 8)


_SUFFIX_CACHE = None
_SUFFIX_LOCK = threading.Lock()


def suffix_cache():
    """The process's `SuffixCache` (onebit.heads.suffix): the finished answers every "suffix"
    head built here drafts from, made on first use. The heads only read it; whoever runs a
    request adds its answer (`suffix_cache().add(head.answer)`, the `SuffixHead` being the
    policy's `inner` under the cost policy) and may export `suffix_cache().size()`. One cache
    for the process: a slot's factory is not told the model, and a process serves one."""
    global _SUFFIX_CACHE
    with _SUFFIX_LOCK:
        if _SUFFIX_CACHE is None:
            from onebit.heads.suffix import SuffixCache

            _SUFFIX_CACHE = SuffixCache()
        return _SUFFIX_CACHE


def _suffix_head(k: int | None):
    """Suffix decoding as every row that uses it builds it: the request's own tree and the
    process's cache, 32 drafts at most."""
    from onebit.heads.suffix import SUFFIX_K, SuffixHead

    return SuffixHead(suffix_cache(), k=k or SUFFIX_K)


def policy_head(model, name: str = "ngram", k: int | None = None):
    """The model's `PolicyHead` over its one-pass head `name` ("ngram": prompt lookup;
    "suffix": suffix decoding over the request and `suffix_cache()`, judged draft by draft by
    its step probabilities; "trained": the head `onebit train-head` made for its file or
    shipped for it, a `DraftError` when there is none; "hybrid": that head with prompt lookup
    in front, onebit.heads.hybrid), drafting at most `k` a round (default: the head's own),
    made once per model, name and k and kept with the model, so what it measured of the
    model's verify cost and of the head's acceptance carries over from call to call."""
    from onebit.heads.policy import PolicyHead

    def make():
        if name == "trained":
            trained = _trained_or_error(model, k)
            return PolicyHead(trained, max_k=trained.k)
        if name == "hybrid":
            from onebit.heads.hybrid import HybridHead

            hybrid = HybridHead(_trained_or_error(model, None), n=3, k=k or 7)
            return PolicyHead(hybrid, max_k=hybrid.k)
        if name == "suffix":
            suffix = _suffix_head(k)
            return PolicyHead(suffix, max_k=suffix.k)
        if name != "ngram":
            raise ValueError("policy_head takes 'ngram', 'suffix', 'trained' or 'hybrid', "
                             f"got {name!r}")
        return PolicyHead(_lookup(k), max_k=k or 7)

    try:
        kept = _POLICIES.setdefault(model, {})
    except TypeError:  # a model that cannot be weakly referenced: a fresh policy each call
        return make()
    if (name, k) not in kept:
        kept[(name, k)] = make()
    return kept[(name, k)]


def auto_head(model):
    """The default head: the model's policy head over prompt lookup; over the trained head
    with prompt lookup in front (`policy_head(model, "hybrid")`) instead when
    `USE_TRAINED_BY_DEFAULT` is set and a head was trained or shipped for the model's file."""
    if USE_TRAINED_BY_DEFAULT and trained_head_dir(model) is not None:
        return policy_head(model, "hybrid")
    return policy_head(model, "ngram")


# -- the rows' builders --------------------------------------------------------------------


def _auto(model, k, draft, every_draft):
    policy = auto_head(model)
    return policy, k or policy.max_k


def _auto_slot(k):
    from onebit.heads.policy import PolicyHead

    def make(clock):  # a policy of the slot's own, on its share of each pass
        return PolicyHead(_lookup(k), max_k=k or 7, clock=clock)

    return make, k or 7


def _ngram(model, k, draft, every_draft):
    if not every_draft:
        policy = policy_head(model, "ngram", k)
        return policy, k or policy.max_k
    return _lookup(k), k or 7


def _ngram_slot(k):
    return (lambda clock: _lookup(k)), k or 7


def _suffix(model, k, draft, every_draft):
    if not every_draft:
        policy = policy_head(model, "suffix", k)
        return policy, k or policy.max_k
    head = _suffix_head(k)
    return head, head.k


def _suffix_learn(tokens) -> None:
    suffix_cache().add(tokens)


def _suffix_slot(k):
    from onebit.heads.suffix import SUFFIX_K

    return (lambda clock: _suffix_head(k)), k or SUFFIX_K


def _trained(model, k, draft, every_draft):
    if not every_draft:
        policy = policy_head(model, "trained", k)
        return policy, k or policy.max_k
    head = _trained_or_error(model, k)
    return head, k or head.k


def _mtp(model, k, draft, every_draft):
    from onebit.heads import load_mtp, load_own_mtp

    if draft is None:
        source = getattr(model, "source", None)
        if source is None:
            from onebit.heads.errors import DraftError

            raise DraftError("--head mtp needs --draft DIR (the draft's weights), or a "
                             "checkpoint that carries its own MTP layers")
        return load_own_mtp(source, model), k or 7
    return load_mtp(draft, model), k or 7


def _dflash(model, k, draft, every_draft):
    from onebit.heads import load_dflash

    if draft is None:
        from onebit.heads.errors import DraftError

        raise DraftError("--head dflash needs --draft DIR (the draft's weights)")
    head = load_dflash(draft, model)
    return head, k or head.block_size - 1


HEADS: dict[str, HeadSpec] = {spec.name: spec for spec in (
    HeadSpec("none", "plain decode: no drafts", None),
    HeadSpec("auto", "prompt lookup under the cost policy (the default): drafts only where "
             "they pay; a seeded sampled request decodes plainly", _auto, _auto_slot,
             drafts_seeded=False),
    HeadSpec("ngram", "prompt lookup: drafts what followed the last three tokens earlier in "
             "the text", _ngram, _ngram_slot),
    HeadSpec("suffix", "suffix decoding: drafts what most often followed the text's longest "
             "repeated tail, in this request and in recent answers; a seeded sampled request "
             "decodes plainly (the answers it drafts from change)", _suffix, _suffix_slot,
             drafts_seeded=False, learn=_suffix_learn),
    HeadSpec("trained", "the head `onebit train-head` made for the model's file (or shipped "
             "for it)", _trained),
    HeadSpec("mtp", "multi-token prediction layers (--draft DIR, or the checkpoint's own)",
             _mtp),
    HeadSpec("dflash", "a DFlash block-diffusion drafter (--draft DIR)", _dflash),
)}
HEAD_NAMES: tuple[str, ...] = tuple(HEADS)
BATCHED_HEAD_NAMES: tuple[str, ...] = tuple(n for n, s in HEADS.items() if s.batchable)


def spec(name: str) -> HeadSpec:
    if name not in HEADS:
        raise ValueError(f"head must be one of {', '.join(HEAD_NAMES)}, got {name!r}")
    return HEADS[name]


def learn(name, tokens) -> None:
    """A finished answer's committed tokens, kept by head `name` for the requests after it
    (suffix decoding's cache of recent answers); nothing for a head that keeps nothing, or a
    head object. `onebit.generate` and the server call it once per finished answer, never
    with a cancelled one's part or a draft that was not committed."""
    row = HEADS.get(name) if isinstance(name, str) else None
    if row is not None and row.learn is not None and len(tokens):
        row.learn([int(t) for t in tokens])


def decodes_plain(name: str, *, speculative: bool = True, seeded: bool = False) -> bool:
    """Whether a request decodes with no head: the head is "none", the request said
    `speculative: false`, or it samples with a seed and its head does not draft seeded
    requests (`auto`: its draft lengths follow its clock, a sampled answer's draws follow
    them, and a seed promises the same answer every time)."""
    row = spec(name)
    return not speculative or row.build is None or (seeded and not row.drafts_seeded)


def resolve(name, model, *, k: int | None = None, draft=None, every_draft: bool = False,
            speculative: bool = True, seeded: bool = False):
    """(head, k) for one sequence: `name` a row of HEADS (or a head object, used as it is),
    (None, k or 1) where the request decodes plainly (`decodes_plain`). One-pass named heads
    run under the cost policy unless `every_draft`."""
    if name is None:
        return None, k or 1
    if not isinstance(name, str):  # a head object: as it is
        block = getattr(name, "block_size", None)
        return name, k or (block - 1 if block else 7)
    if decodes_plain(name, speculative=speculative, seeded=seeded):
        return None, k or 1
    return spec(name).build(model, k, draft, every_draft)


def batched(name: str, *, k: int | None = None, speculative: bool = True,
            seeded: bool = False):
    """(factory, k) for a slot of the batch engine: `factory(clock)` makes the sequence's
    fresh head (`BatchRequest.head`), or (None, 0) where the request decodes plainly. A
    ValueError for a head that cannot be batched."""
    row = spec(name)
    if not row.batchable:
        raise ValueError(f"--head {name} cannot be served in parallel yet (it reads the base's "
                         f"layer taps or hidden rows); parallel serving runs "
                         f"{', '.join(BATCHED_HEAD_NAMES)}")
    if decodes_plain(name, speculative=speculative, seeded=seeded):
        return None, 0
    return row.slot(k)
