"""pytest_onebit: the harness that proves a speculative decoding loop is exact.

Installing onebit registers the pytest plugin (`pytest_onebit.plugin`). What a test imports:
the assertions, the toy base, the oracle heads, the conformance checks and the suite class.
Every name is imported on first use, so loading the plugin costs nothing, and the contract
(`check_loop`, `onebit prove`) runs without pytest installed.
"""

from __future__ import annotations

import importlib
import sys

#: Public name -> the module that defines it.
_EXPORTS = {
    **dict.fromkeys(
        ("assert_logits_match", "assert_pass_law", "assert_plain_decode_equivalent",
         "assert_rows_in_order", "assert_tokens_equal", "describe_divergence", "pass_law",
         "relative_l1"), "pytest_onebit.assertions"),
    **dict.fromkeys(("CHECKS", "Check", "run_check"), "pytest_onebit.checks"),
    **dict.fromkeys(("ContractReport", "Finding", "LoopContractError", "check_loop",
                     "check_trace"), "pytest_onebit.conformance"),
    **dict.fromkeys(("Scenario", "standard_scenarios", "arm_scenarios"),
                    "pytest_onebit.scenarios"),
    **dict.fromkeys(("Trace", "execute"), "pytest_onebit.trace"),
    **dict.fromkeys(("LoadError", "load_object", "load_loop"), "pytest_onebit.loader"),
    **dict.fromkeys(("Oracle", "OracleHead", "garbage_head", "half_head", "over_head",
                     "pattern_head", "perfect_head", "short_head", "silent_head"),
                    "pytest_onebit.heads"),
    **dict.fromkeys(("BASE_CHECKS", "BaseCheck", "BaseSettings"), "pytest_onebit.base_checks"),
    **dict.fromkeys(("BaseModelContractError", "BaseReport", "check_base"),
                    "pytest_onebit.base_runner"),
    "BaseContract": "pytest_onebit.base_suite",
    "LoopContract": "pytest_onebit.suite",
    "ToyBase": "pytest_onebit.toy",
}

__all__ = sorted(_EXPORTS)

# Under pytest: rewrite asserts in the helpers so they read well.
if sys.modules.get("pytest") is not None:
    sys.modules["pytest"].register_assert_rewrite(
        "pytest_onebit.assertions", "pytest_onebit.checks", "pytest_onebit.trace",
        "pytest_onebit.base_checks")


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_onebit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
