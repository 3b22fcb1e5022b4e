"""The transformers variant: assisted generation, prompt lookup and speculative sampling on
the history toy, and tiny real architectures (pytest_onebit.peers.hf_*)."""

from __future__ import annotations

import importlib.util

from pytest_onebit.peers.judge import CHECKS


def importable(module: str) -> bool:
    """Whether `module` can be imported (a module blocked in sys.modules counts as absent)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # sys.modules[module] is None: blocked
        return False


class TransformersPeer:
    name = "transformers"
    checks = (*CHECKS, "N4-knobs")
    check_docs = {"N4-knobs": "each knob as a logits processor (repetition_penalty, "
                              "sequence_bias, min_new_tokens, OpenAI's penalties in "
                              "LogitsProcessorList): assisted and prompt-lookup greedy equal "
                              "plain greedy with the same knob"}

    def __init__(self, delta: float | None = None, arms: tuple[str, ...] | None = None) -> None:
        self.delta = delta
        self.only = arms

    def unavailable(self) -> str | None:
        for module in ("torch", "transformers", "tokenizers"):
            if not importable(module):
                return f"{module} not installed (the peer extra)"
        return None

    def version(self) -> str:
        import transformers

        return transformers.__version__

    def arm_names(self) -> tuple[str, ...]:
        from pytest_onebit.peers.hf_real import ARCHES

        return ("toy-perfect", "toy-garbage", "toy-half", "toy-lookup", "toy-sampled",
                "toy-sampled-plain", "toy-sampled-sharp", "toy-sampled-sharp-plain", *ARCHES)

    def arms(self) -> list:
        from pytest_onebit.peers.hf_real import ARCHES, RealArm
        from pytest_onebit.peers.hf_run import quiet
        from pytest_onebit.peers.hf_sampled import SampledArm
        from pytest_onebit.peers.hf_toy_arms import ToyArm

        quiet()
        names = self.only or self.arm_names()
        unknown = [n for n in names if n not in self.arm_names()]
        if unknown:
            raise ValueError(f"unknown transformers arm(s) {unknown}; known: "
                             f"{list(self.arm_names())}")
        delta = self.delta  # None: each sampled arm's own (hf_sampled.DELTA)
        makers = {f"toy-{f}": (lambda f=f: ToyArm(f))
                  for f in ("perfect", "garbage", "half", "lookup")}
        for plain in (False, True):
            tail = "-plain" if plain else ""
            makers[f"toy-sampled{tail}"] = lambda p=plain: SampledArm(p, delta, "garbage")
            makers[f"toy-sampled-sharp{tail}"] = lambda p=plain: SampledArm(p, delta, "swapped")
        makers.update({a: (lambda a=a: RealArm(a)) for a in ARCHES})
        return [LazyArm(name, makers[name]) for name in names]


class LazyArm:
    """An arm built when it is judged, so a peer that raises while building one (a model
    class the installed release lacks) fails that arm's I1 (nothing ran), not the table."""

    def __init__(self, name: str, make) -> None:
        self.name = name
        self.note = ""
        self._make = make

    def judge(self):
        from pytest_onebit.peers.protocol import failed

        try:
            arm = self._make()
        except Exception as error:  # the installed peer cannot even build the arm
            message = f"building the arm raised {type(error).__name__}: {error}"
            return {"I1-text": failed(" ".join(message.split())[:300])}
        self.note = arm.note
        return arm.judge()
