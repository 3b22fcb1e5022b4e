"""pytest_onebit: the harness that proves a speculative decoding loop is exact.

Installing onebit registers the pytest plugin (`pytest_onebit.plugin`). What a test imports:
the assertions, the toy base, the oracle heads, the conformance checks and the suite class.
"""

import pytest

# Rewrite asserts in the helpers so their own failures read well too.
pytest.register_assert_rewrite("pytest_onebit.assertions", "pytest_onebit.contract",
                               "pytest_onebit.base_checks")

from pytest_onebit.assertions import (  # noqa: E402
    assert_logits_match,
    assert_pass_law,
    assert_plain_decode_equivalent,
    assert_rows_in_order,
    assert_tokens_equal,
    describe_divergence,
    pass_law,
    relative_l1,
)
from pytest_onebit.base_checks import BASE_CHECKS, BaseSettings  # noqa: E402
from pytest_onebit.base_runner import BaseModelContractError, BaseReport, check_base  # noqa: E402
from pytest_onebit.base_suite import BaseContract  # noqa: E402
from pytest_onebit.contract import (  # noqa: E402
    CHECKS,
    ContractReport,
    LoopContractError,
    Scenario,
    check_loop,
    check_trace,
    execute,
    standard_scenarios,
)
from pytest_onebit.heads import (  # noqa: E402
    Oracle,
    OracleHead,
    garbage_head,
    half_head,
    over_head,
    pattern_head,
    perfect_head,
    short_head,
    silent_head,
)
from pytest_onebit.suite import LoopContract  # noqa: E402
from pytest_onebit.toy import ToyBase  # noqa: E402

__all__ = [
    "BASE_CHECKS",
    "BaseContract",
    "BaseModelContractError",
    "BaseReport",
    "BaseSettings",
    "check_base",
    "CHECKS",
    "ContractReport",
    "LoopContract",
    "LoopContractError",
    "Oracle",
    "OracleHead",
    "Scenario",
    "ToyBase",
    "assert_logits_match",
    "assert_pass_law",
    "assert_plain_decode_equivalent",
    "assert_rows_in_order",
    "assert_tokens_equal",
    "check_loop",
    "check_trace",
    "describe_divergence",
    "execute",
    "garbage_head",
    "half_head",
    "pass_law",
    "over_head",
    "pattern_head",
    "perfect_head",
    "short_head",
    "silent_head",
    "relative_l1",
    "standard_scenarios",
]
