"""The errors a decode raises when it stops before its budget, and what they carry.

Bad arguments to `run()` / `greedy()` are plain `ValueError`s raised before the base is touched.
Once the base is touched, whatever stops the run reaches the caller as a `DecodeError`:
- `ContractError` (`BaseContractError`, `HeadContractError`): a base or head returned something
  the loop cannot use, named with the position;
- `PartError`: the base, the head or the consumer (`on_token`) raised an exception of its own
  (a RuntimeError, a MemoryError, a TypeError, ...); the original is its `__cause__`.
Every `DecodeError` carries `emitted`, the tokens emitted before the stop, which is exactly what
the base has committed after the prompt; `culprit` ("base", "head", "consumer" or "loop") and
`pos`. A KeyboardInterrupt or SystemExit is not wrapped (it keeps its meaning) but gets the
same `emitted` attribute. See docs/errors.md.
"""

from __future__ import annotations


class DecodeError(RuntimeError):
    """A decode stopped on a fault after the base was touched; nothing emitted is lost.

    `culprit` names the part at fault ("base", "head", "consumer" or "loop"), `pos` the
    position being decoded, and `emitted` the tokens the run had emitted (and committed)
    before it stopped.
    """

    def __init__(self, message: str, *, culprit: str, pos: int | None = None) -> None:
        super().__init__(message)
        self.culprit = culprit
        self.pos = pos
        self.emitted: list[int] = []


class ContractError(DecodeError):
    """A base model or draft head broke the loop's contract (docs/contract.md)."""


class BaseContractError(ContractError):
    """The base returned something the loop cannot use (wrong shape, NaN, bad row count)."""

    def __init__(self, message: str, *, pos: int | None = None) -> None:
        super().__init__(message, culprit="base", pos=pos)


class HeadContractError(ContractError):
    """The draft head proposed something the loop cannot use (a token outside the vocabulary,
    a value that is not a list of token ids)."""

    def __init__(self, message: str, *, pos: int | None = None) -> None:
        super().__init__(message, culprit="head", pos=pos)


class PartError(DecodeError):
    """The base, the head or the consumer raised an exception of its own mid-run (or the loop
    itself failed: culprit "loop"). The original exception is `__cause__`; `pos` is the
    position of the next token the run would have emitted (prompt length + emitted)."""
