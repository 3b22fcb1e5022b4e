"""transformers' assisted generation and prompt lookup on the history toy, judged by the
contract: text, onebit's reference, the next step, pass laws, the budget and every stop."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_onebit.peers import judge
from pytest_onebit.peers.hf_run import (
    StopAtLength,
    continue_plainly,
    counted,
    draft_exactly,
    fresh_index,
    generate,
    generate_with_cache,
)
from pytest_onebit.peers.hf_toy import half_right, text_of, toy_model, toy_tokenizer
from pytest_onebit.peers.protocol import Outcome, not_applicable

PROMPTS = ([3, 1, 4, 1, 5, 9, 2, 6], [7, 7, 2, 40, 11, 63, 0, 5, 5])
# the bigram toy's own text after [5, 6, 7, 8, 9, 5, 6]: it settles into 14, 27, 14, 27, ...;
# the cycle also opens the prompt, so the first match of the last two tokens has a long
# continuation and prompt lookup drafts k tokens from the first round on
LOOKUP_PROMPT = [14, 27, 14, 27, 14, 27, 5, 6, 7, 8, 9, 5, 6, 10, 16, 59, 5, 56, 17, 60, 29,
                 38, 14, 27]
KS = (1, 3, 4)
NEVER = 62  # an EOS id the bigram toy's text never reaches
TOKENS = 20  # new tokens per run
MORE = 6  # tokens continued plainly after a run (I2-next-step)
LAW = {"perfect": "I7-pass-law", "garbage": "I8-pass-law-garbage", "half": "I7-pass-law-half"}


def reference(prompt: list[int], n: int) -> list[int]:
    """onebit's own greedy on the toy the transformers model wraps."""
    from onebit.reference import greedy
    from pytest_onebit.doubles.toy import ToyBase

    return list(greedy(ToyBase(vocab_size=64, hidden=16, seed=0), prompt, max_tokens=n).tokens)


