"""The contract core (`core`), the one test-class factory (`suite`, imports pytest), and the
helpers every contract shares: `assertions` and the Hypothesis `profiles`."""

from pytest_onebit.contract.core import (
    FAILED,
    NOT_APPLICABLE,
    PASSED,
    XFAIL,
    XPASS,
    CaseCache,
    Check,
    Contract,
    ContractFailure,
    Finding,
    Report,
)

__all__ = ["FAILED", "NOT_APPLICABLE", "PASSED", "XFAIL", "XPASS", "CaseCache", "Check",
           "Contract", "ContractFailure", "Finding", "Report"]
