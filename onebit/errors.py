"""The errors the engine raises when a part breaks its contract.

Bad arguments to `run()` / `greedy()` are plain `ValueError`s raised before the base is touched.
A base or head that misbehaves while a run is under way raises a `ContractError` subclass that
names the culprit and the position; by then the base's committed state still equals what was
emitted, and the error carries those tokens so a caller loses nothing.
"""

from __future__ import annotations


class ContractError(RuntimeError):
    """A base model or draft head broke the contract of `docs/contract.md`.

    `culprit` names the part ("base" or "head"), `pos` the position being decoded, and
    `emitted` the tokens the run had emitted (and committed) before it stopped.
    """

    def __init__(self, message: str, *, culprit: str, pos: int | None = None) -> None:
        super().__init__(message)
        self.culprit = culprit
        self.pos = pos
        self.emitted: list[int] = []


class BaseContractError(ContractError):
    """The base returned something the loop cannot use (wrong shape, NaN, bad row count)."""

    def __init__(self, message: str, *, pos: int | None = None) -> None:
        super().__init__(message, culprit="base", pos=pos)


class HeadContractError(ContractError):
    """The draft head proposed something the loop cannot use (a token outside the vocabulary)."""

    def __init__(self, message: str, *, pos: int | None = None) -> None:
        super().__init__(message, culprit="head", pos=pos)
