"""What a sampled loop is run on: `SamplingScenario` (round kind, sampling head, k, the
sampling knobs, vocabulary, budget) and the grids S1..S4 run over."""

from __future__ import annotations

from dataclasses import dataclass

from onebit.sampling import Sampling
from pytest_onebit.doubles.sampling_heads import KINDS, MemoToyBase, ToySamplingHead
from pytest_onebit.doubles.toy import ToyBase

SAMPLINGS = (
    Sampling(1.0),
    Sampling(0.7, top_k=2),
    Sampling(1.5, top_p=0.8),
    Sampling(1.2, top_k=2, top_p=0.9),
)
ATOL = 1e-12


@dataclass(frozen=True)
class SamplingScenario:
    """One sampled run: every knob that changes what the loop must do."""

    flavour: str = "one-pass"
    head: str = "mixed"  # a kind of pytest_onebit.doubles.sampling_heads
    k: int = 2
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    vocab_size: int = 3
    max_tokens: int = 3
    prompt: tuple[int, ...] = (2, 1)
    max_batch_rows: int = 8
    seed: int = 0  # the toy's weights (and, for S2, the rng's seed)
    knobs: str | None = None  # a set of pytest_onebit.doubles.knobs.SMALL_KNOBS

    @property
    def sampling(self) -> Sampling:
        return Sampling(self.temperature, self.top_k, self.top_p)

    @property
    def id(self) -> str:
        parts = [self.flavour, self.head, f"k{self.k}", f"t{self.temperature:g}"]
        if self.top_k:
            parts.append(f"top{self.top_k}")
        if self.top_p < 1:
            parts.append(f"p{self.top_p:g}")
        parts += [f"v{self.vocab_size}", f"n{self.max_tokens}"]
        if self.max_batch_rows != 8:
            parts.append(f"r{self.max_batch_rows}")
        if self.seed:
            parts.append(f"s{self.seed}")
        if self.knobs:
            parts.append(f"knobs-{self.knobs}")
        return "-".join(parts)

    def make_base(self) -> ToyBase:
        toy = MemoToyBase(vocab_size=self.vocab_size, max_batch_rows=self.max_batch_rows,
                          seed=self.seed)
        if self.knobs is None:
            return toy
        from pytest_onebit.doubles.knobs import processed

        # the target is the processed toy: plain sampling and the loop both read its rows,
        # and the heads draft from the raw toy (a head may ignore the knobs)
        return processed(toy, self.knobs, len(self.prompt), small=True)

    def make_head(self, base: ToyBase) -> ToySamplingHead:
        return ToySamplingHead(base, self.head, self.flavour)


def _with(s: Sampling, **knobs) -> dict:
    return {"temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p, **knobs}


def distribution_scenarios() -> list[SamplingScenario]:
    """S1 and S4's grid, 3 tokens each: on a 3-token toy, every head kind in both round kinds
    at k = 1..4 (each with one of the samplings, in turn) and the mixed head under every
    sampling at every k; on wider vocabularies, the draft-model head under top-k 3 (5 tokens)
    and the mixed head with full softmax (4 tokens); a 2-row base (k clamped), a 5-token
    run (bonus tokens mid-run) and a 4-token run with k = 3 (a round of 3 drafts)."""
    out: dict[str, SamplingScenario] = {}

    def add(s: Sampling, **knobs) -> None:
        scenario = SamplingScenario(**_with(s, **knobs))
        out[scenario.id] = scenario

    for flavour in ("one-pass", "two-pass"):
        for i, kind in enumerate(KINDS):
            for k in (1, 2, 3, 4):
                add(SAMPLINGS[(i + k) % len(SAMPLINGS)], flavour=flavour, head=kind, k=k)
        for k in (1, 2, 3, 4):
            for s in SAMPLINGS:
                add(s, flavour=flavour, head="mixed", k=k)
        add(Sampling(1.0, top_k=3), flavour=flavour, head="model", k=2, vocab_size=5)
        add(SAMPLINGS[0], flavour=flavour, head="mixed", k=2, vocab_size=4)
        add(SAMPLINGS[3], flavour=flavour, head="mixed", k=4, max_batch_rows=2)
        add(SAMPLINGS[1], flavour=flavour, head="argmax", k=2, max_tokens=5, seed=3)
        # 4 tokens: room for 3 drafts in a round (3 tokens leave 2 at most after t1)
        add(SAMPLINGS[1], flavour=flavour, head="mixed", k=3, max_tokens=4)
    return list(out.values())


def knob_sampling_scenarios() -> list[SamplingScenario]:
    """S1..S4 on a toy processed by a knob set (penalties; a bias with min_tokens): the target
    is the processed toy, the heads draft from the raw one. Both round kinds, the mixed head at
    k = 2 and the draft-model head at k = 3, four tokens each. Where llguidance is installed, a
    grammar too (GRAMMARS["grammar-small"]): the target is the masked toy."""
    from pytest_onebit.doubles.knobs import has_grammars

    names = ("penalties", "bias-min") + (("grammar-small",) if has_grammars() else ())
    return [SamplingScenario(**_with(s, flavour=flavour, head=head, k=k, max_tokens=4,
                                     knobs=name))
            for flavour in ("one-pass", "two-pass") for name in names
            for s, head, k in ((SAMPLINGS[0], "mixed", 2), (SAMPLINGS[2], "model", 3))]


def seeded_scenarios() -> list[SamplingScenario]:
    """S2 and S3's grid: a 64-token vocabulary and 24 tokens, three heads, k = 1 and 4."""
    return [SamplingScenario(flavour, kind, k, 0.8, 8, 0.95, vocab_size=64, max_tokens=24,
                             prompt=(3, 1, 4, 1, 5), seed=seed)
            for flavour in ("one-pass", "two-pass") for kind in ("mixed", "model", "argmax")
            for k in (1, 4) for seed in (0, 11)]
