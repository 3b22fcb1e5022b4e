"""pytest_onebit: the harness that proves a speculative decoding loop is exact.

Installing onebit registers the pytest plugin (`pytest_onebit.plugin`). What a test imports:
the assertions, the test doubles (toy base, oracle heads), the five contracts (loop I1..I13,
base B1..B8, sampling S1..S4, batch M1..M6, served V1..V8: each a `Contract` of the core,
with its `check_*` function and its pytest class), the core itself, to declare a sixth, and
the holders of compiled loops and bases (C ABI).
Every name is imported on first use, so loading the plugin costs nothing, and the contract
(`check_loop`, `onebit prove`) runs without pytest installed.
"""

from __future__ import annotations

import importlib
import sys

#: Public name -> the module that defines it (docs/harness.md, "The public API", lists them).
_EXPORTS = {
    **dict.fromkeys(
        ("assert_logits_match", "assert_pass_law", "assert_plain_decode_equivalent",
         "assert_rows_in_order", "assert_tokens_equal", "describe_divergence", "pass_law",
         "relative_l1"), "pytest_onebit.contract.assertions"),
    **dict.fromkeys(("Check", "Contract"), "pytest_onebit.contract.core"),
    **dict.fromkeys(("ContractFailure", "Finding", "Report"), "pytest_onebit.contract.report"),
    **dict.fromkeys(("CHECKS", "LOOP"), "pytest_onebit.loop.checks"),
    **dict.fromkeys(("LoopContractError", "check_loop", "check_trace"),
                    "pytest_onebit.loop.runner"),
    **dict.fromkeys(("Scenario", "standard_scenarios", "arm_scenarios"),
                    "pytest_onebit.loop.scenarios"),
    "Trace": "pytest_onebit.loop.trace",
    "LoopContract": "pytest_onebit.loop.suite",
    **dict.fromkeys(("LoadError", "load_loop"), "pytest_onebit.loader"),
    **dict.fromkeys(("Oracle", "OracleHead", "garbage_head", "half_head", "over_head",
                     "pattern_head", "perfect_head", "short_head", "silent_head"),
                    "pytest_onebit.doubles.heads"),
    "ToyBase": "pytest_onebit.doubles.toy",
    **dict.fromkeys(("BASE", "BASE_CHECKS", "BaseSettings"), "pytest_onebit.base.checks"),
    **dict.fromkeys(("BaseModelContractError", "check_base"), "pytest_onebit.base.runner"),
    "BaseContract": "pytest_onebit.base.suite",
    **dict.fromkeys(("SAMPLING", "SAMPLING_CHECKS"), "pytest_onebit.sampling.checks"),
    "SamplingScenario": "pytest_onebit.sampling.scenarios",
    **dict.fromkeys(("SamplingContractError", "check_sampling"), "pytest_onebit.sampling.runner"),
    "SamplingContract": "pytest_onebit.sampling.suite",
    "assert_distribution_equivalent": "pytest_onebit.sampling.enumeration",
    **dict.fromkeys(("BATCH", "BATCH_CHECKS"), "pytest_onebit.batch.checks"),
    **dict.fromkeys(("BatchContractError", "check_batch", "onebit_batch_engine"),
                    "pytest_onebit.batch.runner"),
    **dict.fromkeys(("BatchScenario", "SeqSpec", "standard_batch_scenarios"),
                    "pytest_onebit.batch.scenarios"),
    "BatchContract": "pytest_onebit.batch.suite",
    "ToyBatchRows": "pytest_onebit.batch.toy",
    **dict.fromkeys(("SERVED", "SERVED_CHECKS"), "pytest_onebit.serve.checks"),
    **dict.fromkeys(("ServedContractError", "check_served", "onebit_served"),
                    "pytest_onebit.serve.runner"),
    **dict.fromkeys(("Ask", "ServedScenario", "standard_served_scenarios"),
                    "pytest_onebit.serve.scenarios"),
    "ServedContract": "pytest_onebit.serve.suite",
    "ServedToy": "pytest_onebit.serve.toy",
    "LibraryError": "pytest_onebit.native.library",
    "native_loop": "pytest_onebit.native.loop",
    "native_base_factory": "pytest_onebit.native.base",
    **dict.fromkeys(("NativeLoopContract", "abi_scenarios"), "pytest_onebit.native.suite"),
}

__all__ = sorted(_EXPORTS)

# Under pytest: rewrite asserts in the helpers so they read well.
if sys.modules.get("pytest") is not None:
    sys.modules["pytest"].register_assert_rewrite(
        "pytest_onebit.contract.assertions", "pytest_onebit.loop.checks",
        "pytest_onebit.loop.trace", "pytest_onebit.base.checks", "pytest_onebit.sampling.checks",
        "pytest_onebit.batch.checks", "pytest_onebit.serve.checks")


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_onebit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
