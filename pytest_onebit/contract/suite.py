"""The one test-class factory: any `Contract` as a pytest class to subclass.

`contract_suite(contract, ...)` makes a class with one test method per check, named after it
(`I7-pass-law` -> `test_I7_pass_law`: the mutant runner reads the check back from that shape).
The plugin's `pytest_generate_tests` parametrises each method over the scenarios its check
applies to (from the class attribute `grid_attr`, so a subclass can change the grid); a
contract judged on one case (the base's) is not parametrised. The checks a subclass declares
in `expected_failed_checks` are lax xfails with their reasons (each passing test is reported
as XPASS); an unknown name is an error when the subclass is defined. A target the contract
does not apply to (a loop that cannot sample) skips every test with the reason.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import pytest

from pytest_onebit.contract.core import Check, Contract, NotApplicable


def check_test_name(check_name: str) -> str:
    """`I7-pass-law` -> `test_I7_pass_law`."""
    return "test_" + check_name.replace("-", "_")


def _make_test(contract: Contract, check: Check):
    def test(self, onebit_case) -> None:
        __tracebackhide__ = True
        try:
            contract.verify(check, onebit_case)
        except NotApplicable as why:  # the target lacks what this check judges
            pytest.skip(f"{check.name} is not applicable: {why}")

    test.__name__ = test.__qualname__ = check_test_name(check.name)
    test.__doc__ = check.doc
    test.onebit_contract = contract  # read by the plugin's pytest_generate_tests
    test.onebit_check = check.name
    return pytest.mark.onebit_check(check.name)(test)


def _signature(*names: str) -> inspect.Signature:
    return inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                              for n in names])


def contract_suite(contract: Contract, *, name: str, doc: str, target: str, default: str,
                   grid_attr: str, grid: object, parametrised: bool = True) -> type:
    """A class holding `contract`'s checks as tests.

    `target` names the class fixture that gives the thing judged (a subclass overrides it to
    bind another), `default` the session fixture it returns by default; `grid_attr` is the
    class attribute holding the scenarios (`grid` its default; None: each check's own grid),
    or, when not `parametrised`, the one scenario every test reads."""

    def target_fixture(self, **fixtures):
        return fixtures[default]

    target_fixture.__name__ = target
    target_fixture.__doc__ = f"The {contract.name} contract's target; override to bind another."
    # pytest reads a fixture's arguments from its signature: name the fixtures statically, so
    # a parametrised override of the target (one base per configuration) parametrises the tests
    target_fixture.__signature__ = _signature("self", default)

    def onebit_case(self, request: pytest.FixtureRequest, onebit_traces, **fixtures):
        """The case this test's check reads, made once per session and shared."""
        check_name = request.function.onebit_check
        reason = self.expected_failed_checks.get(check_name)
        if reason:
            # Lax: a declared check may fail on some scenarios only (a capped k passes I7 at
            # small k); each passing test is an XPASS, each failing one an xfail.
            request.node.add_marker(pytest.mark.xfail(reason=reason, strict=False))
        judged = fixtures[target]
        why_not = onebit_traces.not_applicable(contract, judged)
        if why_not is not None:
            pytest.skip(f"{check_name} is not applicable: {why_not}")
        scenario = request.param if parametrised else getattr(self, grid_attr)
        return onebit_traces.case(contract, judged, scenario)

    onebit_case.__signature__ = _signature("self", "request", "onebit_traces", target)

    def __init_subclass__(cls, **kwargs) -> None:
        super(suite, cls).__init_subclass__(**kwargs)
        try:
            contract.expected(cls.expected_failed_checks)
        except ValueError as error:
            raise ValueError(f"{cls.__name__}: {error}") from None

    namespace = {
        "__doc__": doc,
        "__module__": __name__,
        "onebit_contract": contract,
        "onebit_grid_attr": grid_attr if parametrised else None,
        grid_attr: grid,
        #: check name -> why it is expected to fail (see the module docstring)
        "expected_failed_checks": {},
        "__init_subclass__": classmethod(__init_subclass__),
        target: pytest.fixture(target_fixture, name=target),
        "onebit_case": pytest.fixture(onebit_case, name="onebit_case"),
    }
    for check in contract.checks.values():
        namespace[check_test_name(check.name)] = _make_test(contract, check)
    suite = type(name, (), namespace)
    suite.expected_failed_checks: Mapping[str, str] = {}
    return suite
