"""The contract core (`core`: Check, Contract, CaseCache), what a run finds (`report`: Report,
Finding, ContractFailure), the one test-class factory (`suite`, imports pytest), and the helpers
every contract shares: `assertions` and the Hypothesis `profiles`."""

from pytest_onebit.contract.core import CaseCache, Check, Contract
from pytest_onebit.contract.report import (
    FAILED,
    NOT_APPLICABLE,
    PASSED,
    XFAIL,
    XPASS,
    ContractFailure,
    Finding,
    Report,
)

__all__ = ["FAILED", "NOT_APPLICABLE", "PASSED", "XFAIL", "XPASS", "CaseCache", "Check",
           "Contract", "ContractFailure", "Finding", "Report"]
