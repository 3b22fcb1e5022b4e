"""What every peer variant offers the runner, and what one check on one arm comes to.

A *peer* is another engine's own speculative decoding (transformers' assisted generation,
llama.cpp's prompt lookup). It is driven black-box: an *arm* is one way of running it (a
model, an assistant, a mode), and it judges itself by the checks that apply to it, reading
only what the engine hands back (tokens, counted target passes, a returned cache). The layout
follows pytest-xdist's schedulers: one protocol here, one module per variant, one registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# A cell ends in one of the core's statuses (xfail / xpass belong to a whole check, declared).
from pytest_onebit.contract.report import FAILED, NOT_APPLICABLE, PASSED


@dataclass(frozen=True)
class Outcome:
    """One check on one arm: passed, failed (the detail says where it first diverged), or
    not applicable (the detail says why)."""

    status: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.status not in (PASSED, FAILED, NOT_APPLICABLE):
            raise ValueError(f"Outcome status must be passed, failed or not applicable, got "
                             f"{self.status!r}")


def passed(detail: str = "") -> Outcome:
    return Outcome(PASSED, detail)


def failed(detail: str) -> Outcome:
    return Outcome(FAILED, detail)


def not_applicable(reason: str) -> Outcome:
    return Outcome(NOT_APPLICABLE, reason)


def chosen(names: tuple[str, ...] | None, known, what: str) -> tuple[str, ...]:
    """The arms or checks a user asked for (`--arm`, `--check`), each one of `known`, or all
    of `known` when `names` is None (an empty tuple asks for none); a name not known is a
    ValueError listing them."""
    for name in names or ():
        if name not in known:
            raise ValueError(f"unknown {what} {name!r}; one of {', '.join(known)}")
    return tuple(known) if names is None else tuple(names)


class Arm(Protocol):
    """One way of running a peer; `judge()` maps each check it ran to its outcome (a check it
    leaves out is not applicable to it)."""

    name: str
    note: str  # what the arm runs, and anything a reader of its outcomes must know

    def judge(self) -> dict[str, Outcome]: ...


class Peer(Protocol):
    """A speculative engine held to the contract from outside."""

    name: str
    checks: tuple[str, ...]  # the rows of its table, in order

    def unavailable(self) -> str | None:
        """Why the peer cannot run here (not installed, no model file), or None."""

    def version(self) -> str: ...

    def arms(self) -> list[Arm]: ...


PeerFactory = Callable[[], Peer]
