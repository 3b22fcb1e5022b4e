"""`check_base(factory)`: hold a base model to checks B1..B8 in one call.

    from pytest_onebit import check_base

    check_base(lambda: load_model("DIR"))            # raises BaseModelContractError if broken
    report = check_base(make_npu_base, raise_on_failure=False)
    print(report.to_text())

The factory takes no arguments and returns a fresh base each call (the checks make a few: the
stepped truth, the base under test, a second one for B6). The error is not
`onebit.BaseContractError`, which the loop raises mid-run when a base returns something
unusable; this one says a base failed the conformance checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_onebit.base.checks import BASE, BaseFactory, BaseSettings
from pytest_onebit.contract.report import ContractFailure, Report

__all__ = ["BaseModelContractError", "check_base", "resolve_checks"]

#: The error `check_base` raises: the core's one error type, under the base contract's name.
BaseModelContractError = ContractFailure


def check_base(
    factory: BaseFactory,
    *,
    checks: Iterable[str] | None = None,
    settings: BaseSettings | None = None,
    expected_failed_checks: Mapping[str, str] | None = None,
    raise_on_failure: bool = True,
) -> Report:
    """Hold the bases `factory()` makes to every check (or those named, by name or id: "B2" or
    "B2-commit-exact"). Raises `BaseModelContractError` naming the failed checks unless
    `raise_on_failure` is False; either way returns the report (`report.to_text()` is a
    table of checks, seconds and verdicts)."""
    if not callable(factory):
        raise TypeError(f"a base factory must be callable with no arguments, got {factory!r}")
    return BASE.run(factory, checks=checks, scenarios=[settings or BaseSettings()],
                    expected_failed_checks=expected_failed_checks,
                    raise_on_failure=raise_on_failure)


def resolve_checks(checks: Iterable[str] | None) -> list[str]:
    """Check names from names or ids; ValueError naming what is unknown."""
    return BASE.resolve(checks)
