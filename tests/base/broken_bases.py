"""Deliberately broken bases: each breaks one promise of the base contract, the way real
forwards have (docs/base-contract.md). The tests hold each to the contract and expect the
named check to fail. Every factory returns a fresh strict toy base with one fault."""

from __future__ import annotations

import numpy as np

from pytest_onebit.doubles.toy import ToyBase


class LastRowHidden(ToyBase):
    """commit_verify(n) takes last_hidden() from the batch's last row, not row n-1 (the
    rollback mutant that survived the forward's own tests). Breaks B2."""

    def commit_verify(self, n: int) -> None:
        last_row = self._pending[2][-1] if self._pending is not None else None
        super().commit_verify(n)
        if n and last_row is not None:
            self._last_row = last_row


class WideVerify(ToyBase):
    """Enforces a bound one row wider than the max_batch_rows() it advertises, so a verify
    wider than max_batch_rows() runs instead of being refused. Breaks B5."""

    def max_batch_rows(self) -> int:
        return self.config.max_batch_rows - 1


class StaleAfterPartial(ToyBase):
    """A partial accept commits the tokens but keeps the pre-batch recurrent state, so the
    next step reads stale state (vLLM #39273). Breaks B2 and B3."""

    def commit_verify(self, n: int) -> None:
        before, batch = self.state, len(self._pending[0]) if self._pending else 0
        super().commit_verify(n)
        if 0 < n < batch:
            self.state = before


class BatchOrderLogits(ToyBase):
    """Scores verify batches in float32 (a cheaper batched path) while a step scores in
    float64: the rows are close to stepping's, not equal. Breaks B1."""

    def verify(self, tokens, pos):
        super().verify(tokens, pos)
        hidden = self._pending[2].astype(np.float32)
        return (hidden @ self._unembed.T.astype(np.float32)).astype(np.float64)


class ForgetfulReset(ToyBase):
    """reset() forgets the tokens but not the recurrent state. Breaks B4."""

    def reset(self) -> None:
        state = getattr(self, "state", 0)
        super().reset()
        self.state = state


class SharedState(ToyBase):
    """Keeps its recurrent state in one place shared by every instance (as a backend with one
    device buffer might): two bases driven in turn corrupt each other. Breaks B6."""

    _shared = {"state": 0}

    @property
    def state(self) -> int:
        return SharedState._shared["state"]

    @state.setter
    def state(self, value: int) -> None:
        SharedState._shared["state"] = value


class SilentCommit(ToyBase):
    """commit_verify with no batch pending does nothing instead of refusing. Breaks B5."""

    def commit_verify(self, n: int) -> None:
        if self._pending is None:
            return
        super().commit_verify(n)


class VagueRefusals(ToyBase):
    """Refuses what it must, but with a message that names nothing ("invalid call"): the
    caller cannot tell which value was wrong. Breaks B5."""

    def commit_verify(self, n: int) -> None:
        if self._pending is None:
            raise ValueError("invalid call")
        super().commit_verify(n)


class VerifyLastFirstRow(ToyBase):
    """verify_last returns the batch's first row, the one scoring position pos + 1, instead
    of its last (a row taken for the wrong position). Breaks B8."""

    def __init__(self, **config) -> None:
        super().__init__(verify_last=True, **config)

    def _verify_last(self, tokens, pos) -> np.ndarray:
        return self.verify(tokens, pos)[0].copy()


class VerifyLastLastState(ToyBase):
    """verify_last leaves every row of the batch pending with the last row's state (it only
    computed the last row), so a commit of fewer rows keeps the wrong state; its scores are
    right. Breaks B8."""

    def __init__(self, **config) -> None:
        super().__init__(verify_last=True, **config)

    def _verify_last(self, tokens, pos) -> np.ndarray:
        logits = self.verify(tokens, pos)
        kept, states, hidden = self._pending
        self._pending = (kept, [states[-1]] * len(states), hidden)
        return logits[-1].copy()


def _strict(cls, **config):
    def factory() -> ToyBase:
        return cls(strict=True, **config)

    factory.__name__ = factory.__qualname__ = cls.__name__
    factory.__doc__ = cls.__doc__
    return factory


last_row_hidden = _strict(LastRowHidden)
wide_verify = _strict(WideVerify, max_batch_rows=9)
stale_after_partial = _strict(StaleAfterPartial)
batch_order_logits = _strict(BatchOrderLogits)
forgetful_reset = _strict(ForgetfulReset)
shared_state = _strict(SharedState)
silent_commit = _strict(SilentCommit)
vague_refusals = _strict(VagueRefusals)
verify_last_first_row = _strict(VerifyLastFirstRow)
verify_last_last_state = _strict(VerifyLastLastState)

# factory -> the check that must fail on it
BROKEN = {
    "last_row_hidden": "B2-commit-exact",
    "wide_verify": "B5-refusals",
    "stale_after_partial": "B2-commit-exact",
    "batch_order_logits": "B1-verify-rows",
    "forgetful_reset": "B4-reset",
    "shared_state": "B6-determinism",
    "silent_commit": "B5-refusals",
    "vague_refusals": "B5-refusals",
    "verify_last_first_row": "B8-verify-last",
    "verify_last_last_state": "B8-verify-last",
}