@dataclass
class ToyArm:
    """The toy target with an assistant model (perfect, garbage, half) or with prompt lookup
    (`flavour="lookup"`), at k in KS."""

    flavour: str
    name: str = ""
    note: str = ""
    target: object = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.name = self.name or f"toy-{self.flavour}"
        self.note = self.note or (
            "prompt lookup (prompt_lookup_num_tokens=k) on the bigram toy (its text repeats; "
            "it reads only the last token, so a cache crop is the other arms' to catch)"
            if self.flavour == "lookup" else
            f"history toy target, {self.flavour} toy assistant, k in {KS}, constant schedule")
        # prompt lookup's drafts never match the history toy (its text never repeats): the
        # lookup arm runs the bigram toy, whose text does, so its drafts are accepted
        self.target = toy_model("bigram" if self.flavour == "lookup" else "target")
        if self.flavour == "lookup":
            # 4.57.6's prompt lookup raises without an EOS id (torch.isin on None); an id the
            # text never reaches keeps the other checks running there. I1-text also runs
            # without one (`text`), so the crash still shows.
            self.target.generation_config.eos_token_id = NEVER

    # -- running ----------------------------------------------------------------------------

    def prompts(self) -> tuple[list[int], ...]:
        return (LOOKUP_PROMPT,) if self.flavour == "lookup" else PROMPTS

    def spec(self, k: int) -> dict:
        """generate()'s keywords for this arm's speculation at k."""
        if self.flavour == "lookup":
            return {"prompt_lookup_num_tokens": k}
        return {"assistant_model": draft_exactly(toy_model(self.flavour), k)}

    def plain(self, prompt: list[int], n: int = TOKENS, **kw) -> list[int]:
        return generate(self.target, prompt, n, **kw)

    # -- the checks -------------------------------------------------------------------------

    def judge(self) -> dict[str, Outcome]:
        out = {
            "I1-text": judge.first_failure([judge.judged(lambda p=p, k=k: self.text(p, k))
                                         for p in self.prompts() for k in KS]),
            "I1-reference": (judge.first_failure([judge.judged(lambda p=p: self.matches_onebit(p))
                                               for p in self.prompts()])
                             if self.flavour != "lookup" else
                             not_applicable("the bigram toy is not onebit's toy base")),
            "I2-next-step": judge.first_failure([judge.judged(lambda p=p: self.next_step(p))
                                              for p in self.prompts()]),
            "I9-budget": judge.first_failure([judge.judged(lambda n=n: self.budget(n))
                                           for n in (1, 2, 3, 5)]),
            "I10-eos": judge.judged(self.eos),
            "I10-stop-string": judge.judged(self.stop_string),
            "I10-stopping-criteria": judge.judged(self.stopping_criteria),
        }
        if self.flavour in LAW:
            out[LAW[self.flavour]] = judge.first_failure(
                [judge.judged(lambda p=p, k=k: self.law(p, k))
                 for p in self.prompts() for k in KS])
        return out

    def text(self, prompt: list[int], k: int) -> None:
        judge.assert_text(self.plain(prompt, **self.spec(k)), self.plain(prompt),
                          where=f"k={k}, prompt {prompt}")
        if self.flavour == "lookup":  # and with no EOS id at all
            config = self.target.generation_config
            config.eos_token_id = None
            try:
                judge.assert_text(self.plain(prompt, **self.spec(k)), self.plain(prompt),
                                  where=f"k={k}, no eos_token_id")
            finally:
                config.eos_token_id = NEVER

    def matches_onebit(self, prompt: list[int]) -> None:
        want = reference(prompt, TOKENS)
        judge.assert_text(self.plain(prompt), want, where="plain greedy",
                          names=("plain greedy", "onebit greedy"))
        judge.assert_text(self.plain(prompt, **self.spec(4)), want, where="k=4",
                          names=("assisted", "onebit greedy"))

    def next_step(self, prompt: list[int]) -> None:
        tokens, cache = generate_with_cache(self.target, prompt, TOKENS, **self.spec(4))
        more = continue_plainly(self.target, prompt + tokens, cache, MORE)
        judge.assert_text(tokens + more, self.plain(prompt, TOKENS + MORE),
                          where=f"k=4, {TOKENS} assisted then {MORE} plain from its cache",
                          names=("run + next", "plain greedy"))

    def law(self, prompt: list[int], k: int) -> None:
        with counted(self.target) as widths:
            tokens = self.plain(prompt, **self.spec(k))
        where = f"k={k}, prompt {prompt}"
        if self.flavour == "half":
            judge.assert_law_predicted(widths, emitted=len(tokens), k=k, right=half_right,
                                       start=len(prompt), where=where)
        else:
            judge.assert_law(widths, prompt_len=len(prompt), emitted=len(tokens), k=k,
                             head=self.flavour, where=where)

    def budget(self, n: int) -> None:
        prompt = self.prompts()[0]
        tokens = self.plain(prompt, n, **self.spec(4))
        judge.assert_budget(len(tokens), n, exact=True, where=f"k=4, prompt {prompt}")
        judge.assert_text(tokens, self.plain(prompt, n), where=f"max_new_tokens={n}")

    @property
    def stop_from(self) -> int:
        """Where a stop goes: inside the second accepted block of a k=4 run (index 7: the
        block holds new tokens 5..9); the bigram toy's text repeats from its start, so there
        the first block (index 1)."""
        return 1 if self.flavour == "lookup" else 7

    def _stop_index(self, prompt: list[int], plain: list[int]) -> int:
        """The first new token from `stop_from` on that occurs nowhere before it."""
        return fresh_index(plain, self.stop_from)

    def eos(self) -> str:
        prompt = self.prompts()[0]
        plain = self.plain(prompt)
        j = self._stop_index(prompt, plain)
        eos = plain[j]
        kw = {"eos_token_id": eos, "pad_token_id": 63 if eos != 63 else 62}
        judge.assert_stopped_at(self.plain(prompt, **kw), plain, j, what="plain greedy's EOS",
                                where="plain greedy")
        judge.assert_stopped_at(self.plain(prompt, **{**self.spec(4), **kw}), plain, j,
                                what=f"EOS {eos}", where="k=4")
        return f"EOS at new token {j}"

    def stop_string(self) -> str:
        prompt = self.prompts()[0]
        plain = self.plain(prompt)
        text = text_of(plain)
        j = next(j for j in range(self.stop_from, len(plain))
                 if text.find(text[j - 1: j + 1]) == j - 1)
        stop = text[j - 1: j + 1]
        kw = {"stop_strings": [stop], "tokenizer": toy_tokenizer()}
        judge.assert_stopped_at(self.plain(prompt, **kw), plain, j, what=f"stop {stop!r}",
                                where="plain greedy")
        judge.assert_stopped_at(self.plain(prompt, **kw, **self.spec(4)), plain, j,
                                what=f"stop string {stop!r}", where="k=4")
        return f"stop string {stop!r} at new token {j}"

    def stopping_criteria(self) -> str:
        prompt = self.prompts()[0]
        plain = self.plain(prompt)
        j = self.stop_from
        stop = StopAtLength(len(prompt) + j + 1)
        from transformers import StoppingCriteriaList

        judge.assert_stopped_at(self.plain(prompt, stopping_criteria=StoppingCriteriaList([stop])),
                                plain, j, what="the criterion", where="plain greedy")
        judge.assert_stopped_at(
            self.plain(prompt, stopping_criteria=StoppingCriteriaList([stop]), **self.spec(4)),
            plain, j, what="a stopping criterion", where="k=4")
        return f"criterion fires at new token {j}"
