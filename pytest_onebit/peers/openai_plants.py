"""Planted faults for the served peer: `Engine`s whose loop or text handling is wrong in one
known way, so `onebit peer openai` can be shown to catch each (tests/peers/test_openai_peer.py).

A loop fault is a copy of `onebit/loop.py` with one line edited, loaded as a module of its own
(the loop imports absolutely so that copies run stand-alone, as the mutant catalogue's do);
a text or score fault is a subclass of the engine's own part. Nothing here is reachable from
`onebit serve`: a planted server exists only where a test builds one.
"""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np

import onebit.loop
from onebit.serve.engine import Engine
from onebit.serve.scores import ScoredBase
from onebit.serve.stops import StopText


def loop_copy(name: str, old: str, new: str):
    """`run` of a copy of onebit/loop.py with every `old` replaced by `new` (which must
    occur: a plant that edits nothing would prove nothing)."""
    source = Path(onebit.loop.__file__).read_text(encoding="utf-8")
    if old not in source:
        raise ValueError(f"plant {name}: {old!r} is not in onebit/loop.py any more")
    module = types.ModuleType(f"onebit_planted_loop_{name.replace('-', '_')}")
    module.__file__ = f"<planted {name}>"
    exec(compile(source.replace(old, new), module.__file__, "exec"), module.__dict__)
    return module.run


class _TextPastStop(StopText):
    """Keeps taking text after a stop completed (the guard against more is gone)."""

    def push(self, piece: str) -> str:
        if self.hit is not None:
            self._text += piece
            return self._release(len(self._text))
        return super().push(piece)


class StopInBlockEngine(Engine):
    """(a) A stop string that completes inside an accepted block is honoured only at the
    block's end, as transformers' assisted decoding does (#48039): the loop emits the rest of
    the block after the consumer said stop, and the engine keeps its text."""

    stop_text = _TextPastStop

    def __init__(self, model, **options) -> None:
        run = loop_copy("stop-in-block", "                if not self.emit(token):\n"
                        "                    break\n", "                self.emit(token)\n")
        super().__init__(model, run=run, **options)

    def takes_more(self, finish: str) -> bool:
        return True


class _Uncut(StopText):
    """Finds the stop but does not cut there: the stop and the rest of its token go out."""

    def _cut(self, at: int) -> str:
        return self._release(len(self._text))


class StopUncutEngine(Engine):
    """(a') The stop string found but the text not cut at its first character."""

    stop_text = _Uncut


class BudgetEngine(Engine):
    """(b) A round's drafts are not cut at the budget: an accepted block overshoots
    max_tokens (#46993's shape)."""

    def __init__(self, model, **options) -> None:
        run = loop_copy("budget", "room = min(self.k, max_rows - 1, self.budget_left() - 1)",
                        "room = min(self.k, max_rows - 1)")
        super().__init__(model, run=run, **options)


class _ShiftedScores(ScoredBase):
    """Each verify row recorded for the position after the one it scores: right for a plain
    step and the prefill's last row, wrong for every token a verify under speculation chose."""

    def verify(self, tokens, pos):
        rows = super().verify(tokens, pos)
        held = self._pending[2]
        self._pending = (*self._pending[:2], np.vstack([held[1:], held[-1:]]),
                         self._pending[3])
        return rows


class LogprobsEngine(Engine):
    """(c) Log-probabilities read from the wrong verify row under speculation."""

    scored = _ShiftedScores


class AcceptOneMoreEngine(Engine):
    """(d) One draft past the first mismatch accepted: greedy text changes under
    speculation wherever a draft is rejected."""

    def __init__(self, model, **options) -> None:
        run = loop_copy("accept-one-more", "count = self.emit_and_commit(batch[: take + 1])",
                        "count = self.emit_and_commit(batch[: take + 2])")
        super().__init__(model, run=run, **options)


class RatioInvertedEngine(Engine):
    """(f) A draft accepted with probability min(1, q(d) / p(d)), the ratio upside down:
    under prompt lookup's one-hot q every draft is accepted, so the drafted token takes all of
    the mass plain sampling spreads over the others."""

    def __init__(self, model, **options) -> None:
        run = loop_copy("ratio-inverted", "if rng.accept(min(1.0, p[draft] / q[draft])):",
                        "if rng.accept(min(1.0, q[draft] / max(p[draft], 1e-300))):")
        super().__init__(model, run=run, **options)


class _SwappedRows:
    """A batched base whose pass hands the first two slots each other's last logits row when
    both are in it: alone every answer is right, together two are wrong."""

    def __init__(self, rows) -> None:
        self._rows = rows

    def __getattr__(self, name: str):
        return getattr(self._rows, name)

    def rows(self, tokens, positions, slots, last_of):
        logits, hidden = self._rows.rows(tokens, positions, slots, last_of)
        ends = {}
        for i, slot in enumerate(slots):
            ends[slot] = i
        if len(ends) > 1:
            a, b = list(ends.values())[:2]
            logits[[a, b]] = logits[[b, a]]
        return logits, hidden


class BatchSwapEngine(Engine):
    """(g) Served in parallel, a pass gives two sequences each other's scores: every answer
    alone is right, answers served together are not."""

    def __init__(self, model, **options) -> None:
        super().__init__(model, parallel=options.pop("parallel", 4), **options)
        self.batch.rows = _SwappedRows(self.batch.rows)


def _knobs_on_steps_only():
    from onebit.processors import ProcessedBase

    class StepsOnly(ProcessedBase):
        """The knobs on steps only: a verify's rows come back raw (vLLM #18902's shape)."""

        def verify(self, tokens, pos):
            rows = self._base.verify(tokens, pos)
            self._pending = ([int(t) for t in tokens], pos)
            return rows

    return StepsOnly


class KnobsOnStepsEngine(Engine):
    """(h) The knobs applied to plain steps but not to verify rows: with speculation on, an
    accepted draft is judged against the raw scores and the knob does nothing there."""

    processed = _knobs_on_steps_only()


#: plant name -> (the engine class, the check that must catch it)
PLANTS = {"stop-in-block": (StopInBlockEngine, "I10-stop-string"),
          # the same fault met by an end-of-turn token drafted inside a block
          "eos-in-block": (StopInBlockEngine, "I10-eos"),
          "stop-uncut": (StopUncutEngine, "I10-stop-string"),
          "budget": (BudgetEngine, "I9-budget"),
          "logprobs": (LogprobsEngine, "L1-logprobs"),
          "accept-one-more": (AcceptOneMoreEngine, "I1-text"),
          "batch-swap": (BatchSwapEngine, "C2-concurrent-scale"),
          "knobs-on-steps": (KnobsOnStepsEngine, "N4-knobs"),
          # sampled: caught by S1 only with --sampled (tests/peers/test_openai_peer.py)
          "ratio-inverted": (RatioInvertedEngine, "S1-distribution")}
