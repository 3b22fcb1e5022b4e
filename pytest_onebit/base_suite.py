"""The base contract as pytest tests: subclass `BaseContract` to hold a base model to it.

    from pytest_onebit import BaseContract

    class TestMyBase(BaseContract):
        pass                       # holds the factory --onebit-base names (default: the toy)

    class TestMyForward(BaseContract):
        base_settings = BaseSettings(positions=(0, 61))   # also a batch past a cache boundary

        @pytest.fixture
        def base_factory(self):
            return make_my_base    # a function of no arguments returning a fresh base

Each check of `pytest_onebit.base_checks.BASE_CHECKS` becomes one test method named after it
(`test_B2_commit_exact`), so a failing test id names the check. Return the same factory
object every time (a module-level function) to make the stepped truth once per session.
Declare known failures with reasons in
`expected_failed_checks = {"B5-refusals": "our driver cannot refuse a wide batch yet"}`: the
test is then an xfail with that reason while it fails, and an XPASS (reported) once it passes.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pytest_onebit.base_checks import BASE_CHECKS, BaseCheck, BaseSettings, Subject


def base_test_name(check_name: str) -> str:
    """`B2-commit-exact` -> `test_B2_commit_exact`."""
    return "test_" + check_name.replace("-", "_")


def _make_test(check: BaseCheck):
    def test(self, onebit_base_subject: Subject) -> None:
        __tracebackhide__ = True
        check.run(onebit_base_subject)

    test.__name__ = test.__qualname__ = base_test_name(check.name)
    test.__doc__ = check.doc
    test.base_check = check.name  # read by the expected-failure fixture
    return test


class BaseContract:
    """Checks B1..B7 of docs/base-contract.md, one test method per named check."""

    base_settings: BaseSettings = BaseSettings()
    #: check name -> why it is expected to fail (an unknown name is an error at class creation)
    expected_failed_checks: Mapping[str, str] = {}

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        unknown = sorted(set(cls.expected_failed_checks) - set(BASE_CHECKS))
        if unknown:
            raise ValueError(f"{cls.__name__}.expected_failed_checks names unknown base "
                             f"check(s) {unknown}; known: {list(BASE_CHECKS)}")

    @pytest.fixture(autouse=True)
    def _onebit_expected_failure(self, request: pytest.FixtureRequest) -> None:
        """Mark the test of a check declared in expected_failed_checks as a (lax) xfail."""
        reason = self.expected_failed_checks.get(getattr(request.function, "base_check", ""))
        if reason:
            request.node.add_marker(pytest.mark.xfail(reason=reason, strict=False))

    @pytest.fixture
    def base_factory(self, onebit_base):
        """The factory under test; override to bind another base."""
        return onebit_base

    @pytest.fixture
    def onebit_base_subject(self, base_factory, onebit_base_subjects) -> Subject:
        key = (base_factory, self.base_settings)
        if key not in onebit_base_subjects:
            onebit_base_subjects[key] = Subject(base_factory, self.base_settings)
        return onebit_base_subjects[key]


for _check in BASE_CHECKS.values():
    setattr(BaseContract, base_test_name(_check.name), _make_test(_check))
del _check
